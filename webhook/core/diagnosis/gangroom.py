"""Whether a job's waiting ranks can be placed together now, and whether ever.

"Ever" is the gang rule of the admission check (webhook.core.jobs.feasibility), run on
a workload made of the job's Pods: the same proof in `check`, `serve`, `audit` and
`diagnose`. "Now" counts, per role of waiting ranks, how many of them the candidate
nodes hold at once in what is free on each (allocatable less what its bound Pods take,
every resource the scheduler counts), one per node where the rank's own anti-affinity
says so. Each count is a necessary condition, so "does not fit now" is a proof on the
cluster as read; topology domains are left to the scheduler's message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from webhook.core.access.gpuresources import GpuResources
from webhook.core.diagnosis.cluster import ClusterFacts
from webhook.core.diagnosis.facts import PendingPod
from webhook.core.diagnosis.placement import placement
from webhook.core.jobs.feasibility import Infeasible, gang_never_fits, one_per_node
from webhook.core.supply.profiles import ClusterProfile
from webhook.core.workloads.kinds import Role, WorkloadView
from webhook.core.workloads.podrequests import Want
from webhook.core.workloads.pods import PodView


@dataclass(frozen=True, slots=True)
class RoleRoom:
    """One role's waiting ranks against the room for them now."""

    role: str
    waiting: int
    room: int  # ranks of it the candidate nodes hold at once now
    want: Want  # what one rank asks of a node
    nodes: tuple[str, ...]  # candidate nodes with room for at least one, by most room
    per_node: tuple[int, ...]  # ranks each of `nodes` holds


def never_fits(
    roles: Mapping[str, tuple[PodView, int]],
    *,
    cluster: ClusterFacts,
    profile: ClusterProfile,
    gpus: GpuResources,
) -> Infeasible | None:
    """The admission check's gang proof on the job's roles (a role: one Pod of it and
    how many Pods it has). The Pods carry their templates' constraints (selectors,
    affinity, Kueue's topology annotations), not the kind's own fields: the workload is
    of no kind."""
    views = [Role(name, pod, count, ()) for name, (pod, count) in roles.items()]
    if not views:
        return None
    obj = {"metadata": {"labels": dict(views[0].pod.labels)}}
    workload = WorkloadView(obj, "", "", tuple(views), [r.pod for r in views])
    return gang_never_fits(
        workload, inventory=cluster.inventory, profile=profile, is_gpu=gpus.is_gpu
    )


def room_now(
    role: str,
    waiting: Sequence[PendingPod],
    *,
    cluster: ClusterFacts,
    taken: frozenset[str],
) -> RoleRoom:
    """How many of a role's waiting ranks fit at once now; `taken` are the nodes that
    already run a rank of the job (a rank with own-label anti-affinity skips them)."""
    first = waiting[0]
    place = placement(first.spec, cluster)
    bits = place.placed & ~place.unavailable
    alone = first.view is not None and one_per_node(first.view)
    found: list[tuple[int, str]] = []
    for i in cluster.ids(bits):
        name = cluster.nodes[i].name
        if alone and name in taken:
            continue
        n = _ranks_on(cluster, i, first.want)
        if n:
            found.append((min(n, 1) if alone else n, name))
    found.sort(key=lambda f: (-f[0], f[1]))
    room = sum(n for n, _ in found)
    return RoleRoom(
        role,
        len(waiting),
        room,
        first.want,
        tuple(name for _, name in found),
        tuple(n for n, _ in found),
    )


def _ranks_on(cluster: ClusterFacts, i: int, want: Want) -> int:
    """Copies of `want` node i holds in what is free on it now."""
    most: int | None = None
    for resource, n in want.items():
        if n <= 0:
            continue
        free = cluster.free(i, resource)
        copies = max(free, 0) // n
        most = copies if most is None else min(most, copies)
    return most if most is not None else 0
