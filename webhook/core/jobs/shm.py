"""/dev/shm of a Pod that runs several NCCL ranks: present, bounded, and the Pod's own.

- Without a mount at /dev/shm a container gets the runtime's 64 MiB
  (`FabricRules.default_shm_mib`); NCCL's shared-memory transport and PyTorch's
  DataLoader workers then fail with "Bus error" or hang.
- KubeRay adds a memory-backed emptyDir at /dev/shm to the Ray container (the first) of
  every head and worker Pod unless `rayStartParams` sets `plasma-directory`, sized by that
  container's memory limit, else its request, else unbounded (ray-project/kuberay,
  commit feeaf72facab4881ba2b179248bb67315634e229,
  ray-operator/controllers/ray/common/pod.go BuildPod, addEmptyDir,
  makeEmptyDirVolume, findMemoryReqOrLimit; utils/constant.go RayContainerIndex = 0).
- The NIM operator gives every NIMService Pod a memory-backed emptyDir for /dev/shm, sized
  by `spec.storage.sharedMemorySizeLimit` ("the shared memory volume (emptyDir) used by
  NIMs for fast model runtime I/O": NVIDIA/k8s-nim-operator api/apps/v1alpha1
  nimservice_types.go NIMServiceStorage, f9e3047e).
- A `medium: Memory` emptyDir is tmpfs charged to the memory of the container that
  writes it: without `sizeLimit` it may grow until the Pod is evicted, and a sizeLimit
  above the container's memory limit is never reached: the container is OOM-killed first.
- A hostPath of the node's /dev/shm shares the host's shared memory with every Pod and
  process that has it, and survives the Pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from webhook.core.access.hostpaths import normalise
from webhook.core.jobs.fabric import FabricRules, gpu_count, ranks, who
from webhook.core.kit.paths import Path
from webhook.core.kit.quantity import format_mib, quantity_or_none
from webhook.core.kit.text import shown
from webhook.core.kit.violation import Violation
from webhook.core.workloads.kinds import Role, WorkloadView
from webhook.core.workloads.pods import ContainerRef, PodView

SHM = "/dev/shm"
MIB = 1 << 20
RAY_GROUP = "ray.io"
NIM = ("apps.nvidia.com", "NIMService")  # its operator mounts a /dev/shm of its own
PLASMA_DIRECTORY = "plasma-directory"


def shm_default(workload: WorkloadView, *, rules: FabricRules) -> list[Violation]:
    """A Pod running several ranks with no /dev/shm mount of its own."""
    out: list[Violation] = []
    for role in workload.roles:
        pod = role.pod
        n = ranks(pod, rules)
        if n < 2 or _kuberay_shm(workload, pod) is not None:
            continue
        if (workload.group, workload.kind) == NIM:
            continue
        bare = [c for c in pod.containers if c.field == "containers" and _shm_mount(c) is None]
        # every regular container bare (a Pod whose containers list is empty or broken
        # runs no rank of its own)
        if bare and len(bare) == sum(1 for c in pod.containers if c.field == "containers"):
            c = _rank_container(pod, rules, bare)
            gpus = gpu_count(pod, rules)
            out.append(
                Violation(
                    "shm-default",
                    c.path,
                    f"{who(workload, role)}: {n} ranks on {gpus} GPUs with the "
                    f"{rules.default_shm_mib} MiB default /dev/shm: NCCL's shared-memory "
                    'transport and PyTorch DataLoader workers fail with "Bus error"; add '
                    "an emptyDir medium: Memory with a sizeLimit within the container's "
                    f"memory limit, mounted at /dev/shm in {c.label}",
                )
            )
    return out


def shm_unbounded(workload: WorkloadView, *, rules: FabricRules) -> list[Violation]:
    """A memory-backed /dev/shm without sizeLimit, or larger than the memory limit."""
    out: list[Violation] = []
    for role in workload.roles:
        pod = role.pod
        if gpu_count(pod, rules) == 0:
            continue
        ray = _kuberay_shm(workload, pod)
        if ray is not None and ray[1] is None:
            out.append(_kuberay_unbounded(workload, role, ray[0]))
        for c in pod.containers:
            mount = _shm_mount(c)
            volume = _volume(pod, mount[0]) if mount is not None else None
            if volume is None or mount is None:
                continue
            empty = volume[1].get("emptyDir")
            if not isinstance(empty, Mapping) or empty.get("medium") != "Memory":
                continue
            found = _bound(workload, role, c, empty, pod.where("volumes", volume[0], "emptyDir"))
            if found is not None:
                out.append(found)
    return out


def shm_host(workload: WorkloadView, *, rules: FabricRules) -> list[Violation]:
    """A hostPath of the node's /dev/shm."""
    out: list[Violation] = []
    for role in workload.roles:
        volumes = role.pod.spec.get("volumes")
        for i, volume in enumerate(volumes if type(volumes) is list else ()):
            host = volume.get("hostPath") if isinstance(volume, Mapping) else None
            path = host.get("path") if isinstance(host, Mapping) else None
            if type(path) is not str or not path:
                continue
            real = normalise(path)
            if real != SHM and not real.startswith(SHM + "/"):
                continue
            out.append(
                Violation(
                    "shm-host",
                    role.pod.where("volumes", i, "hostPath", "path"),
                    f"{who(workload, role)} mounts the node's {shown(path)} (hostPath): it "
                    "shares the host's shared memory with every Pod and process that has "
                    "it, outlives the Pod and counts against no limit; use an emptyDir "
                    "medium: Memory with a sizeLimit instead",
                )
            )
    return out


def _bound(
    workload: WorkloadView, role: Role, c: ContainerRef, empty: Mapping[str, Any], where: Path
) -> Violation | None:
    raw = empty.get("sizeLimit")
    if raw is None:
        return Violation(
            "shm-unbounded",
            where,
            f"{who(workload, role)}: the memory-backed /dev/shm of {c.label} has no "
            "sizeLimit: what the ranks write there is charged to the Pod's memory and "
            "can grow until the Pod is evicted; set emptyDir.sizeLimit within the "
            "container's memory limit",
        )
    size, limit = quantity_or_none(raw), _memory_limit(c)
    if size is None or limit is None or size <= limit:
        return None
    return Violation(
        "shm-unbounded",
        (*where, "sizeLimit"),
        f"{who(workload, role)}: the memory-backed /dev/shm of {c.label} may hold "
        f"{format_mib(size / MIB)} (sizeLimit {shown(raw)}) but the container's memory "
        f"limit is {format_mib(limit / MIB)}: the container is OOM-killed before the "
        "sizeLimit holds; keep sizeLimit within the memory limit",
    )


def _kuberay_unbounded(workload: WorkloadView, role: Role, c: ContainerRef) -> Violation:
    return Violation(
        "shm-unbounded",
        (*c.path, "resources"),
        f"{who(workload, role)}: KubeRay mounts a memory-backed /dev/shm in {c.label} "
        "sized by its memory limit or request, and it sets neither: the /dev/shm has no "
        "sizeLimit and can grow until the Pod is evicted; set resources.limits.memory",
    )


def _memory_limit(c: ContainerRef) -> Fraction | None:
    resources = c.spec.get("resources")
    limits = resources.get("limits") if isinstance(resources, Mapping) else None
    return quantity_or_none(limits.get("memory")) if isinstance(limits, Mapping) else None


def _shm_mount(c: ContainerRef) -> tuple[str, int] | None:
    """The volume mounted at /dev/shm in `c` (its name, and the mount's index)."""
    mounts = c.spec.get("volumeMounts")
    for i, m in enumerate(mounts if type(mounts) is list else ()):
        path, name = (m.get("mountPath"), m.get("name")) if isinstance(m, Mapping) else (0, 0)
        if type(path) is str and type(name) is str and normalise(path) == SHM:
            return name, i
    return None


def _volume(pod: PodView, name: str) -> tuple[int, Mapping[str, Any]] | None:
    volumes = pod.spec.get("volumes")
    for i, v in enumerate(volumes if type(volumes) is list else ()):
        if isinstance(v, Mapping) and v.get("name") == name:
            return i, v
    return None


def _rank_container(pod: PodView, rules: FabricRules, among: list[ContainerRef]) -> ContainerRef:
    """The container that runs the ranks: the first asking for GPUs, else the first."""
    holders = {a.container.path for a in pod.amounts if a.amount}
    return next((c for c in among if c.path in holders), among[0])


def _kuberay_shm(
    workload: WorkloadView, pod: PodView
) -> tuple[ContainerRef, Fraction | None] | None:
    """The /dev/shm KubeRay adds to a Ray Pod: its container and size (None: unbounded);
    None when it adds none (not a Ray kind, plasma-directory set, or no container)."""
    if workload.group != RAY_GROUP or pod.path[-2:] != ("template", "spec"):
        return None
    group: object = workload.obj
    for step in pod.path[:-2]:
        if isinstance(group, Mapping):
            group = group.get(step)
        elif type(group) is list and type(step) is int and step < len(group):
            group = group[step]
        else:
            return None
    params = group.get("rayStartParams") if isinstance(group, Mapping) else None
    if isinstance(params, Mapping) and PLASMA_DIRECTORY in params:
        return None
    first = next((c for c in pod.containers if c.field == "containers"), None)
    if first is None:
        return None
    if _shm_mount(first) is not None:  # addEmptyDir keeps a mount already there
        return None
    resources = first.spec.get("resources")
    resources = resources if isinstance(resources, Mapping) else {}
    for key in ("limits", "requests"):
        amounts = resources.get(key)
        if isinstance(amounts, Mapping) and "memory" in amounts:
            return first, quantity_or_none(amounts["memory"])
    return first, None
