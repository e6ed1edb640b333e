"""The most a ClusterQueue can ever give of a resource in a flavor, as Kueue works it out.

Kueue's cohort tree (kubernetes-sigs/kueue v0.19 pkg/cache/scheduler resource_node.go:
`SubtreeQuota`, `guaranteedQuota`, `potentialAvailable`), with no usage at all:

- a ClusterQueue's subtree quota is its nominal quota; a Cohort's is its own nominal
  quota plus what each child lends it: the child's subtree quota, or at most its
  `lendingLimit`;
- what a node keeps for itself (guaranteed) is its subtree quota less its lendingLimit
  (none without a lendingLimit);
- the root's potential is its subtree quota; any other node's is what it keeps plus its
  parent's potential, at most its subtree quota plus its `borrowingLimit`.

A request above a ClusterQueue's potential in every flavor it could take can never be
admitted: no preemption and no waiting makes room that the quotas do not hold. A
cohort that no Cohort object describes has no quota of its own and no parent; a cycle
of parents (which Kueue refuses to use) counts as a root where it closes.
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.core.queues.model import ClusterQueue, Quota, ResourceGroup
from webhook.core.queues.supply import QueueSupply

_ZERO = 0
MAX_DEPTH = 64  # cohort levels followed (Kueue's trees are a few deep)


@dataclass(frozen=True, slots=True)
class Capacity:
    """What one ClusterQueue can get of one resource in one flavor."""

    nominal: int
    most: int  # its potential: nominal plus the most its cohort would lend it
    borrowing_limit: int | None

    @property
    def lent(self) -> int:
        return max(_ZERO, self.most - self.nominal)


def capacity(
    supply: QueueSupply, queue: ClusterQueue, flavor: str, resource: str
) -> Capacity | None:
    """None when the queue lists no quota for the resource in the flavor."""
    quota = _quota(queue.groups, flavor, resource)
    if quota is None:
        return None
    key = ("capacity", queue.name, flavor, resource)
    found: Capacity | None = supply.memo.get(key)
    if found is None:
        tree = _Tree(supply, flavor, resource)
        most = tree.potential_of_queue(queue, quota)
        found = supply.memo[key] = Capacity(quota.nominal, most, quota.borrowing_limit)
    return found


def _quota(groups: tuple[ResourceGroup, ...], flavor: str, resource: str) -> Quota | None:
    for group in groups:
        for fq in group.flavors:
            if fq.flavor == flavor:
                found = fq.resources.get(resource)
                if found is not None:
                    return found
    return None


class _Tree:
    """The cohort tree for one (flavor, resource), worked out as far as it is asked."""

    def __init__(self, supply: QueueSupply, flavor: str, resource: str) -> None:
        self.supply, self.flavor, self.resource = supply, flavor, resource
        self._children: dict[str, list[tuple[int, Quota | None]]] | None = None
        self._subtree: dict[str, int] = {}

    def potential_of_queue(self, queue: ClusterQueue, quota: Quota) -> int:
        if not queue.cohort:
            return quota.nominal
        return _capped(
            quota.nominal,
            quota,
            _guaranteed(quota.nominal, quota) + self._potential(queue.cohort, 0, set()),
        )

    def _potential(self, cohort: str, depth: int, seen: set[str]) -> int:
        seen.add(cohort)
        subtree = self._cohort_subtree(cohort, 0, set())
        found = self.supply.cohorts.get(cohort)
        parent = found.parent if found is not None else ""
        if not parent or depth >= MAX_DEPTH or self._loops(parent, cohort):
            return subtree
        own = _quota(found.groups, self.flavor, self.resource) if found is not None else None
        potential = _guaranteed(subtree, own) + self._potential(parent, depth + 1, seen)
        return _capped(subtree, own, potential)

    def _loops(self, parent: str, start: str) -> bool:
        """Following parents from `parent` comes back to `start` (a cycle)."""
        seen: set[str] = set()
        while parent and parent not in seen and len(seen) < MAX_DEPTH:
            if parent == start:
                return True
            seen.add(parent)
            found = self.supply.cohorts.get(parent)
            parent = found.parent if found is not None else ""
        return False

    def _cohort_subtree(self, cohort: str, depth: int, seen: set[str]) -> int:
        done = self._subtree.get(cohort)
        if done is not None:
            return done
        seen.add(cohort)
        found = self.supply.cohorts.get(cohort)
        own = _quota(found.groups, self.flavor, self.resource) if found is not None else None
        total = own.nominal if own is not None else _ZERO
        for child_subtree, child_quota in self._children_of(cohort, depth, seen):
            total += _lends(child_subtree, child_quota)
        self._subtree[cohort] = total
        return total

    def _children_of(
        self, cohort: str, depth: int, seen: set[str]
    ) -> list[tuple[int, Quota | None]]:
        out: list[tuple[int, Quota | None]] = []
        for queue in self.supply.cluster_queues.values():
            if queue.cohort == cohort:
                quota = _quota(queue.groups, self.flavor, self.resource)
                out.append((quota.nominal if quota is not None else _ZERO, quota))
        if depth >= MAX_DEPTH:
            return out
        for child in self.supply.cohorts.values():
            if child.parent == cohort and child.name not in seen:
                subtree = self._cohort_subtree(child.name, depth + 1, seen)
                out.append((subtree, _quota(child.groups, self.flavor, self.resource)))
        return out


def _lends(subtree: int, quota: Quota | None) -> int:
    if quota is None or quota.lending_limit is None:
        return subtree
    return min(subtree, quota.lending_limit)


def _guaranteed(subtree: int, quota: Quota | None) -> int:
    if quota is None or quota.lending_limit is None:
        return _ZERO
    return max(_ZERO, subtree - quota.lending_limit)


def _capped(subtree: int, quota: Quota | None, potential: int) -> int:
    if quota is None or quota.borrowing_limit is None:
        return potential
    return min(potential, subtree + quota.borrowing_limit)
