"""Privileged mode and what amounts to it: a container that reaches every device of the node.

- `privileged: true`: the runtime gives the container every host device.
- SYS_ADMIN (or ALL) with seccomp or AppArmor unconfined: mount, and the cgroup and BPF
  calls that lift the device cgroup, are then open to the container. The kubelet gives a
  container with no seccomp profile `Unconfined` unless it runs with `seccompDefault`
  (pkg/kubelet/kuberuntime/helpers.go fieldSeccompProfile,
  kubernetes/kubernetes@e2cf0fe0), so the profile's fact decides an unset one (the check
  reads it); AppArmor unset is the runtime's default profile.
- hostPID with SYS_PTRACE, SYS_ADMIN or ALL: the host's processes are visible, and these
  capabilities pass the kernel's ptrace access check that guards `/proc/<pid>/root` and
  `/proc/<pid>/ns/*` (proc(5), ptrace(2) "Ptrace access mode checking"): the host's root
  filesystem, and `nsenter` into its namespaces.
- Windows `hostProcess` (pod or container `windowsOptions`): the container runs as a
  process on the host, with the host's devices (Pod Security Standards baseline,
  staging/src/k8s.io/pod-security-admission/policy/check_windowsHostProcess.go,
  kubernetes/kubernetes@da0c8de9).

Legacy annotations still count: the apiserver copies `seccomp.security.alpha.kubernetes.io/pod`,
`container.seccomp.security.alpha.kubernetes.io/<name>` and
`container.apparmor.security.beta.kubernetes.io/<name>` into the fields a Pod lacks
(pkg/registry/core/pod/strategy.go applySeccompVersionSkew and applyAppArmorVersionSkew,
kubernetes/kubernetes@03e06024), and a manifest in a PR has not met the apiserver yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from webhook.core.kit.paths import Path
from webhook.core.workloads.pods import ContainerRef, PodView

PrivilegeKind = Literal["privileged", "sys-admin", "host-pid", "host-process"]
_SECCOMP_POD = "seccomp.security.alpha.kubernetes.io/pod"
_SECCOMP_CONTAINER = "container.seccomp.security.alpha.kubernetes.io/"
_APPARMOR_CONTAINER = "container.apparmor.security.beta.kubernetes.io/"
# Capabilities that pass the ptrace access check on host processes or enter their
# namespaces (setns into a mount namespace needs CAP_SYS_ADMIN: setns(2)).
HOST_PID_CAPABILITIES = frozenset({"SYS_PTRACE", "SYS_ADMIN", "ALL"})


class Privilege(NamedTuple):
    """What makes a container privileged or its equal, for the check to word."""

    kind: PrivilegeKind
    capability: str = ""  # sys-admin, host-pid: the capability as written
    seccomp: str | None = None  # sys-admin: the effective type (Unconfined, ...), None unset
    seccomp_path: Path = ()  # where it is set
    apparmor: str | None = None  # sys-admin: the effective type, None unset
    apparmor_path: Path = ()


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def capability_name(raw: object) -> str:
    """`cap_sys_admin` -> `SYS_ADMIN`: the runtimes take either spelling, in any case."""
    name = raw.upper() if type(raw) is str else ""
    return name[4:] if name.startswith("CAP_") else name


def container_privileges(
    pod: PodView, c: ContainerRef, security: Mapping[str, Any]
) -> list[tuple[Path, Privilege]]:
    """The privileges a container's securityContext gives it, each with its field."""
    found: list[tuple[Path, Privilege]] = []
    if security.get("privileged") is True:
        found.append(((*c.path, "securityContext", "privileged"), Privilege("privileged")))
    if _map(security.get("windowsOptions")).get("hostProcess") is True:
        where = (*c.path, "securityContext", "windowsOptions", "hostProcess")
        found.append((where, Privilege("host-process")))
    added = _map(security.get("capabilities")).get("add")
    if type(added) is list and added:
        found += _capabilities(pod, c, security, added)
    return found


def _capabilities(
    pod: PodView, c: ContainerRef, security: Mapping[str, Any], added: list[Any]
) -> list[tuple[Path, Privilege]]:
    found: list[tuple[Path, Privilege]] = []
    host_pid = pod.spec.get("hostPID") is True
    for index, raw in enumerate(added):
        name = capability_name(raw)
        where = (*c.path, "securityContext", "capabilities", "add", index)
        if host_pid and name in HOST_PID_CAPABILITIES:
            found.append((where, Privilege("host-pid", str(raw))))
            break
        if name in ("SYS_ADMIN", "ALL"):
            seccomp, seccomp_path = _seccomp(pod, c, security)
            apparmor, apparmor_path = _apparmor(pod, c, security)
            found.append(
                (
                    where,
                    Privilege(
                        "sys-admin", str(raw), seccomp, seccomp_path, apparmor, apparmor_path
                    ),
                )
            )
            break
    return found


def _seccomp(pod: PodView, c: ContainerRef, security: Mapping[str, Any]) -> tuple[str | None, Path]:
    """The container's seccomp profile type: its field, its annotation, the pod's field,
    the pod's annotation (applySeccompVersionSkew fills a field only where it is unset)."""
    kind = _map(security.get("seccompProfile")).get("type")
    if type(kind) is str:
        return kind, (*c.path, "securityContext", "seccompProfile", "type")
    key = _SECCOMP_CONTAINER + c.name
    if key in pod.annotations:
        return _legacy(pod.annotations[key]), (*pod.metadata_path, "annotations", key)
    pod_security = _map(pod.spec.get("securityContext"))
    kind = _map(pod_security.get("seccompProfile")).get("type")
    if type(kind) is str:
        return kind, pod.where("securityContext", "seccompProfile", "type")
    if _SECCOMP_POD in pod.annotations:
        where = (*pod.metadata_path, "annotations", _SECCOMP_POD)
        return _legacy(pod.annotations[_SECCOMP_POD]), where
    return None, ()


def _apparmor(
    pod: PodView, c: ContainerRef, security: Mapping[str, Any]
) -> tuple[str | None, Path]:
    """The container's AppArmor profile type: its field, its annotation, the pod's field
    (applyAppArmorVersionSkew)."""
    kind = _map(security.get("appArmorProfile")).get("type")
    if type(kind) is str:
        return kind, (*c.path, "securityContext", "appArmorProfile", "type")
    key = _APPARMOR_CONTAINER + c.name
    if key in pod.annotations:
        return _legacy(pod.annotations[key]), (*pod.metadata_path, "annotations", key)
    kind = _map(_map(pod.spec.get("securityContext")).get("appArmorProfile")).get("type")
    if type(kind) is str:
        return kind, pod.where("securityContext", "appArmorProfile", "type")
    return None, ()


def _legacy(value: object) -> str:
    """An annotation's value as the field's type: `unconfined` is Unconfined
    (podutil SeccompFieldForAnnotation, ApparmorFieldForAnnotation)."""
    text = value if type(value) is str else ""
    if text == "unconfined":
        return "Unconfined"
    if text in ("runtime/default", "docker/default"):
        return "RuntimeDefault"
    return "Localhost" if text.startswith("localhost/") else text


def pod_host_process(pod: PodView) -> Path | None:
    """The pod-level `windowsOptions.hostProcess: true`, which every container takes."""
    options = _map(_map(pod.spec.get("securityContext")).get("windowsOptions"))
    if options.get("hostProcess") is True:
        return pod.where("securityContext", "windowsOptions", "hostProcess")
    return None
