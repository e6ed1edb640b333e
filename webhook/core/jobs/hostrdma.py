"""The host as the RDMA path: host namespaces, privileged mode and the node's IB devices.

A training Pod that asks for GPUs and takes hostNetwork, hostIPC, privileged mode or a
hostPath of /dev/infiniband sees the node's NICs, its shared memory or every device of
the node. Some clouds document exactly this for their fabric, so a platform names where
it is allowed (namespaces, Pod labels: `FabricRules.host_rdma_*`) and it is reported
elsewhere. See docs/distributed.md "How to allow host RDMA where a cloud needs it".
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.core.access.hostpaths import normalise
from webhook.core.jobs.fabric import FabricRules, gpu_count, who
from webhook.core.kit.paths import Path
from webhook.core.kit.text import glob_matcher, shown
from webhook.core.kit.violation import Violation
from webhook.core.workloads.kinds import WorkloadView
from webhook.core.workloads.pods import PodView

INFINIBAND = "/dev/infiniband"


def host_rdma(
    workload: WorkloadView, *, rules: FabricRules, namespace: str = ""
) -> list[Violation]:
    """hostNetwork, hostIPC, privileged or hostPath /dev/infiniband in a GPU Pod, outside
    the namespaces and Pod labels the platform allows them in."""
    if rules.host_rdma_namespaces and glob_matcher(rules.host_rdma_namespaces)(namespace):
        return []
    out: list[Violation] = []
    for role in workload.roles:
        pod = role.pod
        gpus = gpu_count(pod, rules)
        if gpus == 0 or _labelled(pod.labels, rules.host_rdma_labels):
            continue
        for where, what in host_paths_to_fabric(pod):
            out.append(
                Violation(
                    "host-rdma",
                    where,
                    f"{who(workload, role)} asks for {gpus} GPU{'s' if gpus > 1 else ''} "
                    f"and {what}: the rank shares the node's {_shares(what)}; allow it "
                    "only where the platform runs its fabric this way (the policy's "
                    "hostRdmaNamespaces or hostRdmaLabels), else use the device plugin's "
                    "RDMA resources",
                )
            )
    return out


def _shares(what: str) -> str:
    if what.startswith("hostNetwork"):
        return "network namespace (every interface, every port)"
    if what.startswith("hostIPC"):
        return "IPC namespace and /dev/shm with every host process"
    if what.startswith("privileged"):
        return "devices: every GPU and NIC of the node, not only its own"
    return "InfiniBand devices, every HCA of the node"


def host_paths_to_fabric(pod: PodView) -> list[tuple[Path, str]]:
    """The fields that give the Pod the host's network, IPC or IB devices."""
    found: list[tuple[Path, str]] = []
    spec = pod.spec
    if spec.get("hostNetwork") is True:
        found.append((pod.where("hostNetwork"), "hostNetwork: true"))
    if spec.get("hostIPC") is True:
        found.append((pod.where("hostIPC"), "hostIPC: true"))
    for c in pod.containers:
        security = c.spec.get("securityContext")
        if isinstance(security, Mapping) and security.get("privileged") is True:
            found.append(
                ((*c.path, "securityContext", "privileged"), f"privileged: true ({c.label})")
            )
    volumes = spec.get("volumes")
    for i, volume in enumerate(volumes if type(volumes) is list else ()):
        host = volume.get("hostPath") if isinstance(volume, Mapping) else None
        path = host.get("path") if isinstance(host, Mapping) else None
        if type(path) is not str or not path:
            continue
        real = normalise(path)
        if real == INFINIBAND or real.startswith(INFINIBAND + "/") or real in ("/", "/dev"):
            found.append(
                (pod.where("volumes", i, "hostPath", "path"), f"a hostPath of {shown(path)}")
            )
    return found


def _labelled(labels: Mapping[str, str], allowed: tuple[str, ...]) -> bool:
    for item in allowed:
        key, _, value = item.partition("=")
        if key in labels and (value in ("", "*") or labels[key] == value):
            return True
    return False
