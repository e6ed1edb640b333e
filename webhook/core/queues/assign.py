"""Kueue's flavor assignment of a job's pod sets, in a cluster where nothing else uses quota.

kubernetes-sigs/kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go
(tests/data/kueue/FACTS.md b, d, e):

- pod sets in order, each a unit; for each resource it requests (a zero request is
  skipped), the first resource group whose coveredResources hold it; a resource no
  group covers: "resource %s unavailable in ClusterQueue", and the job gets no flavor;
- one flavor per (pod set, resource group), tried in the group's order:
  `checkFlavorForPodSets` skips a flavor whose NoSchedule/NoExecute nodeTaints the pod's
  tolerations and the flavor's own do not tolerate, or whose nodeLabels the pod's
  nodeSelector and required node affinity reject on the keys the flavor labels;
- `fitsResourceQuota`: what earlier pod sets took of the flavor plus this pod set's
  request, against the queue's potential (webhook.core.queues.capacity);
- the first pod set that gets no flavor ends the assignment.

With nothing else using quota, the first flavor within the potential is the one Kueue
takes (borrowing stops the search by default: whenCanBorrow MayStopSearch). If that
assignment fails, no later moment admits the job: usage only takes room away.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from webhook.core.kit.tolerations import BLOCKING, tolerates
from webhook.core.queues.capacity import Capacity, capacity
from webhook.core.queues.model import ClusterQueue, ResourceFlavor, ResourceGroup
from webhook.core.queues.podsets import PodSet
from webhook.core.queues.supply import QueueSupply
from webhook.core.workloads.units import shown


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A flavor whose quota the pod set's request exceeds, with the numbers."""

    flavor: str
    resource: str
    before: int  # what earlier pod sets of the job took of the flavor
    asked: int  # this pod set's request
    most: Capacity

    def kueue_words(self) -> str:
        r = self.resource
        return (
            f"insufficient quota for {r} in flavor {self.flavor}, previously considered "
            f"podsets requests ({shown(r, self.before)}) + current podset request "
            f"({shown(r, self.asked)}) > maximum capacity ({shown(r, self.most.most)})"
        )


@dataclass(frozen=True, slots=True)
class Unassigned:
    """Why a pod set gets no flavor: the first that Kueue would say."""

    pod_set: PodSet
    resource: str
    group: ResourceGroup | None  # None: no group covers the resource
    shortfalls: tuple[Shortfall, ...]  # flavors whose quota is too small, in order
    skipped: tuple[str, ...]  # flavors the pod set cannot use, each with Kueue's reason

    def kueue_words(self) -> str:
        if self.group is None:
            reasons = [f"resource {self.resource} unavailable in ClusterQueue"]
        else:
            reasons = sorted([*self.skipped, *(s.kueue_words() for s in self.shortfalls)])
        return f"couldn't assign flavors to pod set {self.pod_set.name}: {', '.join(reasons)}"


def first_unassigned(
    supply: QueueSupply, queue: ClusterQueue, pod_sets: tuple[PodSet, ...]
) -> Unassigned | None:
    """The pod set (and resource) Kueue cannot give a flavor to; None when every pod
    set gets one."""
    usage: dict[tuple[str, str], int] = {}
    for pod_set in pod_sets:
        done: set[str] = set()
        for resource, value in pod_set.requests.items():
            if value <= 0 or resource in done:
                continue
            group = _group_of(queue, resource)
            if group is None:
                return Unassigned(pod_set, resource, None, (), ())
            wanted = [r for r in group.covered if pod_set.requests.get(r, 0) > 0]
            done.update(wanted)
            failed = _assign(supply, queue, group, pod_set, wanted, usage)
            if failed is not None:
                return Unassigned(pod_set, resource, group, *failed)
    return None


def _group_of(queue: ClusterQueue, resource: str) -> ResourceGroup | None:
    for group in queue.groups:
        if resource in group.covered:
            return group
    return None


def _assign(
    supply: QueueSupply,
    queue: ClusterQueue,
    group: ResourceGroup,
    pod_set: PodSet,
    wanted: list[str],
    usage: dict[tuple[str, str], int],
) -> tuple[tuple[Shortfall, ...], tuple[str, ...]] | None:
    shortfalls: list[Shortfall] = []
    skipped: list[str] = []
    for fq in group.flavors:
        why = _skipped(supply.flavors.get(fq.flavor), fq.flavor, pod_set)
        if why is not None:
            skipped.append(why)
            continue
        short = _short(supply, queue, fq.flavor, pod_set, wanted, usage)
        if short is not None:
            shortfalls.append(short)
            continue
        for r in wanted:
            usage[(fq.flavor, r)] = usage.get((fq.flavor, r), 0) + pod_set.total(r)
        return None
    return tuple(shortfalls), tuple(skipped)


def _short(
    supply: QueueSupply,
    queue: ClusterQueue,
    flavor: str,
    pod_set: PodSet,
    wanted: list[str],
    usage: Mapping[tuple[str, str], int],
) -> Shortfall | None:
    for r in wanted:
        most = capacity(supply, queue, flavor, r)
        before, asked = usage.get((flavor, r), 0), pod_set.total(r)
        if most is None:  # a flavor must list every covered resource (Kueue's webhook)
            most = Capacity(0, 0, None)
        if before + asked > most.most:
            return Shortfall(flavor, r, before, asked, most)
    return None


def _skipped(found: ResourceFlavor | None, name: str, pod_set: PodSet) -> str | None:
    """Kueue's reason for not using this flavor for the pod set, in its words."""
    if found is None:
        return f"flavor {name} not found"
    tolerations = (*pod_set.tolerations, *found.tolerations)
    for taint in found.node_taints:
        if taint.effect in BLOCKING and not any(tolerates(t, taint) for t in tolerations):
            return (
                f"untolerated taint {{{taint.key} {taint.value} {taint.effect} <nil>}} "
                f"in flavor {name}"
            )
    if not affinity_matches(pod_set, found.node_labels):
        return f"flavor {name} doesn't match node affinity"
    return None


def affinity_matches(pod_set: PodSet, labels: Mapping[str, str]) -> bool:
    """The pod set's nodeSelector and required node affinity against a flavor's
    nodeLabels, on the keys the flavor labels only (flavorassigner.go flavorSelector)."""
    for key, value in pod_set.node_selector.items():
        if key in labels and labels[key] != value:
            return False
    if not pod_set.affinity_terms:
        return True
    for term in pod_set.affinity_terms:
        exprs = [e for e in _exprs(term) if e.get("key") in labels]
        if not exprs or all(_holds(e, labels) for e in exprs):
            return True  # a term left empty matches any flavor
    return False


def _exprs(term: Mapping[str, object]) -> list[Mapping[str, object]]:
    found = term.get("matchExpressions")
    return [e for e in found if isinstance(e, Mapping)] if isinstance(found, list) else []


def _holds(expr: Mapping[str, object], labels: Mapping[str, str]) -> bool:
    key, op = str(expr.get("key")), expr.get("operator")
    values = expr.get("values")
    listed = [str(v) for v in values] if isinstance(values, list) else []
    have = labels.get(key)
    if op == "In":
        return have in listed
    if op == "NotIn":
        return have not in listed
    if op == "Exists":
        return have is not None
    if op == "DoesNotExist":
        return have is None
    if op in ("Gt", "Lt") and have is not None and have.isdigit() and listed:
        return int(have) > int(listed[0]) if op == "Gt" else int(have) < int(listed[0])
    return False
