"""gpu-distributed: a distributed GPU job's ranks judged together (webhook.core.jobs).

It judges the `workload` target: every role of the object with its replica count, so
the gang and rank rules see all the ranks of one job at once. Kinds whose roles are
one job's ranks say so in WorkloadKinds (`job:`); the process-count rule judges any
workload, a bare Pod included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

from webhook.core.access.gpuresources import DEVICE_PLUGIN_GPUS, gpu_resources
from webhook.core.engine.check import Check, CheckParams, ParamError, Rule
from webhook.core.engine.context import Context
from webhook.core.engine.reads import Reads
from webhook.core.jobs.fabric import (
    FabricRules,
    nccl_forces_sockets,
    nccl_ignore_net_mismatch,
    nccl_interface_not_attached,
    nproc,
    rdma_without_ipc_lock,
)
from webhook.core.jobs.feasibility import gang_never_fits
from webhook.core.jobs.gang import gang_disabled, gang_not_wired
from webhook.core.jobs.hostrdma import host_rdma
from webhook.core.jobs.model import MECHANISMS, Mechanism, Reading, job_of
from webhook.core.jobs.ranks import nproc_exceeds_gpus, nproc_unequal, ranks_differ
from webhook.core.jobs.sharedgpu import multi_rank_mig, multi_rank_shared_gpu
from webhook.core.jobs.shm import shm_default, shm_host, shm_unbounded
from webhook.core.kit.text import glob_matcher
from webhook.core.kit.violation import Violation
from webhook.core.workloads.kinds import WorkloadView
from webhook.core.workloads.pods import PodView
from webhook.core.workloads.targets import TargetKind

# Node labels that name a GPU product: GPU feature discovery's (NVIDIA/k8s-device-plugin
# docs: nvidia.com/gpu.product), GKE's node pools (cloud.google.com/gke-accelerator) and
# Karpenter's on EKS (karpenter.k8s.aws/instance-gpu-name).
PRODUCT_LABELS = (
    "nvidia.com/gpu.product",
    "cloud.google.com/gke-accelerator",
    "karpenter.k8s.aws/instance-gpu-name",
)
# RDMA and network VF resources: Mellanox k8s-rdma-shared-dev-plugin (rdma/<name>),
# the SR-IOV network device plugin's resource names as NVIDIA's network-operator
# configures them (nvidia.com/sriov*, nvidia.com/rdma*, nvidia.com/hostdev*), AWS EFA.
RDMA_RESOURCES = (
    "rdma/*",
    "nvidia.com/sriov*",
    "nvidia.com/rdma*",
    "nvidia.com/hostdev*",
    "vpc.amazonaws.com/efa",
)
# Schedulers that place a job's Pods as a gang: Volcano (its PodGroups), KAI (its
# pod-grouper makes one PodGroup per top owner: NVIDIA/KAI-Scheduler 72de64fc
# pkg/common/constants/constants.go DefaultSchedulerName), scheduler-plugins'
# coscheduling build (its Helm chart's scheduler name).
GANG_SCHEDULERS = ("volcano", "kai-scheduler", "scheduler-plugins-scheduler")


@dataclass(frozen=True)
class Params(CheckParams):
    gpu_resources: tuple[str, ...] = DEVICE_PLUGIN_GPUS
    product_labels: tuple[str, ...] = PRODUCT_LABELS
    rdma_resources: tuple[str, ...] = RDMA_RESOURCES
    gang_schedulers: tuple[str, ...] = GANG_SCHEDULERS
    gang_mechanisms: tuple[str, ...] = MECHANISMS
    # Devices NCCL reaches through a net plugin, not its IB transport (AWS EFA):
    # NCCL_IB_DISABLE does not touch them, NCCL_NET=Socket does.
    plugin_nets: tuple[str, ...] = ("vpc.amazonaws.com/efa",)
    rdma_networks: tuple[str, ...] = ()  # Multus networks (globs) that are RDMA networks
    default_shm_mib: int = 64  # /dev/shm a container runtime gives without a mount there
    # Where host RDMA (hostNetwork, hostIPC, privileged, /dev/infiniband) is the
    # platform's documented path: namespaces (globs) and Pod labels (key=value, key=*).
    host_rdma_namespaces: tuple[str, ...] = ()
    host_rdma_labels: tuple[str, ...] = ()
    shared_gpu_resources: tuple[str, ...] = ("nvidia.com/gpu.shared",)
    mig_resources: tuple[str, ...] = ("nvidia.com/mig-*",)
    # Report a gang the inventory's nodes can never hold only where no autoscaler can
    # help (an NVLink domain): for clusters whose node pools grow on demand.
    autoscaling: bool = False

    def __post_init__(self) -> None:
        unknown = [m for m in self.gang_mechanisms if m not in MECHANISMS]
        if unknown:
            raise ParamError(
                "gangMechanisms",
                f"unknown gang mechanism {unknown[0]!r}; use some of: {', '.join(MECHANISMS)}",
            )

    @cached_property
    def reading(self) -> Reading:
        return Reading(
            gpu_resources(include=self.gpu_resources),
            self.product_labels,
            glob_matcher(self.rdma_resources),
            frozenset(self.gang_schedulers),
        )

    @cached_property
    def fabric(self) -> FabricRules:
        return FabricRules(
            gpus=self.gpu_resources,
            rdma=tuple(r for r in self.rdma_resources if r not in self.plugin_nets),
            plugin_nets=self.plugin_nets,
            rdma_networks=self.rdma_networks,
            default_shm_mib=self.default_shm_mib,
            host_rdma_namespaces=self.host_rdma_namespaces,
            host_rdma_labels=self.host_rdma_labels,
            shared_gpus=self.shared_gpu_resources,
            mig=self.mig_resources,
        )

    @cached_property
    def counted(self) -> frozenset[Mechanism]:
        return frozenset(m for m in MECHANISMS if m in self.gang_mechanisms)


def run(workload: WorkloadView, *, context: Context, params: Params) -> Iterator[Violation]:
    is_gpu = params.reading.gpus.is_gpu
    gpus = [_gpus(role.pod, is_gpu) for role in workload.roles]
    if not any(gpus) and not any("resourceClaims" in r.pod.spec for r in workload.roles):
        return  # nearly every Pod: no rank at all, and no job model to build
    rules = params.fabric
    distributed = _distributed(workload, gpus)
    if not distributed and (workload.shape is None or workload.shape.job is None):
        return  # one rank a Pod, of a kind that is no job: nothing to compare
    job = job_of(workload, reading=params.reading)
    if not job.gpu_ranks:
        return
    yield from gang_not_wired(job, counted=params.counted)
    yield from gang_disabled(job, counted=params.counted)
    yield from ranks_differ(job)
    yield from nproc_exceeds_gpus(job)
    yield from nproc_unequal(job)
    if not distributed:  # one rank alone talks to no other, and fits wherever it fits
        return
    for rule in _POD_RULES:
        yield from rule(workload, rules=rules)
    yield from host_rdma(workload, rules=rules, namespace=context.subject.namespace)
    never = gang_never_fits(
        workload,
        inventory=context.inventory,
        profile=context.profile,
        is_gpu=params.reading.gpus.is_gpu,
    )
    if never is not None and (never.fixed or not params.autoscaling):
        yield never.violation()


def _gpus(pod: PodView, is_gpu: Callable[[str], bool]) -> int:
    """The Pod's device-plugin GPUs (whole ones: a share counts as one)."""
    total = 0
    for a in pod.amounts:
        if a.amount and is_gpu(a.resource):
            total += max(1, int(a.amount))
    return total


def _distributed(workload: WorkloadView, gpus: list[int]) -> bool:
    """More than one rank in all: a Pod of several (GPUs, or torchrun processes), or, in
    a kind whose roles are one job's ranks (WorkloadKinds `job:`), GPU Pods of several
    replicas or roles (an unknown count may be several). A Deployment's replicas serve
    side by side: they are no ranks of one job."""
    job_kind = workload.shape is not None and workload.shape.job is not None
    pods = 0
    for role, n in zip(workload.roles, gpus, strict=True):
        if n > 1 or (n and any(nproc(c) > 1 for c in role.pod.containers)):
            return True
        if n == 0:
            continue
        if job_kind and (role.replicas is None or role.replicas > 1):
            return True
        pods += role.replicas or 0
    return job_kind and pods > 1


# The rules of the Pods that run ranks (webhook.core.jobs: shm, fabric, sharedgpu).
_POD_RULES = (
    shm_default,
    shm_unbounded,
    shm_host,
    nccl_forces_sockets,
    rdma_without_ipc_lock,
    nccl_interface_not_attached,
    nccl_ignore_net_mismatch,
    multi_rank_shared_gpu,
    multi_rank_mig,
)


def judges(params: Params) -> Mapping[TargetKind, Reads]:
    """Every rule is about ranks that ask for GPUs (device-plugin resources or DRA
    claims): an object with neither holds no rank. The labels, annotations, selectors
    and commands read besides only shape what is said of such ranks."""
    return {"workload": Reads(extended_resources=True, claims=True)}


CHECK = Check(
    name="distributed",
    params=Params,
    run=run,
    judges=judges,
    rules={
        "gang-not-wired": Rule(
            "A distributed job of more than one GPU Pod with no gang mechanism "
            "(Kueue queue, PodGroup, gang field of its kind, gang-aware scheduler, Workload API)."
        ),
        "gang-disabled": Rule(
            "A gang of the job's own kind that starts with fewer Pods than the job holds."
        ),
        "ranks-differ": Rule(
            "Ranks of one job with different GPU counts, products, MIG-ness or network attachments."
        ),
        "nproc-exceeds-gpus": Rule(
            "nprocPerNode or torchrun --nproc-per-node larger than the GPUs of the Pod."
        ),
        "nproc-unequal": Rule("Roles of one job that start different process counts per Pod."),
        "shm-default": Rule(
            "A Pod that runs several NCCL ranks with the runtime's 64 MiB /dev/shm."
        ),
        "shm-unbounded": Rule(
            "A memory-backed /dev/shm without sizeLimit, or larger than the memory limit."
        ),
        "shm-host": Rule("A hostPath of the node's /dev/shm: host memory shared with every Pod."),
        "nccl-forces-sockets": Rule(
            "An RDMA device requested while NCCL_NET=Socket or NCCL_IB_DISABLE forces sockets."
        ),
        "rdma-without-ipc-lock": Rule(
            "An RDMA device without the IPC_LOCK capability: queue pairs cannot be created."
        ),
        "nccl-interface-not-attached": Rule(
            "NCCL_SOCKET_IFNAME names an interface the Pod's networks do not attach."
        ),
        "nccl-ignore-net-mismatch": Rule(
            "Ranks with different RDMA attachments and NCCL's net-mismatch check off."
        ),
        "host-rdma": Rule(
            "hostNetwork, hostIPC, privileged or /dev/infiniband in a GPU job where the "
            "platform does not allow host RDMA."
        ),
        "multi-rank-shared-gpu": Rule(
            "A Pod running several ranks on time-sliced or MPS replicas (the same GPU twice)."
        ),
        "multi-rank-mig": Rule("A Pod running several ranks on MIG slices (no P2P, no NCCL)."),
        "gang-never-fits": Rule(
            "A job whose ranks the inventory's nodes can never hold at once, though each "
            "rank fits alone.",
            uses_inventory=True,
        ),
    },
)
