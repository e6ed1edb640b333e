"""Host paths, privileged equivalents and the sound privileged exception (issue 22, 3-4).

One table per mechanism, through the engine; the `check` CLI as a subprocess once with and
once without an inventory. Every row names the rule it expects (or none: the controls
that stay allowed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.builders import (
    POLICIES,
    cluster_nodes,
    container,
    messages,
    node,
    only,
    pod,
    rules,
    run,
)
from tests.support.clirun import gpu_admission
from webhook.core.access.container_env import ContainerEnv
from webhook.core.access.subpaths import Unknowable, expand_sub_path
from webhook.core.engine.policy import PolicySet
from webhook.core.supply.inventory import Inventory
from webhook.core.supply.profiles import GENERIC, ClusterProfile, GpuNodes, TaintFact

POLICY = only("gpu-device-injection")
FIX = (
    "request GPUs through resources.limits (e.g. nvidia.com/gpu: 1) so the device plugin "
    "allocates them"
)


def profiled(profile: ClusterProfile, base: PolicySet = POLICY) -> PolicySet:
    return PolicySet(
        base.policies, base.custom_kinds, base.digest, base.unconfigured_gpu_action, profile
    )


def mounting(path: str, *, field: str = "containers", **mount: Any) -> dict[str, Any]:
    """A pod whose container (in `field`) mounts hostPath `path` with these mount fields."""
    c = container("x", volumeMounts=[{"name": "h", "mountPath": "/host", **mount}])
    spec: dict[str, Any] = {"volumes": [{"name": "h", "hostPath": {"path": path}}]}
    if field == "containers":
        return pod(c, **spec)
    return pod(container("app"), **{field: [c]}, **spec)


RO = {"readOnly": True}
# -- host paths ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "mount", "field", "expected"),
    [
        # The GPU Operator's containerised driver: its dev is the node's /dev.
        ("/run/nvidia/driver/dev/nvidia0", {}, "containers", ["hostpath-device"]),
        ("/var/run/nvidia/driver/dev/nvidiactl", RO, "initContainers", ["hostpath-device"]),
        ("/run/nvidia/driver", RO, "ephemeralContainers", ["hostpath-device"]),
        ("/run/nvidia", {}, "containers", ["hostpath-device"]),
        ("/var/run", RO, "containers", ["hostpath-device"]),
        ("/run/nvidia/driver", {"subPath": "dev/nvidia-uvm"}, "containers", ["hostpath-device"]),
        ("/dev/vfio", {}, "containers", ["hostpath-device"]),
        ("/dev/vfio/12", {}, "initContainers", ["hostpath-device"]),
        # CRI sockets and the directories holding them; readOnly does not stop connect().
        ("/run/containerd/containerd.sock", RO, "containers", ["hostpath-runtime-socket"]),
        ("/var/run/containerd", {}, "containers", ["hostpath-runtime-socket"]),
        ("/var/run/crio/crio.sock", {}, "ephemeralContainers", ["hostpath-runtime-socket"]),
        ("/var/run/docker.sock", RO, "containers", ["hostpath-runtime-socket"]),
        ("/run/k3s/containerd", {}, "containers", ["hostpath-runtime-socket"]),
        ("/run/k3s", {}, "containers", ["hostpath-runtime-socket"]),
        # The kubelet's device-plugin and pod-resources sockets.
        ("/var/lib/kubelet/device-plugins", RO, "containers", ["hostpath-kubelet-socket"]),
        ("/var/lib/kubelet/device-plugins/kubelet.sock", {}, "containers",
         ["hostpath-kubelet-socket"]),
        ("/var/lib/kubelet/pod-resources", RO, "initContainers", ["hostpath-kubelet-socket"]),
        ("/var/lib/kubelet", RO, "containers", ["hostpath-kubelet-socket"]),
        ("/var/lib", {}, "containers", ["hostpath-kubelet-socket"]),
        # Writable device configuration; read-only stays allowed.
        ("/var/run/cdi", {}, "containers", ["hostpath-writable-device-config"]),
        ("/run/cdi", {"readOnly": False}, "initContainers", ["hostpath-writable-device-config"]),
        ("/etc/cdi", {}, "ephemeralContainers", ["hostpath-writable-device-config"]),
        ("/etc", {}, "containers", ["hostpath-writable-device-config"]),
        ("/etc", {"subPath": "cdi"}, "containers", ["hostpath-writable-device-config"]),
        ("/sys/bus/pci/devices", {}, "containers", ["hostpath-writable-device-config"]),
        ("/sys/bus/pci", {}, "containers", ["hostpath-writable-device-config"]),
        ("/sys/bus", {}, "containers", ["hostpath-writable-device-config"]),
        ("/sys", {}, "containers", ["hostpath-writable-device-config"]),
        ("/sys/devices/pci0000:00", {}, "containers", ["hostpath-writable-device-config"]),
        ("/sys", {"subPath": "bus/pci/devices"}, "containers", ["hostpath-writable-device-config"]),
        # The controls that stay allowed.
        ("/var/run/cdi", RO, "containers", []),
        ("/etc/cdi", RO, "initContainers", []),
        ("/etc", RO, "containers", []),
        ("/sys", RO, "containers", []),
        ("/sys/bus/pci", RO, "ephemeralContainers", []),
        ("/sys/fs/cgroup", {}, "containers", []),
        ("/proc", RO, "containers", []),
        ("/dev/shm", {}, "containers", []),
        ("/dev/infiniband", {}, "containers", []),
        ("/usr/lib/x86_64-linux-gnu", RO, "containers", []),
        ("/run/nvidia/driver/usr/lib/x86_64-linux-gnu", RO, "containers", []),
        ("/var/log", {}, "containers", []),
        ("/var/lib/kubelet/pods", {}, "containers", []),
    ],
)  # fmt: skip
def test_host_paths(path: str, mount: dict[str, Any], field: str, expected: list[str]) -> None:
    assert rules(run(POLICY, mounting(path, field=field, **mount))) == expected


def test_a_read_only_root_leaves_sys_writable() -> None:
    # readOnly is not recursive: /sys and /run are their own filesystems below /.
    obj = mounting("/", readOnly=True)
    assert rules(run(POLICY, obj)) == ["hostpath-device"]  # a parent of /dev first
    devices = POLICY.policies[0].params.rules.devices  # type: ignore[attr-defined]
    assert devices.writable("/", read_only=True, recursive=False) is not None
    assert devices.writable("/", read_only=True, recursive=True) is None
    assert devices.writable("/sys", read_only=True, recursive=False) is None


def test_alias_and_path_are_judged_alike() -> None:
    for a, b in (("/var/run/cdi", "/run/cdi"), ("/var/run/docker.sock", "/run/docker.sock")):
        assert rules(run(POLICY, mounting(a))) == rules(run(POLICY, mounting(b)))


HOST_MESSAGES = [
    (
        mounting("/var/run/nvidia/driver/dev/nvidia0"),
        'hostPath volume "h" (spec.volumes[0].hostPath.path) exposes host path '
        '"/var/run/nvidia/driver/dev/nvidia0", a GPU device node: driver root '
        '/run/nvidia/driver holds the node\'s devices, mounted by container "x": the '
        "container reaches GPUs the device plugin never allocated, so the scheduler can hand "
        f"the same GPU to another Pod. Remove the hostPath volume and {FIX}.",
    ),
    (
        mounting("/run/containerd"),
        'hostPath volume "h" (spec.volumes[0].hostPath.path) exposes host path '
        '"/run/containerd", a directory holding container runtime sockets '
        '(/run/containerd/containerd.sock), mounted by container "x": whoever connects to a '
        "container runtime's socket can start a privileged container on the node, with every "
        "GPU (a node takeover). Remove the hostPath volume (only node agents in an exempt "
        "namespace need the runtime's socket).",
    ),
    (
        mounting("/etc/cdi"),
        'container "x" mounts hostPath volume "h" (host path "/etc/cdi") writable '
        "(spec.containers[0].volumeMounts[0].readOnly), the CDI spec directory /etc/cdi: the "
        "device plugin and DRA drivers write CDI specs there, and the container runtime "
        "injects the devices a spec names into later containers: a writable mount lets this "
        "Pod hand any device to them. Mount it readOnly: true (with recursiveReadOnly: "
        "Enabled when it spans /sys or /run), or remove it.",
    ),
    (
        mounting("/sys", subPath="bus/pci"),
        'container "x" mounts hostPath volume "h" (host path "/sys") with subPath "bus/pci", '
        'which is host path "/sys/bus/pci" writable '
        "(spec.containers[0].volumeMounts[0].subPath), the sysfs device tree /sys/bus/pci: "
        "through a writable sysfs device tree the container can reset, unbind or remove any "
        "GPU of the node, other tenants' included. Mount it readOnly: true (with "
        "recursiveReadOnly: Enabled when it spans /sys or /run), or remove it.",
    ),
]


@pytest.mark.parametrize(("obj", "message"), HOST_MESSAGES)
def test_host_path_messages_in_full(obj: dict[str, Any], message: str) -> None:
    assert messages(run(POLICY, obj)) == [message]


# -- subPathExpr ------------------------------------------------------------------------------

FROM_ANNOTATION = {"fieldRef": {"fieldPath": "metadata.annotations['dir']"}}


@pytest.mark.parametrize(
    ("volume", "expr", "env", "extra", "expected"),
    [
        # A literal value is expanded as the kubelet does.
        ("/proc", "$(D)", [{"name": "D", "value": "driver/nvidia"}], {}, ["hostpath-device"]),
        ("/opt", "$(A)/$(B)", [{"name": "A", "value": "../dev"}, {"name": "B", "value": "nvidia0"}],
         {}, ["hostpath-device"]),
        # A value built from an earlier variable.
        ("/proc", "$(D)", [{"name": "X", "value": "nvidia"}, {"name": "D", "value": "driver/$(X)"}],
         {}, ["hostpath-device"]),
        # $$ escapes: $(D) is then a directory named so, no device.
        ("/proc", "$$(D)", [{"name": "D", "value": "driver/nvidia"}], {}, []),
        # valueFrom: a fieldRef to an annotation can hold any text.
        ("/proc", "$(D)", [{"name": "D", "valueFrom": FROM_ANNOTATION}], {}, ["hostpath-device"]),
        ("/etc", "$(D)", [{"name": "D", "valueFrom": FROM_ANNOTATION}], {},
         ["hostpath-writable-device-config"]),
        # A name an envFrom source may set, and one it cannot (its prefix).
        ("/proc", "$(D)", [], {"envFrom": [{"configMapRef": {"name": "c"}}]},
         ["hostpath-device", "visible-devices-env-from"]),
        ("/proc", "$(D)", [], {"envFrom": [{"prefix": "APP_", "configMapRef": {"name": "c"}}]}, []),
        # Nothing below the volume can reach GPUs, or the kubelet refuses the mount.
        ("/var/log", "$(D)", [{"name": "D", "valueFrom": FROM_ANNOTATION}], {}, []),
        ("/etc", "$(D)", [{"name": "D", "valueFrom": FROM_ANNOTATION}], {"readOnly": True}, []),
        ("/proc", "$(D)", [{"name": "D", "value": ""}], {}, []),  # empty: refused
        ("/proc", "meminfo", [], {}, []),
    ],
)  # fmt: skip
def test_sub_path_expr(
    volume: str, expr: str, env: list[Any], extra: dict[str, Any], expected: list[str]
) -> None:
    env_from = extra.pop("envFrom", None)
    c = container(
        "x",
        env=env,
        volumeMounts=[{"name": "h", "mountPath": "/host", "subPathExpr": expr, **extra}],
    )
    if env_from is not None:
        c["envFrom"] = env_from
    obj = pod(c, volumes=[{"name": "h", "hostPath": {"path": volume}}])
    assert rules(run(POLICY, obj)) == expected


def test_unknowable_sub_path_message_in_full() -> None:
    c = container(
        "x",
        env=[{"name": "D", "valueFrom": FROM_ANNOTATION}],
        volumeMounts=[{"name": "h", "mountPath": "/host", "subPathExpr": "$(D)"}],
    )
    obj = pod(c, volumes=[{"name": "h", "hostPath": {"path": "/proc"}}])
    assert messages(run(POLICY, obj)) == [
        'container "x" mounts hostPath volume "h" (host path "/proc") with subPathExpr '
        '"$(D)" (spec.containers[0].volumeMounts[0].subPathExpr), which the kubelet expands '
        "on the node to any path below it (D cannot be known at admission): "
        "/proc/driver/nvidia, /proc/<pid>/root lie below: the container reaches GPUs the "
        "device plugin never allocated, so the scheduler can hand the same GPU to another "
        "Pod. Use a literal subPath, or take the variables from literal env values."
    ]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("$(A)", "a"),
        ("$$(A)", "$(A)"),
        ("$$$$(A)", "$$(A)"),
        ("$(A", "$(A"),
        ("x$yz", "x$yz"),
        ("$", "$"),
        ("$(MISSING)", "$(MISSING)"),
        ("$(E)", None),  # empty: ExpandContainerVolumeMounts refuses it
        ("$(U)", Unknowable(("U",))),
    ],
)
def test_expansion_follows_the_kubelet(expr: str, expected: object) -> None:
    env = ContainerEnv([{"name": "A", "value": "a"}, {"name": "E", "value": ""},
                        {"name": "U", "valueFrom": FROM_ANNOTATION}], [])  # fmt: skip
    assert expand_sub_path(expr, env) == expected


def test_expansion_is_bounded() -> None:
    # Each value doubles the last: 2^60 characters if nothing cut it at PATH_MAX.
    env = [{"name": "A0", "value": "x" * 10}]
    env += [{"name": f"A{i}", "value": f"$(A{i - 1})$(A{i - 1})"} for i in range(1, 61)]
    # The env's own expansion stops at 64 KiB (unknowable); a subPathExpr at PATH_MAX.
    assert expand_sub_path("$(A60)", ContainerEnv(env, [])) == Unknowable(("A60",))
    assert expand_sub_path("$(A8)$(A8)", ContainerEnv(env, [])) is None  # 5120: too long


# -- privileged equivalents --------------------------------------------------------------------

SYS_ADMIN = {"capabilities": {"add": ["SYS_ADMIN"]}}
RUNTIME_DEFAULT = {"seccompProfile": {"type": "RuntimeDefault"}}


def secure(
    security: dict[str, Any], *, field: str = "containers", annotations: Any = None, **spec: Any
) -> dict[str, Any]:
    c = container("x", securityContext=security)
    if field == "containers":
        return pod(c, annotations=annotations, **spec)
    return pod(container("app"), annotations=annotations, **{field: [c]}, **spec)


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        # SYS_ADMIN or ALL, unconfined by seccomp (unset: the kubelet's Unconfined) or AppArmor.
        (secure(SYS_ADMIN), ["sys-admin-unconfined"]),
        (secure({"capabilities": {"add": ["cap_sys_admin"]}}, field="initContainers"),
         ["sys-admin-unconfined"]),
        (secure({"capabilities": {"add": ["ALL"]}, **RUNTIME_DEFAULT,
                 "appArmorProfile": {"type": "Unconfined"}}, field="ephemeralContainers"),
         ["sys-admin-unconfined"]),
        (secure({**SYS_ADMIN, "seccompProfile": {"type": "Unconfined"}}),
         ["sys-admin-unconfined"]),
        (secure(SYS_ADMIN, securityContext={"seccompProfile": {"type": "Unconfined"}}),
         ["sys-admin-unconfined"]),
        # The legacy annotations the apiserver copies into unset fields.
        (secure(SYS_ADMIN, annotations={"container.apparmor.security.beta.kubernetes.io/x":
                                        "unconfined"},
                securityContext={"seccompProfile": {"type": "RuntimeDefault"}}),
         ["sys-admin-unconfined"]),
        (secure(SYS_ADMIN, annotations={"seccomp.security.alpha.kubernetes.io/pod":
                                        "unconfined"}),
         ["sys-admin-unconfined"]),
        # Confined: allowed.
        (secure({**SYS_ADMIN, **RUNTIME_DEFAULT}), []),
        (secure(SYS_ADMIN, securityContext=RUNTIME_DEFAULT), []),
        (secure(SYS_ADMIN, annotations={"container.seccomp.security.alpha.kubernetes.io/x":
                                        "runtime/default"}), []),
        # hostPID with the capabilities that enter the host.
        (secure({"capabilities": {"add": ["SYS_PTRACE"]}}, hostPID=True),
         ["host-pid-capabilities"]),
        (secure({"capabilities": {"add": ["ALL"]}}, field="initContainers", hostPID=True),
         ["host-pid-capabilities"]),
        (secure({**SYS_ADMIN, **RUNTIME_DEFAULT}, hostPID=True), ["host-pid-capabilities"]),
        (secure({"capabilities": {"add": ["NET_ADMIN"]}}, hostPID=True), []),
        # Windows HostProcess, pod or container.
        (secure({}, securityContext={"windowsOptions": {"hostProcess": True}}),
         ["host-process"]),
        (secure({"windowsOptions": {"hostProcess": True}}, field="initContainers"),
         ["host-process"]),
        (secure({"windowsOptions": {"hostProcess": False}}), []),
        # Alone, these stay allowed.
        (secure({"capabilities": {"add": ["NET_ADMIN", "IPC_LOCK", "SYS_PTRACE"]}}), []),
        (secure({"capabilities": {"add": ["SYS_RESOURCE"]}}, hostPID=True), []),
    ],
)  # fmt: skip
def test_privileged_equivalents(obj: dict[str, Any], expected: list[str]) -> None:
    assert rules(run(POLICY, obj)) == expected


def test_seccomp_default_in_the_profile_confines_an_unset_profile() -> None:
    hardened = profiled(ClusterProfile(seccomp_default=True))
    assert rules(run(hardened, secure(SYS_ADMIN))) == []
    annotated = secure(
        SYS_ADMIN, annotations={"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}
    )
    assert rules(run(hardened, annotated)) == ["sys-admin-unconfined"]


PRIVILEGE_MESSAGES = [
    (
        secure(SYS_ADMIN),
        'container "x" adds capability SYS_ADMIN '
        "(spec.containers[0].securityContext.capabilities.add[0]) and runs with no seccomp "
        "profile, which the kubelet runs as Unconfined (the cluster profile does not say the "
        "kubelets run with seccompDefault): it can mount filesystems and lift its device "
        "cgroup, which reaches every GPU of the node like privileged mode, whatever it "
        "requests. Drop the capability, or confine it with seccompProfile and "
        f"appArmorProfile type RuntimeDefault, and {FIX}.",
    ),
    (
        secure({"capabilities": {"add": ["SYS_PTRACE"]}}, hostPID=True),
        'container "x" adds capability SYS_PTRACE '
        "(spec.containers[0].securityContext.capabilities.add[0]) in a Pod with hostPID: "
        "true: it can open the host's processes' /proc/<pid>/root (the host's root "
        "filesystem) and enter their namespaces, which reaches every GPU of the node like "
        f"privileged mode, whatever it requests. Remove hostPID or the capability, and {FIX}.",
    ),
    (
        secure({}, securityContext={"windowsOptions": {"hostProcess": True}}),
        "the Pod runs as a Windows HostProcess "
        "(spec.securityContext.windowsOptions.hostProcess): its processes run on the host "
        "with the host's devices, which reaches every GPU of the node like privileged mode, "
        f"whatever it requests. Remove hostProcess and {FIX}.",
    ),
]


@pytest.mark.parametrize(("obj", "message"), PRIVILEGE_MESSAGES)
def test_privilege_messages_in_full(obj: dict[str, Any], message: str) -> None:
    assert messages(run(POLICY, obj)) == [message]


# -- the privileged exception --------------------------------------------------------------

PRIVILEGED = container("main", securityContext={"privileged": True})
GPU_TAINT = TaintFact("nvidia.com/gpu", "present", "NoSchedule")
TAINTED = ClusterProfile(gpu_nodes=GpuNodes(taints=(GPU_TAINT,)))
NO_EXECUTE = ClusterProfile(gpu_nodes=GpuNodes(taints=(TaintFact("gpu", None, "NoExecute"),)))
LABELLED = ClusterProfile(gpu_nodes=GpuNodes(labels=(("cloud.google.com/gke-accelerator", None),)))
KEYED = ClusterProfile(gpu_nodes=GpuNodes(labels=(("pool", "gpu"),)))
WITH_CPU = Inventory.from_nodes([*cluster_nodes(), node("cpu-1")])
TOLERATE_ALL = [{"operator": "Exists"}]


def affinity(*expressions: dict[str, Any]) -> dict[str, Any]:
    terms = [{"matchExpressions": [e]} for e in expressions]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": terms}}}  # fmt: skip


@pytest.mark.parametrize(
    ("obj", "profile", "inventory", "expected"),
    [
        # nodeName: a known node without GPUs cannot reach one; a GPU node (tainted
        # NoSchedule: the kubelet does not look) or an unknown node can.
        (pod(PRIVILEGED, nodeName="cpu-1"), GENERIC, WITH_CPU, []),
        (pod(PRIVILEGED, nodeName="h100-a"), GENERIC, WITH_CPU, ["privileged"]),
        (pod(PRIVILEGED, nodeName="h100-a"), TAINTED, WITH_CPU, ["privileged"]),
        (pod(PRIVILEGED, nodeName="new-node"), GENERIC, WITH_CPU, ["privileged"]),
        (pod(PRIVILEGED, nodeName="cpu-1"), GENERIC, Inventory.unknown(), ["privileged"]),
        # ... unless a NoExecute taint every GPU node carries is not tolerated.
        (pod(PRIVILEGED, nodeName="new-node"), NO_EXECUTE, WITH_CPU, []),
        (pod(PRIVILEGED, nodeName="new-node", tolerations=TOLERATE_ALL), NO_EXECUTE,
         WITH_CPU, ["privileged"]),
        # The scheduler: a taint every GPU node carries, not tolerated, keeps it off them,
        # with or without an inventory.
        (pod(PRIVILEGED), TAINTED, WITH_CPU, []),
        (pod(PRIVILEGED), TAINTED, Inventory.unknown(), []),
        (pod(PRIVILEGED, tolerations=TOLERATE_ALL), TAINTED, WITH_CPU, ["privileged"]),
        (pod(PRIVILEGED, tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]),
         TAINTED, WITH_CPU, ["privileged"]),
        (pod(PRIVILEGED, tolerations=[{"key": "nvidia.com/gpu", "value": "other"}]),
         TAINTED, WITH_CPU, []),
        # ExtendedResourceToleration adds the toleration for a GPU request.
        (pod(container("main", securityContext={"privileged": True},
                       limits={"nvidia.com/gpu": 1})),
         ClusterProfile("gke", extended_resource_toleration=True,
                        gpu_nodes=GpuNodes(taints=(GPU_TAINT,))), WITH_CPU, ["privileged"]),
        # A label every GPU node carries, ruled out by the required affinity.
        (pod(PRIVILEGED, affinity=affinity({"key": "cloud.google.com/gke-accelerator",
                                            "operator": "DoesNotExist"})),
         LABELLED, WITH_CPU, []),
        (pod(PRIVILEGED, affinity=affinity({"key": "cloud.google.com/gke-accelerator",
                                            "operator": "NotIn", "values": ["nvidia-l4"]})),
         LABELLED, WITH_CPU, ["privileged"]),
        (pod(PRIVILEGED, nodeSelector={"pool": "cpu"}), KEYED, WITH_CPU, []),
        (pod(PRIVILEGED, affinity=affinity({"key": "pool", "operator": "In",
                                            "values": ["cpu"]})), KEYED, WITH_CPU, []),
        (pod(PRIVILEGED, affinity=affinity({"key": "pool", "operator": "In", "values": ["cpu"]},
                                           {"key": "zone", "operator": "Exists"})),
         KEYED, WITH_CPU, ["privileged"]),  # the second term may match a GPU node
        # ... which the kubelet checks for a nodeName too.
        (pod(PRIVILEGED, nodeName="new-node", nodeSelector={"pool": "cpu"}), KEYED,
         WITH_CPU, []),
        # A nodeSelector that matches no node today proves nothing.
        (pod(PRIVILEGED, nodeSelector={"pool": "tomorrow"}), GENERIC, WITH_CPU, ["privileged"]),
    ],
)  # fmt: skip
def test_the_privileged_exception_is_sound(
    obj: dict[str, Any], profile: ClusterProfile, inventory: Inventory, expected: list[str]
) -> None:
    assert rules(run(profiled(profile), obj, inventory)) == expected


def test_the_exception_covers_controllers_and_every_equivalent() -> None:
    spec = {
        "nodeName": "cpu-1",
        "hostPID": True,
        "containers": [container("x", securityContext={"capabilities": {"add": ["ALL"]}})],
    }
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}}, "spec": spec}},
    }  # fmt: skip
    assert rules(run(POLICY, deployment, WITH_CPU)) == []
    assert rules(run(POLICY, deployment)) == ["host-pid-capabilities"]


# -- through the check CLI ------------------------------------------------------------------

PROFILE_DOC = """\
apiVersion: gpu-admission.io/v1alpha1
kind: ClusterProfile
metadata: {name: prod}
spec:
  gpuNodes:
    taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
    labels: [pool=gpu]
  containerToolkit: {acceptEnvvarUnprivileged: false, deviceListStrategy: volume-mounts}
  kubelet: {seccompDefault: true}
"""
MANIFESTS = """\
apiVersion: v1
kind: Pod
metadata: {name: pinned-to-cpu}
spec:
  nodeName: cpu-1
  containers: [{name: main, securityContext: {privileged: true}}]
---
apiVersion: v1
kind: Pod
metadata: {name: socket}
spec:
  containers:
  - name: main
    volumeMounts: [{name: cri, mountPath: /run/containerd.sock, readOnly: true}]
  volumes: [{name: cri, hostPath: {path: /var/run/containerd/containerd.sock}}]
---
apiVersion: v1
kind: Pod
metadata: {name: untolerated}
spec:
  containers: [{name: main, securityContext: {privileged: true}}]
"""


def check(tmp_path: Path, *args: str) -> list[tuple[str, str]]:
    (tmp_path / "pods.yaml").write_text(MANIFESTS)
    done = gpu_admission("check", "--output", "json", *args, str(tmp_path / "pods.yaml"))
    assert done.returncode == 1, done.stderr
    return [(r["name"], r["rule"]) for r in json.loads(done.stdout)["results"]]


def test_check_cli_without_and_with_an_inventory(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                     "items": [node("cpu-1"), node("gpu-1")]}))  # fmt: skip
    found = [
        ("pinned-to-cpu", "privileged"),
        ("socket", "hostpath-runtime-socket"),
        ("untolerated", "privileged"),
    ]
    assert check(tmp_path) == found  # no inventory: cpu-1 may be anything
    assert check(tmp_path, "--inventory", str(nodes)) == found[1:]


def test_check_cli_reads_the_profile_facts(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    for name in ("gpu-device-injection.yaml", "workload-kinds.yaml"):
        (policies / name).write_text((POLICIES / name).read_text())
    (policies / "profile.yaml").write_text(PROFILE_DOC)
    # The profile's taint keeps the untolerated privileged Pod off every GPU node.
    assert check(tmp_path, "--policies", str(policies)) == [
        ("pinned-to-cpu", "privileged"),
        ("socket", "hostpath-runtime-socket"),
    ]


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("gpuNodes: {taints: [{key: gpu, effect: PreferNoSchedule}]}", "effect"),
        ("gpuNodes: {labels: ['not a key']}", "labels"),
        ("containerToolkit: {deviceListStrategy: mounts}", "deviceListStrategy"),
        ("kubelet: {seccompDefault: maybe}", "seccompDefault"),
    ],
)
def test_bad_profile_facts_are_policy_errors(tmp_path: Path, spec: str, error: str) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "gpu-device-injection.yaml").write_text(
        (POLICIES / "gpu-device-injection.yaml").read_text()
    )
    (policies / "profile.yaml").write_text(
        "apiVersion: gpu-admission.io/v1alpha1\nkind: ClusterProfile\n"
        f"metadata: {{name: p}}\nspec:\n  {spec}\n"
    )
    (tmp_path / "p.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    done = gpu_admission("check", "--policies", str(policies), str(tmp_path / "p.yaml"))
    assert done.returncode == 2
    assert "profile.yaml" in done.stderr and error in done.stderr
    assert "Traceback" not in done.stderr
