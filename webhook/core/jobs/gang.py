"""Gang rules: a multi-Pod GPU job must start all its ranks together, or none.

The default scheduler places Pods one by one. A job whose ranks wait for each other at
a barrier (NCCL's `ncclCommInitRank`, torchrun's rendezvous) but is placed in part holds
the GPUs of its placed ranks while the others stay Pending; two such jobs, each placed
in part, wait for each other for ever. A gang (a Kueue Workload, a PodGroup, a
gang-aware scheduler, the Workload API) starts the job only when all of it fits.
"""

from __future__ import annotations

from collections.abc import Collection

from webhook.core.jobs.model import KUEUE_QUEUE, Job, Mechanism, Rank
from webhook.core.kit.text import plural
from webhook.core.kit.violation import Violation


def roles_text(ranks: tuple[Rank, ...]) -> str:
    """`Master x1 and Worker x3, 8 GPUs each`: the ranks as a person counts them."""
    parts = [f"{r.name} x{'?' if r.pods is None else r.pods}" for r in ranks]
    each = {r.gpus for r in ranks}
    gpus = f", {plural(each.pop(), 'GPU')} each" if len(each) == 1 and 0 not in each else ""
    return (" and ".join([", ".join(parts[:-1]), parts[-1]]) if len(parts) > 1 else parts[0]) + gpus


def _runs(job: Job, pods: int) -> str:
    if job.shape is not None and job.shape.group is not None:
        return f"runs groups of {pods} GPU Pods that must start together"
    return f"runs {plural(pods, 'GPU Pod')}"


def gang_not_wired(job: Job, *, counted: Collection[Mechanism]) -> list[Violation]:
    """A job kind with more than one GPU Pod and no gang mechanism that counts."""
    if job.shape is None:
        return []
    # The Pods that must start together: one group where the kind has groups (a
    # LeaderWorkerSet's), else every GPU Pod of the job.
    pods = job.gpu_pods if job.shape.group is None else job.pods
    if pods is None or pods <= 1 or any(g.mechanism in counted for g in job.gangs):
        return []
    kind_fields = [".".join(g.path) for g in job.shape.gang]
    ways = [f"the label {KUEUE_QUEUE} (Kueue admits the job whole)"]
    ways += [f"{f} (the operator's PodGroup)" for f in kind_fields]
    ways.append("a PodGroup for every rank with a gang-aware scheduler")
    return [
        Violation(
            "gang-not-wired",
            ("metadata", "labels"),
            f"the {job.kind} {_runs(job, pods)} ({roles_text(job.gpu_ranks)}) "
            "with no gang mechanism: no Kueue queue, no PodGroup, no gang field of the "
            "kind, no gang-aware schedulerName, no Workload API pod group "
            "(spec.schedulingGroup, spec.workloadRef). The scheduler places "
            "its ranks one by one: placed ranks hold their GPUs while they wait for the "
            "others, and two such jobs placed in part wait for each other for ever. "
            f"Add {' or '.join(ways)}.",
        )
    ]


def gang_disabled(job: Job, *, counted: Collection[Mechanism]) -> list[Violation]:
    """A gang of the kind's own that starts with fewer Pods than the gang holds."""
    pods, gpu_pods = job.pods, job.gpu_pods
    if job.shape is None or pods is None or gpu_pods is None or gpu_pods <= 1:
        return []
    out: list[Violation] = []
    for gang in job.gangs:
        if gang.mechanism != "kind" or "kind" not in counted:
            continue
        least = gang.min_available
        if least is None or least >= pods:
            continue
        what = "switches the gang off" if least <= 1 else "lets the job start in part"
        out.append(
            Violation(
                "gang-disabled",
                gang.min_path,
                f"{gang.what} asks for a gang of {least} of the {job.kind}'s {pods} Pods "
                f"({roles_text(job.ranks)}): that {what}, so {pods - least} ranks may "
                "stay Pending while the placed ones hold their GPUs at the barrier. "
                f"Set minAvailable to {pods} (or leave it unset where it defaults to "
                "every Pod), unless the job is elastic and trains with fewer ranks.",
            )
        )
    return out
