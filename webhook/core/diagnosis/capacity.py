"""Room on nodes: what a node can ever hold (allocatable) and what it has free now
(allocatable less what its bound, non-terminal Pods request), per node, never summed
over the cluster: eight free GPUs on eight nodes do not hold one Pod that asks for two.

Preemption as the scheduler's DefaultPreemption sees it, simplified: a node helps if
evicting every Pod of lower priority would make room there (PodDisruptionBudgets and
the victims' own needs are not weighed, so "could help" is an upper bound).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from webhook.core.diagnosis.cluster import ClusterFacts
from webhook.core.diagnosis.facts import Holder
from webhook.core.workloads.podrequests import Want


@dataclass(frozen=True, slots=True)
class Fit:
    fits: int  # nodes with room for the whole request now
    lacking: tuple[tuple[int, tuple[str, ...]], ...]  # (node id, the resources it lacks)
    short: Mapping[str, int]  # resource -> the nodes that lack it
    gpus_free: int  # the nodes with room for the GPU resources, that lack something else


def _key(want: Want) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(want.items()))


def can_hold(cluster: ClusterFacts, want: Want, bits: int) -> int:
    """The nodes of `bits` whose allocatable covers the whole request: where the Pod
    could run if nothing else ran there."""
    key = ("hold", _key(want), bits)
    found = cluster.memo(key)
    if found is None:
        nodes = cluster.nodes
        found = 0
        for i in cluster.ids(bits):
            allocatable = nodes[i].allocatable
            if all(allocatable.get(r, 0) >= n for r, n in want.items()):
                found |= 1 << i
        cluster.remember(key, found)
    return int(found)


def fit_now(cluster: ClusterFacts, want: Want, bits: int, *, gpus: frozenset[str]) -> Fit:
    """Which nodes of `bits` have room now, and what the others lack."""
    key = ("fit", _key(want), bits, gpus)
    found: Fit | None = cluster.memo(key)
    if found is None:
        fits = gpus_free = 0
        short: dict[str, int] = {}
        lacking = []
        for i in cluster.ids(bits):
            missing = tuple(r for r, n in want.items() if cluster.free(i, r) < n)
            if not missing:
                fits |= 1 << i
                continue
            lacking.append((i, missing))
            for r in missing:
                short[r] = short.get(r, 0) | 1 << i
            if not any(r in gpus for r in missing):
                gpus_free |= 1 << i
        found = cluster.remember(key, Fit(fits, tuple(lacking), short, gpus_free))
    return found


def largest(cluster: ClusterFacts, resource: str, bits: int) -> tuple[int, int] | None:
    """(allocatable, node id) of the first node of `bits` with the most of `resource`."""
    key = ("largest", resource, bits)
    found = cluster.memo(key)
    if found is None:
        best: tuple[int, int] | None = None
        nodes = cluster.nodes
        for i in cluster.ids(bits):
            have = nodes[i].allocatable.get(resource, 0)
            if best is None or have > best[0]:
                best = (have, i)
        found = cluster.remember(key, (best,))
    return found[0]  # type: ignore[no-any-return]


def most_free(cluster: ClusterFacts, resource: str, bits: int) -> tuple[int, int]:
    """(free, node id) of the first node of `bits` with the most of `resource` free."""
    key = ("free", resource, bits)
    found = cluster.memo(key)
    if found is None:
        found = cluster.remember(
            key, max((cluster.free(i, resource), -i) for i in cluster.ids(bits))
        )
    free, i = found
    return free, -i


def preemption_node(cluster: ClusterFacts, want: Want, priority: int, bits: int) -> int | None:
    """A node of `bits` where evicting every lower-priority Pod would make room."""
    key = ("preempt", _key(want), priority, bits)
    found = cluster.memo(key)
    if found is None:
        found = cluster.remember(key, (_preemption_node(cluster, want, priority, bits),))
    return found[0]  # type: ignore[no-any-return]


def _preemption_node(cluster: ClusterFacts, want: Want, priority: int, bits: int) -> int | None:
    for i in cluster.ids(bits):
        lower: Want = {}
        for p, used in cluster.use[i].by_priority.items():
            if p < priority:
                for r, n in used.items():
                    lower[r] = lower.get(r, 0) + n
        if lower and all(cluster.free(i, r) + lower.get(r, 0) >= n for r, n in want.items()):
            return i
    return None


def holders(cluster: ClusterFacts, i: int, resources: tuple[str, ...]) -> list[Holder]:
    """The Pods on node i that hold any of `resources`, largest first."""
    wanted = set(resources)
    found = [h for h in cluster.use[i].holders if any(r in wanted for r, _ in h.amounts)]
    return sorted(found, key=lambda h: (-sum(n for r, n in h.amounts if r in wanted), h.pod))
