"""No room: more than any node can ever hold, or every node that could take the Pod is
full now (and who holds it, and whether preemption could help)."""

from __future__ import annotations

from webhook.core.diagnosis.capacity import Fit, holders, largest, most_free, preemption_node
from webhook.core.diagnosis.case import (
    SHOWN_HOLDERS,
    SHOWN_NODES,
    Case,
    amount_facts,
    more_nodes,
    node_fact,
)
from webhook.core.diagnosis.evidence import Diagnosis, Fact
from webhook.core.kit.dicts import as_list
from webhook.core.kit.text import listing
from webhook.core.workloads.podrequests import container_requests
from webhook.core.workloads.units import PODS, shown


def exceeds(case: Case, pool: int) -> Diagnosis:
    """Nothing in `pool` (the nodes offering the GPU resources, or all) can ever hold it."""
    scope = f"node offering {listing(list(case.gpu_want), 2)}" if case.gpu_want else "node"
    over = _over(case, pool)
    if not over:
        return _not_at_once(case, pool, scope)
    cluster = case.cluster
    facts = [Fact(f"Pod {case.pod.ref}", f"requests {r}", _per_container(case, r)) for r, _ in over]
    facts += [node_fact(cluster.nodes[i], f"allocatable {r}", shown(r, n)) for r, (n, i) in over]
    resource, (most, i) = over[0]
    node, asked, most_text = cluster.nodes[i].name, case.asks(resource), shown(resource, most)
    verdict = (
        f"the Pod asks {asked}; the most any {scope} has is {most_text} (node {node}), so no "
        f"node can ever hold it"
    )
    if resource in case.gpu_want:
        action = f"request at most {most_text} {resource} per Pod, or split the work across Pods"
    else:
        action = (
            f"request at most {most_text} {resource} (node {node}'s allocatable), or add nodes "
            f"that have more"
        )
    return Diagnosis("exceeds-any-node", verdict, action, tuple(facts))


def _over(case: Case, pool: int) -> list[tuple[str, tuple[int, int]]]:
    """(resource, (the most a node of `pool` has, that node)) for each resource the Pod
    asks more of; the node is one the Pod could use, if one of those has that much."""
    cluster = case.cluster
    likely = pool & case.place.placed & ~case.place.unavailable
    over = []
    for resource, n in case.pod.want.items():
        best = largest(cluster, resource, pool)
        if resource == PODS or best is None or n <= best[0]:
            continue
        better = largest(cluster, resource, likely) if likely else None
        over.append((resource, better if better and better[0] == best[0] else best))
    return over


def _not_at_once(case: Case, pool: int, scope: str) -> Diagnosis:
    """Each resource fits some node, but no node has them all at once."""
    cluster, want = case.cluster, case.pod.want
    i = _nearest_node(case, pool)
    near = cluster.nodes[i]
    lacking = tuple(r for r, n in want.items() if near.allocatable.get(r, 0) < n)
    facts = [
        node_fact(near, f"allocatable {r}", shown(r, near.allocatable.get(r, 0))) for r in lacking
    ]
    verdict = (
        f"no {scope} has all the Pod asks at once; the nearest, node {near.name}, lacks "
        f"{listing([case.asks(r) for r in lacking], 3)}"
    )
    action = (
        f"lower the Pod's {listing(list(lacking), 3)} requests to what node {near.name} has, or "
        f"add nodes that have it all together"
    )
    return Diagnosis("exceeds-any-node", verdict, action, tuple(facts))


def _per_container(case: Case, resource: str) -> str:
    parts = []
    for field in ("initContainers", "containers"):
        for c in as_list(case.pod.spec.get(field)):
            n = container_requests(c).get(resource) if isinstance(c, dict) else None
            if n:
                parts.append(f"{c.get('name', '?')}: {shown(resource, n)}")
    total = shown(resource, case.pod.want[resource])
    return f"{total} in all" + (f" ({', '.join(parts)})" if len(parts) > 1 else "")


def _nearest_node(case: Case, pool: int) -> int:
    cluster, want = case.cluster, case.pod.want
    return min(
        cluster.ids(pool),
        key=lambda i: (sum(cluster.nodes[i].allocatable.get(r, 0) < n for r, n in want.items()), i),
    )


def exhausted(case: Case, up: int, fit: Fit) -> Diagnosis:
    """Every available candidate node lacks room now."""
    pod = case.pod
    other = fit.gpus_free
    listed = [(i, miss) for i, miss in fit.lacking if not other or other >> i & 1][:SHOWN_NODES]
    facts = _room_facts(case, listed)
    facts += more_nodes(len(fit.lacking), len(listed))
    first = listed[0][0]
    verdict, action = (_gpus_free if other else _full)(case, fit, up, first)
    preempt, note = _preemption(case, up)
    never = "" if pod.preempts else ", preemptionPolicy Never"
    facts.append(Fact(f"Pod {pod.ref}", "priority", f"{pod.priority}{never}"))
    verdict += f"; {note}"
    if pod.nominated:
        facts.append(Fact(f"Pod {pod.ref}", "status.nominatedNodeName", pod.nominated))
        verdict += (
            f"; the scheduler has nominated node {pod.nominated}: it preempts Pods there and "
            f"places this one once they are gone"
        )
    if preempt:
        action += f"; {preempt}"
    return Diagnosis("capacity-exhausted", verdict, action, tuple(facts))


def _room_facts(case: Case, listed: list[tuple[int, tuple[str, ...]]]) -> list[Fact]:
    """Per listed node: the figures of what it lacks and of the GPUs, and their holders."""
    cluster, gpu = case.cluster, tuple(case.gpu_want)
    facts: list[Fact] = []
    for i, miss in listed:
        facts += amount_facts(case, i, tuple(dict.fromkeys(miss + gpu)))
        for h in holders(cluster, i, gpu)[:SHOWN_HOLDERS]:
            held = ", ".join(f"{shown(r, n)} {r}" for r, n in h.amounts)
            value = f"{held} (priority {h.priority})"
            facts.append(node_fact(cluster.nodes[i], f"held by Pod {h.pod}", value))
    return facts


def _gpus_free(case: Case, fit: Fit, up: int, first: int) -> tuple[str, str]:
    """(verdict, action) when GPUs are free on some candidates but something else is not."""
    cluster, other = case.cluster, fit.gpus_free
    r = _scarcest(fit, other)
    count, name = other.bit_count(), cluster.nodes[first].name
    where = (
        f"node {name}, which"
        if count == 1
        else (f"{count} of the {up.bit_count()} candidate nodes, which")
    )
    lack = "it lacks" if count == 1 else "they lack"
    most = _most_free(case, r, fit.short[r] & other)
    verdict = f"GPUs are free on {where} could take it, but {lack} {r} ({most})"
    free = shown(r, max(cluster.free(first, r), 0))
    action = (
        f"free {r} on node {name} ({free} free, the Pod asks {shown(r, case.pod.want[r])}): "
        f"lower the Pod's {r} request, or keep Pods that use no GPU off the GPU nodes (a "
        f"taint on them does)"
    )
    return verdict, action


def _full(case: Case, fit: Fit, up: int, first: int) -> tuple[str, str]:
    """(verdict, action) when the candidates lack what the Pod asks of GPUs."""
    cluster, total = case.cluster, up.bit_count()
    r = _scarcest(fit, up)
    nodes = fit.short[r] & up
    lack = (
        "the one candidate node lacks"
        if total == 1
        else (f"{nodes.bit_count()} of the {total} candidate nodes lack")
    )
    verdict = f"no node that could take it has room now: {lack} {r} ({_most_free(case, r, nodes)})"
    names = [h.pod for h in holders(cluster, first, tuple(case.gpu_want))[:2]]
    held = f" (held by {listing(names, 2)})" if names else ""
    action = f"wait for {r} to free up on node {cluster.nodes[first].name}{held}, or add nodes"
    return verdict, action


def _scarcest(fit: Fit, scope: int) -> str:
    """The resource most nodes of `scope` lack (the first asked for, on a tie)."""
    return max(fit.short, key=lambda r: (fit.short[r] & scope).bit_count())


def _most_free(case: Case, resource: str, bits: int) -> str:
    cluster = case.cluster
    _, best = most_free(cluster, resource, bits)
    free = shown(resource, max(cluster.free(best, resource), 0))
    asks = shown(resource, case.pod.want[resource])
    if bits.bit_count() == 1:
        have = shown(resource, cluster.nodes[best].allocatable.get(resource, 0))
        return f"{free} free of {have}; the Pod asks {asks}"
    if cluster.free(best, resource) <= 0:
        return f"none has any free; the Pod asks {asks}"
    return f"the most free on one is {free}, node {cluster.nodes[best].name}; the Pod asks {asks}"


def _preemption(case: Case, up: int) -> tuple[str, str]:
    """(what to do about preemption, whether it could help)."""
    pod = case.pod
    if not pod.preempts:
        return "", "preemption cannot help: the Pod's preemptionPolicy is Never"
    i = preemption_node(case.cluster, pod.want, pod.priority, up)
    if i is None:
        return (
            "or give it a PriorityClass above the Pods that hold the room, so it preempts them",
            f"preemption cannot help: no candidate node has enough held by Pods of priority "
            f"below {pod.priority}",
        )
    node = case.cluster.nodes[i].name
    return (
        f"the scheduler should preempt lower-priority Pods on node {node}; if it does not, a "
        f"PodDisruptionBudget may protect them",
        f"preemption could help: evicting Pods of lower priority on node {node} makes room",
    )
