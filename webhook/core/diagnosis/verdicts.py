"""The domains that are not about resources: gated, placement, unavailable nodes, and
not stuck at all."""

from __future__ import annotations

from datetime import datetime

from webhook.core.diagnosis.case import SHOWN_NODES, Case, amount_facts, more_nodes, node_fact
from webhook.core.diagnosis.evidence import Fact, Finding
from webhook.core.diagnosis.placement import Rule, nearest_value
from webhook.core.text import listing, plural

JUST_CREATED = 60  # seconds: younger Pods may simply not have been tried yet
# kube-scheduler moves unschedulable Pods back to its active queue at least every
# podMaxInUnschedulablePodsDuration (5 minutes by default), and at once on a cluster
# event that may make them fit (a Node added or changed, a Pod deleted).
RETRY = "it retries unschedulable Pods on every Node or Pod change and at least every 5 minutes"


def gated(case: Case) -> Finding:
    gates = case.pod.gates
    facts = tuple(Fact(f"Pod {case.pod.ref}", "spec.schedulingGates", g) for g in gates)
    verdict = (
        f"the Pod has scheduling gates ({listing(gates, 3)}): the scheduler does not try to "
        f"place it until every gate is removed"
    )
    namespace = case.pod.ref.split("/", 1)[0]
    if any(g.startswith("kueue.x-k8s.io/") for g in gates):
        action = (
            f"Kueue has not admitted it: check its Workload (kubectl get workloads -n {namespace}) "
            f"and the quota of its ClusterQueue (kubectl describe clusterqueue)"
        )
    else:
        action = (
            f"wait for the controller that added {gates[0]} to remove it; remove the gate "
            f"yourself only if that controller is gone"
        )
    return Finding("gated", verdict, action, facts)


def excluded(case: Case, pool: int) -> Finding:
    """No node that could hold the Pod passes its nodeSelector, affinity and taints."""
    place, cluster = case.place, case.cluster
    total = pool.bit_count()
    facts = [Fact("cluster", "nodes whose allocatable could hold the Pod", str(total))]
    best: tuple[int, Rule] | None = None
    for rule, out in place.excluding(pool):
        facts.append(Fact(f"Pod {case.pod.ref}", rule.text, f"excludes {out.bit_count()} of them"))
        near = nearest_value(cluster, rule, pool) if not rule.passes & pool else None
        if near is not None:
            facts.append(
                Fact(
                    "cluster",
                    f"nearest value of {rule.key}",
                    f"{near[0]} ({plural(near[1], 'node')})",
                )
            )
        freed = (pool & place.without(rule)).bit_count()
        if freed and (best is None or freed > best[0]):
            best = (freed, rule)
    rules = [r for r, _ in place.excluding(pool)]
    verdict = (
        f"{listing([r.text for r in rules], 3)} exclude{'s' if len(rules) == 1 else ''} every one "
        f"of the {plural(total, 'node')} whose allocatable could hold the Pod"
    )
    if best is None:
        action = (
            f"fix {listing([r.text for r in rules], 3)}: no one change alone lets it onto a node"
        )
    else:
        action = _unlock(case, best[1], pool, best[0])
    return Finding("excluded-by-placement", verdict, action, tuple(facts))


def _unlock(case: Case, rule: Rule, pool: int, freed: int) -> str:
    then = f"(then {plural(freed, 'node')} could take it)"
    near = nearest_value(case.cluster, rule, pool)
    if rule.kind == "nodeSelector":
        if near is not None:
            return f"change {rule.text} to {rule.key}={near[0]} {then}"
        return f"remove {rule.text}: no node that could hold the Pod has it {then}"
    if rule.kind == "affinity":
        if near is not None and near[0] not in rule.values:
            return f"let the required node affinity on {rule.key} take {near[0]} {then}"
        return f"relax the required node affinity {then}"
    taint = rule.text.removeprefix("taint ")
    return f"add a toleration for {taint}, if the Pod may use those nodes {then}"


def unavailable(case: Case, candidates: int) -> Finding:
    """Every node that could take the Pod is out of service."""
    cluster, place = case.cluster, case.place
    reasons = [(why, nodes & candidates) for why, nodes in place.down if nodes & candidates]
    facts: list[Fact] = []
    shown_nodes = list(cluster.named(candidates))[:SHOWN_NODES]
    for node in shown_nodes:
        if node.unschedulable:
            facts.append(node_fact(node, "spec.unschedulable", "true"))
        facts.append(
            node_fact(
                node, "condition Ready", f"{node.ready or '(none)'} {node.ready_reason}".strip()
            )
        )
        for why, nodes in reasons:
            i = cluster.inventory.index.ids.get(node.name)
            if why.startswith("taint") and i is not None and nodes >> i & 1:
                facts.append(node_fact(node, why))
    facts += more_nodes(candidates.bit_count(), len(shown_nodes))
    counted = ", ".join(f"{plural(n.bit_count(), 'node')} {why}" for why, n in reasons)
    many = plural(candidates.bit_count(), "node")
    verdict = f"every node that could take it is out of service ({many}: {counted})"
    first = shown_nodes[0]
    why = reasons[0][0] if reasons else ""
    if first.unschedulable:
        action = (
            f"uncordon node {first.name} once its maintenance is done "
            f"(kubectl uncordon {first.name})"
        )
    elif "unreachable" in why:
        action = f"node {first.name} is unreachable: check that it runs and reaches the API server"
    elif first.ready not in (None, "True") or "not-ready" in why:
        action = (
            f"node {first.name} is not Ready ({first.ready_reason or first.ready or 'no reason'}): "
            f"check its kubelet (kubectl describe node {first.name})"
        )
    else:
        action = f"relieve node {first.name} ({why}) or let the Pod tolerate it"
    return Finding("node-unavailable", verdict, action, tuple(facts))


def fits(case: Case, room: int, now: datetime | None) -> Finding:
    """There is room now: nothing in the GPU stack holds it back."""
    cluster, pod = case.cluster, case.pod
    i = cluster.ids(room)[0]
    resources = tuple(r for r in pod.want if r in case.gpu_want) or tuple(pod.want)
    facts = amount_facts(case, i, resources)
    age = (now - pod.created).total_seconds() if now and pod.created else None
    verdict = (
        f"it fits node {cluster.nodes[i].name} now ({plural(room.bit_count(), 'node')} have room)"
    )
    if age is not None:
        facts.append(Fact(f"Pod {pod.ref}", "age", f"{int(age)} s"))
    if age is not None and age < JUST_CREATED:
        verdict += f": it was created {int(age)} s ago and the scheduler has not placed it yet"
    else:
        verdict += ": the cluster has room that the scheduler's last attempt did not see"
    action = f"nothing in the GPU stack: the scheduler places it on its next attempt ({RETRY})"
    return Finding("not-stuck", verdict, action, tuple(facts))


def no_gpu(case: Case) -> Finding:
    verdict = (
        "the Pod asks for no GPU through any channel (resource, device variable, device path, "
        "device annotation, privileged mode or claim): not a GPU-stack problem"
    )
    action = "look elsewhere: kubectl describe pod shows the scheduler's reasons"
    return Finding("not-stuck", verdict, action)
