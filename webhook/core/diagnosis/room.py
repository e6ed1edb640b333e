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
from webhook.core.diagnosis.evidence import Fact, Finding
from webhook.core.diagnosis.requests import container_requests
from webhook.core.diagnosis.units import PODS, shown
from webhook.core.text import listing
from webhook.core.workloads import as_list


def exceeds(case: Case, pool: int) -> Finding:
    """Nothing in `pool` (the nodes offering the GPU resources, or all) can ever hold it."""
    cluster, want = case.cluster, case.pod.want
    scope = f"node offering {listing(list(case.gpu_want), 2)}" if case.gpu_want else "node"
    over = []
    likely = pool & case.place.placed & ~case.place.unavailable
    for resource, n in want.items():
        best = largest(cluster, resource, pool)
        if resource == PODS or best is None or n <= best[0]:
            continue
        # The example node: one the Pod could use, if one of them has that much.
        better = largest(cluster, resource, likely) if likely else None
        over.append((resource, n, better if better and better[0] == best[0] else best))
    facts = [
        Fact(f"Pod {case.pod.ref}", f"requests {r}", _per_container(case, r)) for r, _, _ in over
    ]
    if over:
        resource, n, (most, i) = over[0]
        node = cluster.nodes[i].name
        facts += [
            node_fact(cluster.nodes[i], f"allocatable {r}", shown(r, b[0])) for r, _, b in over
        ]
        verdict = (
            f"the Pod asks {shown(resource, n)} {resource}; the most any {scope} has is "
            f"{shown(resource, most)} (node {node}), so no node can ever hold it"
        )
        if resource in case.gpu_want:
            action = (
                f"request at most {shown(resource, most)} {resource} per Pod, or split the work "
                f"across Pods"
            )
        else:
            action = (
                f"request at most {shown(resource, most)} {resource} (node {node}'s allocatable), "
                f"or add nodes that have more"
            )
        return Finding("exceeds-any-node", verdict, action, tuple(facts))
    # Each resource fits some node, but no node has them all at once.
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
    return Finding("exceeds-any-node", verdict, action, tuple(facts))


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


def exhausted(case: Case, up: int, fit: Fit) -> Finding:
    """Every available candidate node lacks room now."""
    cluster, pod = case.cluster, case.pod
    gpu = tuple(case.gpu_want)
    total = up.bit_count()
    other = fit.gpus_free
    listed = [(i, miss) for i, miss in fit.lacking if not other or other >> i & 1][:SHOWN_NODES]
    facts: list[Fact] = []
    for i, miss in listed:
        facts += amount_facts(case, i, tuple(dict.fromkeys(miss + gpu)))
        for h in holders(cluster, i, gpu)[:SHOWN_HOLDERS]:
            held = ", ".join(f"{shown(r, n)} {r}" for r, n in h.amounts)
            value = f"{held} (priority {h.priority})"
            facts.append(node_fact(cluster.nodes[i], f"held by Pod {h.pod}", value))
    facts += more_nodes(len(fit.lacking), len(listed))
    first = cluster.nodes[listed[0][0]]
    scope = other or up
    r = _scarcest(fit, scope)
    nodes = fit.short[r] & scope
    if other:
        count = other.bit_count()
        where = (
            f"node {first.name}, which"
            if count == 1
            else (f"{count} of the {total} candidate nodes, which")
        )
        lack = "it lacks" if count == 1 else "they lack"
        verdict = (
            f"GPUs are free on {where} could take it, but {lack} {r} ({_most_free(case, r, nodes)})"
        )
        free = shown(r, max(cluster.free(listed[0][0], r), 0))
        action = (
            f"free {r} on node {first.name} ({free} free, the Pod asks "
            f"{shown(r, pod.want[r])}): lower the Pod's {r} request, or keep Pods that use no "
            f"GPU off the GPU nodes (a taint on them does)"
        )
    else:
        lack = (
            "the one candidate node lacks"
            if total == 1
            else (f"{nodes.bit_count()} of the {total} candidate nodes lack")
        )
        verdict = (
            f"no node that could take it has room now: {lack} {r} ({_most_free(case, r, nodes)})"
        )
        names = [h.pod for h in holders(cluster, listed[0][0], gpu)[:2]]
        held = f" (held by {listing(names, 2)})" if names else ""
        action = f"wait for {r} to free up on node {first.name}{held}, or add nodes"
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
    return Finding("capacity-exhausted", verdict, action, tuple(facts))


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
