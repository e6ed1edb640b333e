"""Several ranks in one Pod on shared GPUs: time-sliced or MPS replicas, MIG instances.

- Replicas: the device plugin hands out replicas of a GPU, and a Pod asking for N of
  them can get two of the same physical GPU. Its `distributed` policy, the default,
  prefers the GPUs with the fewest replicas allocated
  (NVIDIA/k8s-device-plugin internal/rm/allocate.go allocationComparators, commit
  1b826acc6af3079d8923bac395c3124b8861a9a6), so it is a risk, not a certainty.
  Two ranks on one GPU stop NCCL at init: "Duplicate GPU detected" (src/init.cc from
  2.5.6 to 2.29), "Multiple Ranks are using the same GPU/Partition" since 2.30 unless
  NCCL_MULTI_RANK_GPU_ENABLE=1 (NVIDIA/nccl src/init.cc, commit 5067397c2676).
- MIG: a MIG instance has no CUDA IPC and no NVLink/P2P to another (NVIDIA MIG user
  guide, "Deployment Considerations", CUDA IPC across GPU instances not supported;
  RAPIDS "Multi-Instance GPU"), so NCCL between MIG instances of one Pod goes through
  host memory at best and is not a supported configuration.
"""

from __future__ import annotations

from webhook.core.access.gpuresources import gpu_resources
from webhook.core.jobs.fabric import FabricRules, env_value, gpu_count, nccl_int, ranks, who
from webhook.core.kit.violation import Violation
from webhook.core.workloads.kinds import WorkloadView
from webhook.core.workloads.pods import PodView


def multi_rank_shared_gpu(workload: WorkloadView, *, rules: FabricRules) -> list[Violation]:
    """A Pod running more than one rank on time-sliced or MPS GPU replicas."""
    out: list[Violation] = []
    for role in workload.roles:
        pod = role.pod
        shared = gpu_count(pod, rules, rules.shared_gpus)
        n = ranks(pod, rules)
        if shared == 0 or n < 2 or _multi_rank_enabled(pod):
            continue
        where = next(a.path for a in pod.amounts if a.amount and a.resource in _names(pod, rules))
        out.append(
            Violation(
                "multi-rank-shared-gpu",
                where,
                f"{who(workload, role)} runs {n} ranks on {shared} shared GPU replicas: "
                "the device plugin may give two replicas of one physical GPU (it spreads "
                "them where it can, so this is a risk, not a certainty), and NCCL then "
                'aborts ("Duplicate GPU detected" / "Multiple Ranks are using the same '
                'GPU/Partition"); request whole GPUs (nvidia.com/gpu) for multi-rank Pods',
            )
        )
    return out


def multi_rank_mig(workload: WorkloadView, *, rules: FabricRules) -> list[Violation]:
    """A Pod running more than one rank on MIG instances."""
    out: list[Violation] = []
    for role in workload.roles:
        pod = role.pod
        slices = gpu_count(pod, rules, rules.mig)
        n = ranks(pod, rules)
        if slices == 0 or n < 2:
            continue
        where = next(
            a.path for a in pod.amounts if a.amount and a.resource in _names(pod, rules, mig=True)
        )
        out.append(
            Violation(
                "multi-rank-mig",
                where,
                f"{who(workload, role)} runs {n} ranks on {slices} MIG instances: MIG "
                "instances have no P2P, NVLink or CUDA IPC between them and NCCL across "
                "MIG instances is not supported; run one rank per Pod on a MIG slice, or "
                "request whole GPUs",
            )
        )
    return out


def _names(pod: PodView, rules: FabricRules, *, mig: bool = False) -> set[str]:
    selection = gpu_resources(include=rules.mig if mig else rules.shared_gpus)
    return {a.resource for a in pod.amounts if selection.is_gpu(a.resource)}


def _multi_rank_enabled(pod: PodView) -> bool:
    """NCCL_MULTI_RANK_GPU_ENABLE set to a non-zero value in every GPU container."""
    holders = {a.container.path for a in pod.amounts if a.amount}
    values = [
        env_value(pod, c, "NCCL_MULTI_RANK_GPU_ENABLE") for c in pod.containers if c.path in holders
    ]
    return bool(values) and all(v is not None and nccl_int(v[0]) != 0 for v in values)
