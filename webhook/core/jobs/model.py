"""The job model: a workload's roles read as the ranks of one distributed job.

From a `WorkloadView` (every role's pod spec with its replica count) a `Job` holds, per
role, what its ranks ask for (GPUs per Pod, the product and MIG-ness they are pinned
to, their network attachments, the processes each Pod starts) and the gang mechanisms
that make the job's Pods start together. The rules in `gang` and `ranks` read only
this. Kind-specific places (a PyTorchJob's `runPolicy.schedulingPolicy`, its
`nprocPerNode`) are data in WorkloadKinds (`job:`, webhook.core.workloads.shapes);
the mechanisms every kind shares are here, each with its upstream source.

Everything is read once per role, and only where present: the cost is linear in the
pod specs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from webhook.core.access.gpuresources import GpuResources, gpu_requests
from webhook.core.kit.dicts import as_dict, as_list
from webhook.core.kit.paths import Path
from webhook.core.workloads.kinds import Role, WorkloadView, count
from webhook.core.workloads.pods import PodView
from webhook.core.workloads.shapes import ROOT, GangField, JobShape, walk

Mechanism = Literal["kueue", "podgroup", "scheduler", "workload-api", "kind"]
MECHANISMS: tuple[Mechanism, ...] = ("kueue", "podgroup", "scheduler", "workload-api", "kind")

# Kueue admits a queued job's Pods as one Workload, all or none
# (kubernetes-sigs/kueue v0.19.2 8eab6877 pkg/controller/constants/constants.go QueueLabel).
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
# A Pod's PodGroup, which the gang scheduler starts only when minMember Pods fit:
# volcano-sh/volcano v1.15.1 0a56ed33 staging/src/volcano.sh/apis/pkg/apis/scheduling/
# v1beta1/labels.go KubeGroupNameAnnotationKey; NVIDIA/KAI-Scheduler 72de64fc
# pkg/common/constants/constants.go PodGroupAnnotationForPod.
PODGROUP_ANNOTATIONS = ("scheduling.k8s.io/group-name", "pod-group-name")
# kubernetes-sigs/scheduler-plugins coscheduling: the PodGroup label of
# apis/scheduling/v1alpha1 (PodGroupLabel, "scheduling.x-k8s.io/pod-group" since v0.24;
# "pod-group.scheduling.sigs.k8s.io" before).
PODGROUP_LABELS = ("scheduling.x-k8s.io/pod-group", "pod-group.scheduling.sigs.k8s.io")
# Multus attachments (k8snetworkplumbingwg multi-net-spec: the networks annotation, a
# comma-separated list of [namespace/]name[@interface], or a JSON list of selections).
MULTUS_NETWORKS = "k8s.v1.cni.cncf.io/networks"
# torchrun's flag, both spellings (pytorch/pytorch torch/distributed/run.py get_args_parser:
# "--nproc-per-node", "--nproc_per_node"), with "=" or a space before its value.
_NPROC = re.compile(r"--nproc[-_]per[-_]node(?:=|\s+)['\"]?(\d{1,6})\b")
_NPROC_TEXT = 4096  # characters of one command or args item searched (a script is longer)


@dataclass(frozen=True, slots=True)
class Nproc:
    """Processes one Pod of a role starts, and where that is written."""

    value: int
    path: Path
    source: str  # "spec.nprocPerNode", "torchrun --nproc-per-node in container \"main\""


@dataclass(frozen=True, slots=True)
class Rank:
    """One role's ranks: what each of its Pods asks for."""

    role: Role
    gpus: int  # device-plugin GPUs per Pod (Kubernetes' effective request)
    claims: int  # DRA claims of the Pod: GPUs of unknown count when above 0
    gpu_path: Path  # the first GPU request, else the pod spec
    resources: tuple[str, ...]  # the GPU resource names it requests
    products: frozenset[str] | None  # GPU products it is pinned to; None: any
    products_path: Path
    rdma: tuple[str, ...]  # RDMA (and VF) resources it requests
    networks: tuple[str, ...]  # Multus networks it attaches
    nproc: Nproc | None

    @property
    def name(self) -> str:
        return self.role.name or "the pod"

    @property
    def pods(self) -> int | None:
        return self.role.replicas

    @property
    def asks_gpus(self) -> bool:
        return self.gpus > 0 or self.claims > 0

    @property
    def mig(self) -> bool:
        return any("/mig-" in r for r in self.resources)


@dataclass(frozen=True, slots=True)
class Gang:
    """A mechanism that starts the job's Pods together, and the Pods it waits for."""

    mechanism: Mechanism
    what: str  # how a person recognises it: "label kueue.x-k8s.io/queue-name"
    path: Path
    min_available: int | None = None  # None: the mechanism waits for every Pod
    min_path: Path = ()


@dataclass(frozen=True, slots=True)
class Job:
    kind: str
    ranks: tuple[Rank, ...]
    shape: JobShape | None
    gangs: tuple[Gang, ...]
    pods: int | None  # the Pods one gang holds (a LeaderWorkerSet's group; else all)

    @property
    def gpu_ranks(self) -> tuple[Rank, ...]:
        return tuple(r for r in self.ranks if r.asks_gpus)

    @property
    def gpu_pods(self) -> int | None:
        total = 0
        for rank in self.gpu_ranks:
            if rank.pods is None:
                return None
            total += rank.pods
        return total


@dataclass(frozen=True, slots=True)
class Reading:
    """What the model reads as what: the check's parameters."""

    gpus: GpuResources
    product_labels: tuple[str, ...]
    is_rdma: Any  # Callable[[str], bool]: a glob matcher
    schedulers: frozenset[str]


def job_of(workload: WorkloadView, *, reading: Reading) -> Job:
    shape = workload.shape.job if workload.shape is not None else None
    ranks = tuple(_rank(role, workload, shape, reading) for role in workload.roles)
    gangs = _gangs(workload, ranks, shape, reading)
    return Job(workload.kind, ranks, shape, gangs, _gang_pods(workload, shape))


def _rank(role: Role, workload: WorkloadView, shape: JobShape | None, reading: Reading) -> Rank:
    pod = role.pod
    requested = gpu_requests(pod, gpus=reading.gpus)
    effective = pod.effective_requests
    resources = tuple(dict.fromkeys(a.resource for a in requested))
    gpus = sum(int(effective.get(r, 0)) for r in resources)
    products, products_path = _products(pod, reading.product_labels)
    rdma = tuple(sorted({a.resource for a in pod.amounts if reading.is_rdma(a.resource)}))
    return Rank(
        role,
        gpus,
        len(as_list(pod.spec.get("resourceClaims"))),
        requested[0].path if requested else pod.path,
        resources,
        products,
        products_path,
        rdma,
        multus_networks(pod.annotations.get(MULTUS_NETWORKS)),
        _nproc(workload, role, shape),
    )


def _products(pod: PodView, keys: tuple[str, ...]) -> tuple[frozenset[str] | None, Path]:
    """The GPU products a Pod may land on by its nodeSelector, else its required node
    affinity (terms are ORed: the union of their `In` values; a term that does not pin
    the product leaves it open)."""
    selector = as_dict(pod.spec.get("nodeSelector"))
    for key in keys:
        value = selector.get(key)
        if isinstance(value, str):
            return frozenset((value,)), pod.where("nodeSelector", key)
    required = as_dict(
        as_dict(as_dict(pod.spec.get("affinity")).get("nodeAffinity")).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    )
    terms = as_list(required.get("nodeSelectorTerms"))
    found: set[str] = set()
    for term in terms:
        pinned = _pinned(as_dict(term), keys)
        if pinned is None:
            return None, pod.path
        found |= pinned
    if not terms:
        return None, pod.path
    where = pod.where("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    return frozenset(found), where


def _pinned(term: Mapping[str, Any], keys: tuple[str, ...]) -> set[str] | None:
    for expr in as_list(term.get("matchExpressions")):
        expr = as_dict(expr)
        if expr.get("key") in keys and expr.get("operator") == "In":
            return {v for v in as_list(expr.get("values")) if isinstance(v, str)}
    return None


def multus_networks(value: str | None) -> tuple[str, ...]:
    """Multus network names, without the interface: `ns/ib-a@net1, ib-b` -> ns/ib-a, ib-b;
    a JSON list of {name, namespace} read by its names without parsing JSON (the core
    imports no JSON library): `"name": "x"` pairs."""
    if not value:
        return ()
    text = value.strip()
    if text.startswith("["):
        names = re.findall(r'"name"\s*:\s*"([^"]{1,253})"', text[:_NPROC_TEXT])
        return tuple(sorted(names))
    names = [part.strip().split("@", 1)[0] for part in text[:_NPROC_TEXT].split(",")]
    return tuple(sorted(n for n in names if n))


def _nproc(workload: WorkloadView, role: Role, shape: JobShape | None) -> Nproc | None:
    """The kind's own field for the roles it names, else torchrun's flag in a container."""
    own = _kind_nproc(workload, role, shape)
    if own is not None:
        return own
    for container in role.pod.containers:
        for field in ("command", "args"):
            for index, item in enumerate(as_list(container.spec.get(field))):
                if isinstance(item, str) and "nproc" in item:
                    hit = _NPROC.search(item[:_NPROC_TEXT])
                    if hit is None and item.startswith("--nproc"):  # ["--nproc_per_node", "8"]
                        hit = _split_flag(as_list(container.spec.get(field)), index)
                    if hit is not None:
                        where = f"torchrun --nproc-per-node in {container.label} {field}"
                        return Nproc(int(hit.group(1)), (*container.path, field, index), where)
    return None


def _kind_nproc(workload: WorkloadView, role: Role, shape: JobShape | None) -> Nproc | None:
    if shape is None or shape.nproc_per_node is None:
        return None
    if shape.nproc_roles and role.name not in shape.nproc_roles:
        return None
    found = walk(workload.obj, shape.nproc_per_node)
    number = _whole(found[0][1]) if found else None
    if number is None:
        return None
    return Nproc(number, found[0][0], ".".join(shape.nproc_per_node))


def _split_flag(items: list[Any], index: int) -> re.Match[str] | None:
    if index + 1 < len(items) and isinstance(items[index + 1], str):
        return _NPROC.search(f"{items[index]} {items[index + 1]}")
    return None


def _whole(value: object) -> int | None:
    """A process count: a whole number, or a string of one (PyTorchJob's nprocPerNode
    is a string: auto, cpu, gpu or a number; only a number says how many)."""
    if type(value) is int and value > 0:
        return value
    if isinstance(value, str) and value.isdigit() and len(value) <= 6:
        return int(value) or None
    return None


def _gangs(
    workload: WorkloadView, ranks: tuple[Rank, ...], shape: JobShape | None, reading: Reading
) -> tuple[Gang, ...]:
    found: list[Gang] = []
    if KUEUE_QUEUE in workload.labels:
        found.append(Gang("kueue", f"label {KUEUE_QUEUE}", ("metadata", "labels", KUEUE_QUEUE)))
    if shape is not None:
        found += [g for field in shape.gang if (g := _kind_gang(workload, ranks, field))]
    gpu_ranks = [r for r in ranks if r.asks_gpus] or list(ranks)
    for mechanism in pod_gangs(gpu_ranks[0].role.pod, reading) if gpu_ranks else ():
        # a Pod-level mechanism counts only when every rank carries one: a rank without
        # it is placed alone
        if all(pod_gangs(r.role.pod, reading) for r in gpu_ranks[1:]):
            found.append(mechanism)
    return tuple(found)


def pod_gangs(pod: PodView, reading: Reading) -> list[Gang]:
    out: list[Gang] = []
    if KUEUE_QUEUE in pod.labels:
        path = (*pod.metadata_path, "labels", KUEUE_QUEUE)
        out.append(Gang("kueue", f"label {KUEUE_QUEUE}", path))
    for key in PODGROUP_ANNOTATIONS:
        if key in pod.annotations:
            path = (*pod.metadata_path, "annotations", key)
            out.append(Gang("podgroup", f"annotation {key}", path))
    for key in PODGROUP_LABELS:
        if key in pod.labels:
            out.append(Gang("podgroup", f"label {key}", (*pod.metadata_path, "labels", key)))
    scheduler = pod.spec.get("schedulerName")
    if isinstance(scheduler, str) and scheduler in reading.schedulers:
        out.append(Gang("scheduler", f"schedulerName {scheduler}", pod.where("schedulerName")))
    # The Workload API (Kubernetes 1.35, KEP-4671 gang scheduling): spec.workloadRef
    # names the Workload whose pod group the Pod belongs to.
    if isinstance(pod.spec.get("workloadRef"), Mapping):
        out.append(Gang("workload-api", "spec.workloadRef", pod.where("workloadRef")))
    # Since 1.36 a Pod names its PodGroup (scheduling.k8s.io v1alpha2, v1beta1 in 1.37)
    # in spec.schedulingGroup.podGroupName (`kubectl explain pod.spec.schedulingGroup` on
    # v1.36.3 and v1.37.2; proved on the real scheduler in tests/e2e/test_gang_cluster.py).
    if isinstance(as_dict(pod.spec.get("schedulingGroup")).get("podGroupName"), str):
        where = pod.where("schedulingGroup", "podGroupName")
        out.append(Gang("workload-api", "spec.schedulingGroup.podGroupName", where))
    return out


def _kind_gang(workload: WorkloadView, ranks: tuple[Rank, ...], field: GangField) -> Gang | None:
    found = walk(workload.obj, field.path)
    if not found or not isinstance(found[0][1], Mapping):
        return None
    path, value = found[0]
    what = ".".join(field.path)
    if field.min_available is None:
        return Gang("kind", what, path)
    raw = walk(value, field.min_available, path)
    min_path = raw[0][0] if raw else (*path, *field.min_available)
    least = count(raw[0][1], None) if raw else None
    if least is None or (least == 0 and field.zero_is_unset):
        if raw and least is None:  # not a count at all: the apiserver refuses it
            return Gang("kind", what, path)
        least = _unset(ranks, field)
    return Gang("kind", what, path, least, min_path)


def _unset(ranks: tuple[Rank, ...], field: GangField) -> int | None:
    """What an absent minAvailable is: every Pod (training-operator v1.9.0 6f74c7f6
    pkg/controller.v1/common/job.go: minMember := totalReplicas), or the sum of the
    roles' own minimums (volcano v1.15.1 0a56ed33 pkg/webhooks/admission/jobs/mutate/
    mutate_job.go patchDefaultMinAvailable, a task's minAvailable defaulting to its
    replicas in mutateSpec)."""
    total = 0
    for rank in ranks:
        each = rank.role.minimum if field.unset == "roleMinimums" else rank.pods
        if each is None:
            each = rank.pods
        if each is None:
            return None
        total += each
    return total


def _gang_pods(workload: WorkloadView, shape: JobShape | None) -> int | None:
    if shape is None or shape.group is None:
        return workload.replicas
    total = 1
    for factor in shape.group:
        value = factor.default
        if factor.path is not None:
            steps = factor.path[1:] if factor.path[:1] == (ROOT,) else factor.path
            found = walk(workload.obj, steps)
            value = count(found[0][1], factor.default) if found else factor.default
        if value is None or value < factor.less:
            return None
        total *= value - factor.less
    return total
