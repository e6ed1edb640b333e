"""The domains that are not about resources: gated, placement, unavailable nodes, and
not stuck at all."""

from __future__ import annotations

from datetime import datetime

from webhook.core.diagnosis.case import SHOWN_NODES, Case, amount_facts, more_nodes, node_fact
from webhook.core.diagnosis.evidence import Diagnosis, Fact
from webhook.core.diagnosis.placement import Rule, nearest_value
from webhook.core.kit.text import listing, plural

DEFAULT_SCHEDULER = "default-scheduler"
JUST_CREATED = 60  # seconds: younger Pods may simply not have been tried yet
# kube-scheduler moves unschedulable Pods back to its active queue at least every
# podMaxInUnschedulablePodsDuration (5 minutes by default), and at once on a cluster
# event that may make them fit (a Node added or changed, a Pod deleted).
RETRY = "it retries unschedulable Pods on every Node or Pod change and at least every 5 minutes"


def gated(case: Case) -> Diagnosis:
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
    return Diagnosis("gated", verdict, action, facts)


def excluded(case: Case, pool: int) -> Diagnosis:
    """No node that could hold the Pod passes its nodeSelector, affinity and taints."""
    place, cluster = case.place, case.cluster
    total = pool.bit_count()
    excluding = place.excluding(pool)
    facts = [Fact("cluster", "nodes whose allocatable could hold the Pod", str(total))]
    for rule, out in excluding:
        facts.append(Fact(f"Pod {case.pod.ref}", rule.text, f"excludes {out.bit_count()} of them"))
        near = nearest_value(cluster, rule, pool) if out == pool else None
        if near is not None:
            value = f"{near[0]} ({plural(near[1], 'node')})"
            facts.append(Fact("cluster", f"nearest value of {rule.key}", value))
    whole = [r for r, out in excluding if out == pool]
    some = [r for r, out in excluding if out != pool]
    nodes = "the one node" if total == 1 else f"all {total} nodes"
    if whole:
        verdict = f"{_texts(whole)} exclude{'s' if len(whole) == 1 else ''} {nodes} whose "
        verdict += "allocatable could hold the Pod"
        if some:
            verdict += f" ({_texts(some)} exclude{'s' if len(some) == 1 else ''} some too)"
        action = _change(case, whole[0], pool) or _unlock(case, pool)
    else:
        verdict = f"together, {_texts(some)} exclude {nodes} whose allocatable could hold the Pod"
        action = _unlock(case, pool)
    return Diagnosis("excluded-by-placement", verdict, action, tuple(facts))


def have(n: int) -> str:
    return "1 node has" if n == 1 else f"{n} nodes have"


def _texts(rules: list[Rule]) -> str:
    return listing([r.text for r in rules], 3)


def _change(case: Case, rule: Rule, pool: int) -> str | None:
    """Ask for the nearest real value instead, and say what else stands in the way."""
    near = nearest_value(case.cluster, rule, pool)
    if near is None or near[0] in rule.values:
        return None
    value = near[0]
    what = f"change {rule.text} to {rule.key}={value}"
    if rule.kind == "affinity":
        what = f"let the required node affinity on {rule.key} take {value}"
    target = pool & case.cluster.inventory.index.label_bits(rule.key, value)
    through = target & case.place.without(rule)
    if through:
        return f"{what} (then {plural(through.bit_count(), 'node')} could take it)"
    blockers = [r for r in case.place.rules if r is not rule and target & ~r.passes]
    fixes = [_fix(r) for r in blockers]
    return f"{what}, and {listing(fixes, 3)} ({have(target.bit_count())} {value})"


def _fix(rule: Rule) -> str:
    if rule.kind == "taint":
        return f"add a toleration for {rule.text.removeprefix('taint ')}"
    return f"relax {rule.text}"


def _unlock(case: Case, pool: int) -> str:
    """The one rule whose change lets the Pod onto the most nodes."""
    best: tuple[int, Rule] | None = None
    for rule, _ in case.place.excluding(pool):
        freed = (pool & case.place.without(rule)).bit_count()
        if freed and (best is None or freed > best[0]):
            best = (freed, rule)
    if best is None:
        rules = [r for r, _ in case.place.excluding(pool)]
        return f"fix {_texts(rules)}: no one change alone lets it onto a node"
    freed, rule = best
    then = f"(then {plural(freed, 'node')} could take it)"
    if rule.kind == "taint":
        taint = rule.text.removeprefix("taint ")
        return f"add a toleration for {taint}, if the Pod may use those nodes {then}"
    if rule.kind == "affinity":
        return f"relax the required node affinity {then}"
    return f"remove {rule.text}: no node that could hold the Pod has that label {then}"


def unavailable(case: Case, candidates: int) -> Diagnosis:
    """Every node that could take the Pod is out of service."""
    cluster, place = case.cluster, case.place
    facts: list[Fact] = []
    described = []
    ids = cluster.ids(candidates)
    for i in ids[:SHOWN_NODES]:
        node = cluster.nodes[i]
        why = [w for w, nodes in place.down if nodes >> i & 1]
        described.append(f"{node.name} ({', '.join(why)})")
        if node.unschedulable:
            facts.append(node_fact(node, "spec.unschedulable", "true"))
        ready = f"{node.ready or '(none)'} {node.ready_reason}".strip()
        facts.append(node_fact(node, "condition Ready", ready))
        facts += [node_fact(node, w) for w in why if w.startswith("taint ")]
    facts += more_nodes(len(ids), min(len(ids), SHOWN_NODES))
    more = f" and {len(ids) - SHOWN_NODES} more" if len(ids) > SHOWN_NODES else ""
    verdict = f"every node that could take it is out of service: {', '.join(described)}{more}"
    first = cluster.nodes[ids[0]]
    why = [w for w, nodes in place.down if nodes >> ids[0] & 1]
    if first.unschedulable:
        action = (
            f"uncordon node {first.name} once its maintenance is done "
            f"(kubectl uncordon {first.name})"
        )
    elif any("unreachable" in w for w in why):
        action = f"node {first.name} is unreachable: check that it runs and reaches the API server"
    elif first.ready not in (None, "True") or any("not-ready" in w for w in why):
        action = (
            f"node {first.name} is not Ready ({first.ready_reason or first.ready or 'no reason'}): "
            f"check its kubelet (kubectl describe node {first.name})"
        )
    else:
        action = f"relieve node {first.name} ({', '.join(why)}) or let the Pod tolerate it"
    return Diagnosis("node-unavailable", verdict, action, tuple(facts))


def fits(case: Case, room: int, now: datetime | None) -> Diagnosis:
    """There is room now: nothing in the GPU stack holds it back."""
    cluster, pod = case.cluster, case.pod
    i = cluster.ids(room)[0]
    resources = tuple(r for r in pod.want if r in case.gpu_want) or tuple(pod.want)
    facts = amount_facts(case, i, resources)
    age = (now - pod.created).total_seconds() if now and pod.created else None
    verdict = f"it fits node {cluster.nodes[i].name} now ({have(room.bit_count())} room for it)"
    if age is not None:
        facts.append(Fact(f"Pod {pod.ref}", "age", f"{int(age)} s"))
    scheduler = pod.spec.get("schedulerName")
    if isinstance(scheduler, str) and scheduler not in ("", DEFAULT_SCHEDULER):
        facts.append(Fact(f"Pod {pod.ref}", "spec.schedulerName", scheduler))
        verdict += f"; it names the scheduler {scheduler}, which has not placed it"
        action = f"nothing in the GPU stack: check that the scheduler {scheduler} runs"
    elif age is not None and age < JUST_CREATED:
        verdict += f": it was created {int(age)} s ago and the scheduler has not placed it yet"
        action = f"nothing in the GPU stack: the scheduler places it on its next attempt ({RETRY})"
    else:
        verdict += ": the cluster has room that the scheduler's last attempt did not see"
        action = f"nothing in the GPU stack: the scheduler places it on its next attempt ({RETRY})"
    return Diagnosis("not-stuck", verdict, action, tuple(facts))


def no_gpu(case: Case) -> Diagnosis:
    verdict = (
        "the Pod asks for no GPU through any channel (resource, device variable, device path, "
        "device annotation, privileged mode or claim): not a GPU-stack problem"
    )
    action = "look elsewhere: kubectl describe pod shows the scheduler's reasons"
    return Diagnosis("not-stuck", verdict, action)
