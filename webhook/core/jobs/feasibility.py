"""Whether a job's ranks can ever all be placed at once on the nodes the inventory shows.

A gang (every rank of every role together) never fits when even an empty cluster of
today's nodes cannot hold it, while each rank alone would fit somewhere (a rank that fits
nowhere is resource-names' finding, not this one). Only hard constraints count, as in
webhook.core.supply.scheduling: the candidate nodes of a role are `allowed_nodes` (its
nodeSelector, required node affinity, taints) that offer its GPU resource.

What is counted, each rule a necessary condition, so "never fits" is a proof:

- **Ranks per node**: floor(allocatable / GPUs per rank) for each GPU resource the rank
  requests (the smallest over its resources; counted per distinct allocatable, from the
  index's `counts`, not per node). Only extended resources are in the inventory
  (webhook.core.supply.nodes), so cpu, memory and pods are not counted: they can only
  lower the true number.
- **One per node** where the rank's required podAntiAffinity with topologyKey
  `kubernetes.io/hostname` selects its own labels: a node holding one rank fails the next
  (kubernetes/kubernetes@53f1b9d6 pkg/scheduler/framework/plugins/interpodaffinity/
  filtering.go, satisfyPodAntiAffinity).
- **Roles sharing nodes**: the GPUs all roles ask of one resource must be at most what the
  union of their candidates holds.
- **One domain** (a value of a node label) must hold every rank of a group of roles:
  - a required podAffinity whose selector picks the rank's own labels: after the first
    rank lands (the scheduler's exception for a Pod that matches its own terms), every
    next one needs a Pod of the selector in its domain, and nodes without the key fail
    ("All topology labels must exist on the node"; filtering.go satisfyPodAffinity, same
    commit). The group is every role the selector picks; it is only taken when each of
    them carries such a term, since a picked role without one may spread and draw the
    others after it. The selector is taken to pick this job's Pods only.
  - Kueue's `kueue.x-k8s.io/podset-required-topology` on a role's pod template, with the
    job in a queue (`kueue.x-k8s.io/queue-name`): "requires scheduling all pods on nodes
    within the same topology domain" (kubernetes-sigs/kueue@ff69552e
    apis/kueue/v1beta2/topology_types.go PodSetRequiredTopologyAnnotation). One PodSet (a
    role) per domain; roles with one `kueue.x-k8s.io/podset-group-name` share it
    (site/content/en/docs/concepts/topology_aware_scheduling.md, same commit).
  - JobSet's `alpha.jobset.sigs.k8s.io/exclusive-topology` on the JobSet or a replicated
    job's template: each child Job gets a domain of its own (kubernetes-sigs/jobset@08dfbdfd
    api/jobset/v1alpha2/jobset_types.go ExclusiveKey), so a replicated job of R child Jobs
    needs R domains that each hold one child Job's Pods.

**"Never" and autoscalers.** These are today's nodes. An autoscaler adds nodes of its
pools' shapes, so a gang short of GPUs (in a zone, in the cluster) may fit once it has
scaled up; its node pools are not in the inventory. An NVLink domain
(`nvidia.com/gpu.clique`, "<cluster UUID>.<clique id>" from the IMEX labeller,
NVIDIA/k8s-device-plugin@1b826acc internal/lm/imex.go) is a rack's NVLink fabric: new nodes
join new cliques, not one that is already too small. `Infeasible.fixed` says which kind
a finding is, so a check can keep only the fixed ones where the cluster autoscales.

Cost: per role a few bitset ANDs and popcounts per distinct allocatable count; a domain is
searched over the label's values by size, largest first, and stops once no smaller value
can beat the best found (each value's bound: its nodes times the most ranks per node).
Domain answers are memoised per inventory snapshot, keyed by the digest of the role's
placement constraints (as `allowed_nodes` is), never by user text itself.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from webhook.core.kit.dicts import as_dict, as_list
from webhook.core.kit.idsets import as_bits, size
from webhook.core.kit.paths import Path
from webhook.core.kit.selectors import selects
from webhook.core.kit.text import plural, shown
from webhook.core.kit.violation import Violation
from webhook.core.supply.inventory import Inventory
from webhook.core.supply.profiles import ClusterProfile, placement_spec
from webhook.core.supply.scheduling import allowed_nodes
from webhook.core.workloads.kinds import Role, WorkloadView
from webhook.core.workloads.pods import PodView

RULE = "gang-never-fits"
HOSTNAME = "kubernetes.io/hostname"
CLIQUE = "nvidia.com/gpu.clique"
KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_GROUP = "kueue.x-k8s.io/podset-group-name"
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
JOBSET_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
# Domains no autoscaler grows: an NVLink domain is the rack's fabric.
FIXED_DOMAINS = frozenset({CLIQUE})


class Infeasible(NamedTuple):
    """Why the gang can never be placed at once: the field, the message, and whether it
    holds whatever nodes an autoscaler adds (`fixed`)."""

    path: Path
    message: str
    fixed: bool

    def violation(self) -> Violation:
        return Violation(RULE, self.path, self.message)


class Demand(NamedTuple):
    """What one role asks of the cluster: ranks, GPUs per rank, the nodes it may use."""

    role: Role
    ranks: int
    wants: tuple[tuple[str, int], ...]  # (GPU resource, whole count per rank)
    path: Path  # the first GPU request of the rank
    allowed: int  # node-id bits: the nodes the rank may be scheduled to
    one_per_node: bool
    digest: bytes  # of the rank's placement constraints (`allowed_nodes`' memo key)

    @property
    def label(self) -> str:
        return f"role {shown(self.role.name)}" if self.role.name else "the workload"

    def per_rank(self) -> str:
        return " and ".join(f"{w} {r}" for r, w in self.wants)


def gang_never_fits(
    workload: WorkloadView,
    *,
    inventory: Inventory,
    profile: ClusterProfile,
    is_gpu: Callable[[str], bool],
) -> Infeasible | None:
    """The first proof that the job's ranks can never all be placed at once on the
    inventory's nodes; None when it may fit (or nothing can be said)."""
    del profile  # its admission tolerations are already in each pod (placement_spec)
    if not inventory.known:
        return None
    demands = [d for r in workload.roles if (d := _demand(r, inventory, is_gpu)) is not None]
    # A rank that fits on no node at all is resource-names' finding, not the gang's.
    demands = [d for d in demands if ranks_in(d, inventory, d.allowed)]
    if not demands:
        return None
    for demand in demands:
        found = _role_capacity(demand, inventory)
        if found is not None:
            return found
    if len(demands) > 1:
        found = _shared(demands, inventory)
        if found is not None:
            return found
    for key, group, path in _domains(workload, demands):
        found = _in_one_domain(key, group, path, inventory)
        if found is not None:
            return found
    return _exclusive(workload, demands, inventory)


# -- what each role asks ------------------------------------------------------------


def _demand(role: Role, inventory: Inventory, is_gpu: Callable[[str], bool]) -> Demand | None:
    pod = role.pod
    if role.replicas is None or role.replicas < 1:
        return None  # a count the object does not fix: nothing to add up
    wants: list[tuple[str, int]] = []
    for resource, amount in pod.effective_requests.items():
        if amount > 0 and is_gpu(resource):
            if amount.denominator != 1:
                return None  # the apiserver rejects it (resource-names says so)
            wants.append((resource, int(amount)))
    if not wants:
        return None
    first = {a.resource: a.path for a in reversed(pod.amounts)}
    allowed = allowed_nodes(pod, inventory)
    return Demand(
        role,
        role.replicas,
        tuple(sorted(wants)),
        first.get(wants[0][0], pod.path),
        allowed,
        one_per_node(pod),
        pod.memo["constraints"],  # set by allowed_nodes
    )


def one_per_node(pod: PodView) -> bool:
    spec = placement_spec(pod)
    terms = as_dict(as_dict(spec.get("affinity")).get("podAntiAffinity"))
    return any(
        t.get("topologyKey") == HOSTNAME and _own(t, pod)
        for t in map(as_dict, as_list(terms.get("requiredDuringSchedulingIgnoredDuringExecution")))
    )


def _own(term: Mapping[str, Any], pod: PodView) -> bool:
    """The term's Pods are this rank's kind: its selector picks the rank's own labels,
    in its own namespace, with no mismatchLabelKeys to exclude the rank itself."""
    if term.get("namespaces") or term.get("namespaceSelector") is not None:
        return False
    if term.get("mismatchLabelKeys"):
        return False
    return selects(term.get("labelSelector"), pod.labels)


# -- how many ranks a set of nodes holds ----------------------------------------------


def ranks_in(demand: Demand, inventory: Inventory, bits: int) -> int:
    """The most ranks of `demand` the nodes in `bits` hold at once (an upper bound with
    several GPU resources per rank: the least over the resources of their sums)."""
    index = inventory.index
    best: int | None = None
    for resource, want in demand.wants:
        ri = index.resources.get(resource)
        total = 0
        if ri is not None:
            for count, nodes in ri.counts.items():
                per = count // want
                if per:
                    on = (as_bits(nodes) & bits).bit_count()
                    total += on * (1 if demand.one_per_node else per)
        best = total if best is None else min(best, total)
    return best or 0


def gpus_in(resource: str, inventory: Inventory, bits: int) -> int:
    ri = inventory.index.resources.get(resource)
    if ri is None:
        return 0
    return sum(c * (as_bits(n) & bits).bit_count() for c, n in ri.counts.items())


def _most_per_node(demand: Demand, inventory: Inventory, bits: int) -> int:
    index = inventory.index
    most = sys.maxsize
    for resource, want in demand.wants:
        ri = index.resources.get(resource)
        top = max((c for c, n in ri.counts.items() if as_bits(n) & bits), default=0) if ri else 0
        most = min(most, top // want)
    return min(most, 1) if demand.one_per_node else most


# -- the rules ------------------------------------------------------------------------


def _role_capacity(demand: Demand, inventory: Inventory) -> Infeasible | None:
    held = ranks_in(demand, inventory, demand.allowed)
    if held >= demand.ranks:
        return None
    nodes = _candidate_nodes(demand, inventory, demand.allowed)
    how = "one per node (its required podAntiAffinity)" if demand.one_per_node else "at most"
    return Infeasible(
        demand.path,
        f"{demand.label} runs {plural(demand.ranks, 'rank')} of {demand.per_rank()} at once, "
        f"but the {plural(nodes, 'node')} that can take a rank hold {how} {held} such ranks; "
        f"the whole job can never be placed at once on the nodes the inventory shows, "
        f"while each rank alone fits. Lower the replicas to {held}, or widen the "
        f"nodeSelector/affinity.",
        False,
    )


def _candidate_nodes(demand: Demand, inventory: Inventory, bits: int) -> int:
    index = inventory.index
    on = bits
    for resource, want in demand.wants:
        ri = index.resources.get(resource)
        fit = 0
        for count, nodes in ri.counts.items() if ri is not None else ():
            if count >= want:
                fit |= as_bits(nodes)
        on &= fit
    return on.bit_count()


def _shared(demands: Sequence[Demand], inventory: Inventory) -> Infeasible | None:
    """Roles asking for one resource on overlapping nodes: their GPUs together must be at
    most what the union of their candidates holds."""
    by_resource: dict[str, list[Demand]] = {}
    for d in demands:
        for resource, _ in d.wants:
            by_resource.setdefault(resource, []).append(d)
    for resource, group in by_resource.items():
        if len(group) < 2:
            continue
        need = sum(d.ranks * dict(d.wants)[resource] for d in group)
        union = 0
        for d in group:
            union |= d.allowed
        have = gpus_in(resource, inventory, union)
        if need > have:
            roles = ", ".join(f"{d.ranks} x {dict(d.wants)[resource]} ({d.label})" for d in group)
            return Infeasible(
                group[0].path,
                f"the roles need {need} {resource} at once ({roles}), but the nodes that can "
                f"take them hold {have}; the whole job can never be placed at once on the "
                f"nodes the inventory shows, while each role alone may fit.",
                False,
            )
    return None


# -- one domain ---------------------------------------------------------------------


def _domains(
    workload: WorkloadView, demands: Sequence[Demand]
) -> Iterable[tuple[str, tuple[Demand, ...], Path]]:
    """(node label key, the roles that must share one of its values, the field that says
    so) for every required domain the job declares."""
    seen: set[tuple[str, tuple[int, ...]]] = set()
    for i, d in enumerate(demands):
        for key, group, path in _affinity_groups(d, demands) + _kueue_groups(workload, d, demands):
            ids = tuple(sorted(demands.index(g) for g in group))
            if (key, ids) not in seen and i == ids[0]:
                seen.add((key, ids))
                yield key, group, path


def _affinity_groups(
    demand: Demand, demands: Sequence[Demand]
) -> list[tuple[str, tuple[Demand, ...], Path]]:
    pod = demand.role.pod
    spec = placement_spec(pod)
    terms = as_list(
        as_dict(as_dict(spec.get("affinity")).get("podAffinity")).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    )
    out = []
    for n, term in enumerate(map(as_dict, terms)):
        key = term.get("topologyKey")
        if not isinstance(key, str) or not key or not _own(term, pod):
            continue
        group = tuple(d for d in demands if selects(term.get("labelSelector"), d.role.pod.labels))
        labels = [d.role.pod.labels for d in group]
        if all(_bound(d.role.pod, key, labels) for d in group):
            path = pod.where("affinity", "podAffinity", _REQUIRED, n, "topologyKey")
            out.append((key, group, path))
    return out


_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _bound(pod: PodView, key: str, labels: list[Mapping[str, str]]) -> bool:
    # The rank carries a required term on `key` whose selector picks every role of the group.
    terms = as_list(
        as_dict(as_dict(placement_spec(pod).get("affinity")).get("podAffinity")).get(_REQUIRED)
    )
    return any(
        t.get("topologyKey") == key
        and _own(t, pod)
        and all(selects(t.get("labelSelector"), lb) for lb in labels)
        for t in map(as_dict, terms)
    )


def _kueue_groups(
    workload: WorkloadView, demand: Demand, demands: Sequence[Demand]
) -> list[tuple[str, tuple[Demand, ...], Path]]:
    pod = demand.role.pod
    key = pod.annotations.get(KUEUE_REQUIRED)
    if not key or (KUEUE_QUEUE not in workload.labels and KUEUE_QUEUE not in pod.labels):
        return []  # outside a queue Kueue places nothing
    name = pod.annotations.get(KUEUE_GROUP)
    group: tuple[Demand, ...] = (demand,)
    if name:
        group = tuple(
            d
            for d in demands
            if d.role.pod.annotations.get(KUEUE_GROUP) == name
            and d.role.pod.annotations.get(KUEUE_REQUIRED) == key
        )
    return [(key, group, (*pod.metadata_path, "annotations", KUEUE_REQUIRED))]


def _in_one_domain(
    key: str, group: tuple[Demand, ...], path: Path, inventory: Inventory
) -> Infeasible | None:
    best, value, nodes = _best_domain(key, group, inventory)
    need = sum(d.ranks for d in group)
    if best is not None and best >= need:
        return None
    if len(group) == 1:
        d = group[0]
        gpus = d.ranks * d.wants[0][1]
        what = f"{plural(d.ranks, 'rank')} of {d.per_rank()} need {gpus} {d.wants[0][0]}"
    else:
        what = "the ranks of " + ", ".join(f"{d.ranks} ({d.label})" for d in group)
    if best is None or value is None:
        where = f"no node that can take a rank carries the label {shown(key)}"
    else:
        where = (
            f"the largest, {shown(value)}, holds {best} such "
            f"{'ranks' if best != 1 else 'rank'} ({plural(nodes, 'node')})"
        )
    return Infeasible(
        path,
        f"{what} in one {shown(key)} ({_said(path)}); {where}. The job can never be placed "
        f"at once on the nodes the inventory shows, while each rank alone fits. Lower the "
        f"replicas, or require a wider topology.",
        key in FIXED_DOMAINS,
    )


def _said(path: Path) -> str:
    return (
        f"required by {path[-1]}" if path and path[-1] == KUEUE_REQUIRED else "required podAffinity"
    )


def _best_domain(
    key: str, group: tuple[Demand, ...], inventory: Inventory
) -> tuple[int | None, str | None, int]:
    """The most ranks of the group (all of it or none) one value of `key` holds, that
    value and its candidate nodes: (None, None, 0) when no candidate carries the key."""
    memo_key = (
        "gang-domain",
        key,
        tuple((d.digest, d.wants, d.one_per_node, d.ranks) for d in group),
    )
    found = inventory.memo(memo_key)
    if found is None:
        found = _search(key, group, inventory)
        inventory.remember(memo_key, found, 256)
    return found  # type: ignore[no-any-return]


def _search(
    key: str, group: tuple[Demand, ...], inventory: Inventory
) -> tuple[int | None, str | None, int]:
    ki = inventory.index.labels.get(key)
    if ki is None:
        return None, None, 0
    union = 0
    for d in group:
        union |= d.allowed
    per_node = _group_per_node(group, inventory, union)
    need = sum(d.ranks for d in group)
    best: tuple[int | None, str | None, int] = (None, None, 0)
    for n, value, nodes in sorted(((size(s), v, s) for v, s in ki.values.items()), reverse=True):
        if best[0] is not None and (n * per_node <= best[0] or best[0] >= need):
            break  # no smaller value can hold more
        bits = as_bits(nodes) & union
        if not bits:
            continue
        held = _group_ranks(group, inventory, bits)
        if best[0] is None or held > best[0]:
            best = (held, value, bits.bit_count())
    return best


def _group_per_node(group: tuple[Demand, ...], inventory: Inventory, union: int) -> int:
    """The most ranks of the group one node holds: with one GPU resource shared by every
    role, its largest count over the smallest ask (whatever each role's own cap); else
    the sum of each role's most."""
    resources = {r for d in group for r, _ in d.wants}
    if len(resources) == 1 and all(len(d.wants) == 1 for d in group):
        least = min(d.wants[0][1] for d in group)
        probe = group[0]._replace(wants=((resources.pop(), least),), one_per_node=False)
        return _most_per_node(probe, inventory, union)
    return sum(_most_per_node(d, inventory, d.allowed) for d in group)


def _group_ranks(group: tuple[Demand, ...], inventory: Inventory, bits: int) -> int:
    """Ranks of the group the nodes in `bits` hold: all of them when every role fits
    there and the shared resources suffice, else the ranks of the roles that fit alone
    (a lower figure for the message, never enough)."""
    if len(group) == 1:
        d = group[0]
        return ranks_in(d, inventory, bits & d.allowed)
    held = [min(d.ranks, ranks_in(d, inventory, bits & d.allowed)) for d in group]
    if all(h >= d.ranks for h, d in zip(held, group, strict=True)) and not _shared(
        [d._replace(allowed=d.allowed & bits) for d in group], inventory
    ):
        return sum(d.ranks for d in group)
    return min(sum(held), sum(d.ranks for d in group) - 1)


# -- JobSet: a domain per child Job --------------------------------------------------


def _exclusive(
    workload: WorkloadView, demands: Sequence[Demand], inventory: Inventory
) -> Infeasible | None:
    if workload.kind != "JobSet":
        return None
    meta = as_dict(workload.obj.get("metadata"))
    top = as_dict(meta.get("annotations")).get(JOBSET_EXCLUSIVE)
    for d in demands:
        holder = _at(workload.obj, d.role.path)
        mine = as_dict(as_dict(as_dict(holder.get("template")).get("metadata")).get("annotations"))
        key = mine.get(JOBSET_EXCLUSIVE) or top
        if not isinstance(key, str) or not key:
            continue
        jobs = holder.get("replicas", 1)
        if type(jobs) is not int or jobs < 1 or d.ranks % jobs:
            continue
        found = _domains_for(key, d._replace(ranks=d.ranks // jobs), jobs, inventory)
        if found is not None:
            path: Path = (
                (*d.role.path, "template", "metadata", "annotations", JOBSET_EXCLUSIVE)
                if mine.get(JOBSET_EXCLUSIVE)
                else ("metadata", "annotations", JOBSET_EXCLUSIVE)
            )
            return Infeasible(path, f"{d.label}: {found}", key in FIXED_DOMAINS)
    return None


def _domains_for(key: str, job: Demand, jobs: int, inventory: Inventory) -> str | None:
    ki = inventory.index.labels.get(key)
    per_node = _most_per_node(job, inventory, job.allowed)
    enough = 0
    if ki is not None:
        for value_nodes in ki.values.values():
            if size(value_nodes) * per_node < job.ranks:
                continue
            if ranks_in(job, inventory, as_bits(value_nodes) & job.allowed) >= job.ranks:
                enough += 1
                if enough >= jobs:
                    return None
    return (
        f"{plural(jobs, 'child Job')} of {plural(job.ranks, 'Pod')} with {job.per_rank()} each "
        f"need a {shown(key)} each (exclusive-topology), but "
        f"{'only ' if enough else ''}{plural(enough, 'value')} of it can hold one; the job can "
        f"never be placed at once on the nodes the inventory shows. Lower the replicas to "
        f"{enough}, or choose a wider topology."
    )


def _at(obj: Mapping[str, Any], path: Path) -> Mapping[str, Any]:
    node: object = obj
    for part in path:
        if isinstance(part, int):
            items = as_list(node)
            node = items[part] if 0 <= part < len(items) else {}
        else:
            node = as_dict(node).get(part)
    return as_dict(node)


__all__ = ["RULE", "Demand", "Infeasible", "gang_never_fits", "gpus_in", "ranks_in", "selects"]
