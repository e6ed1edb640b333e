"""gpu-distributed: a distributed GPU job's ranks judged together (webhook.core.jobs).

It judges the `workload` target: every role of the object with its replica count, so
the gang and rank rules see all the ranks of one job at once. Kinds whose roles are
one job's ranks say so in WorkloadKinds (`job:`); the process-count rule judges any
workload, a bare Pod included.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

from webhook.core.access.gpuresources import DEVICE_PLUGIN_GPUS, gpu_resources
from webhook.core.engine.check import Check, CheckParams, ParamError, Rule
from webhook.core.engine.context import Context
from webhook.core.engine.reads import Reads
from webhook.core.jobs.gang import gang_disabled, gang_not_wired
from webhook.core.jobs.model import MECHANISMS, Mechanism, Reading, job_of
from webhook.core.jobs.ranks import nproc_exceeds_gpus, nproc_unequal, ranks_differ
from webhook.core.kit.text import glob_matcher
from webhook.core.kit.violation import Violation
from webhook.core.workloads.kinds import WorkloadView
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
    def counted(self) -> frozenset[Mechanism]:
        return frozenset(m for m in MECHANISMS if m in self.gang_mechanisms)


def run(workload: WorkloadView, *, context: Context, params: Params) -> Iterator[Violation]:
    job = job_of(workload, reading=params.reading)
    if not job.gpu_ranks:
        return
    yield from gang_not_wired(job, counted=params.counted)
    yield from gang_disabled(job, counted=params.counted)
    yield from ranks_differ(job)
    yield from nproc_exceeds_gpus(job)
    yield from nproc_unequal(job)


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
    },
)
