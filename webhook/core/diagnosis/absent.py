"""A GPU resource that no node the Pod could use advertises: a MIG change under way,
a device plugin that is not registered, or a name no device plugin advertises."""

from __future__ import annotations

from webhook.core.diagnosis.case import SHOWN_NODES, Case, label_fact, more_nodes, node_fact
from webhook.core.diagnosis.evidence import Diagnosis, Fact
from webhook.core.diagnosis.gpunodes import (
    MIG_CONFIG,
    MIG_STATE,
    PAUSED,
    PLUGIN_DEPLOY,
    PRODUCT,
    Broken,
    broken_nodes,
    mig_single_products,
)
from webhook.core.kit.text import closest, listing, plural
from webhook.core.supply.mig_catalog import catalog_resource_names, profile_for_resource


def absent(case: Case, resource: str) -> Diagnosis:
    """`resource` is offered by no node: who should offer it, or what to ask for."""
    for bits in (case.place.placed, case.cluster.all):
        broken = list(broken_nodes(case.cluster, resource, bits, case.gpus))
        if broken:
            return broken_finding(case, resource, broken)
    return not_advertised(case, resource)


def broken_finding(case: Case, resource: str, broken: list[Broken]) -> Diagnosis:
    """Nodes that would offer `resource` but for a MIG change or their device plugin.
    Other nodes may offer it: then the Pod's placement keeps it to these."""
    elsewhere = bool(case.cluster.offering(resource))
    mig = [b for b in broken if b.domain == "mig-reconfiguring"]
    if mig:
        return _mig(case, resource, mig, len(broken) - len(mig), elsewhere)
    return _plugin(case, resource, broken, elsewhere)


def _where(nodes: list[Broken]) -> str:
    first = nodes[0].node.name
    return f"node {first}" if len(nodes) == 1 else f"{plural(len(nodes), 'node')} ({first}, ...)"


def _offer_fact(b: Broken, resource: str) -> Fact:
    have = b.node.allocatable.get(resource)
    return node_fact(b.node, f"allocatable {resource}", "absent" if have is None else str(have))


def _scope(resource: str, elsewhere: bool) -> str:
    if elsewhere:
        return f"the nodes that offer {resource} are outside the Pod's placement"
    return "no other node offers it"


def _mig(case: Case, resource: str, nodes: list[Broken], others: int, elsewhere: bool) -> Diagnosis:
    facts = [f for b in nodes[:SHOWN_NODES] for f in _mig_facts(case, b, resource)]
    facts += more_nodes(len(nodes), SHOWN_NODES)
    first = nodes[0].node
    state = first.labels.get(MIG_STATE, "")
    config = first.labels.get(MIG_CONFIG, "")
    doing = "failed to reconfigure" if state == "failed" else "is reconfiguring"
    verdict = (
        f"the MIG manager {doing} {_where(nodes)} ({nodes[0].why}), which offers no {resource} "
        f"meanwhile, and {_scope(resource, elsewhere)}"
    )
    layout = _layout_lacks(config, resource)
    if layout:
        verdict += f"; {layout}"
    manager = case.cluster.daemon(first.name, "mig-manager")
    logs = (
        f"kubectl logs -n {manager.pod.replace('/', ' ', 1)}"
        if manager
        else "kubectl logs -n <GPU Operator namespace> -l app=nvidia-mig-manager"
    )
    if state == "failed":
        action = (
            f"the MIG manager failed on node {first.name}: read its logs ({logs}), fix the "
            f"layout it was asked for ({MIG_CONFIG}={config or '(not set)'}) and set the label "
            f"again to retry"
        )
    else:
        action = (
            f"wait for the MIG manager on node {first.name} (state={state or 'paused'}); if it "
            f"stays there, read its logs ({logs}): a GPU Pod that does not terminate blocks it "
            f"(kubectl get pods -A --field-selector spec.nodeName={first.name})"
        )
    also = (f"{plural(others, 'other node')}: device plugin not registered",) if others else ()
    return Diagnosis("mig-reconfiguring", verdict, action, tuple(facts), also)


def _mig_facts(case: Case, b: Broken, resource: str) -> list[Fact]:
    facts = [label_fact(b.node, MIG_STATE), label_fact(b.node, MIG_CONFIG)]
    facts += [label_fact(b.node, k) for k in sorted(b.node.labels) if b.node.labels[k] == PAUSED]
    facts.append(_offer_fact(b, resource))
    manager = case.cluster.daemon(b.node.name, "mig-manager")
    if manager is not None:
        facts.append(node_fact(b.node, f"MIG manager Pod {manager.pod}", manager.state()))
    return facts


def _layout_lacks(config: str, resource: str) -> str:
    """The target layout `all-<profile>` names another profile than the one asked for."""
    profile = profile_for_resource(resource)
    generic = ("all-balanced", "all-disabled", "all-enabled")
    if not profile or not config.startswith("all-") or config in generic:
        return ""
    if config.removeprefix("all-") == profile:
        return ""
    return f"the layout it applies ({MIG_CONFIG}={config}) has no {profile} slices either"


def _plugin(case: Case, resource: str, nodes: list[Broken], elsewhere: bool) -> Diagnosis:
    facts = [f for b in nodes[:SHOWN_NODES] for f in _plugin_facts(case, b, resource)]
    facts += more_nodes(len(nodes), SHOWN_NODES)
    first = nodes[0].node
    has = "has" if len(nodes) == 1 else "have"
    verdict = (
        f"GPU Feature Discovery says {_where(nodes)} {has} GPUs, but the device plugin has not "
        f"registered {resource} there ({nodes[0].why}), and {_scope(resource, elsewhere)}"
    )
    plugin = case.cluster.daemon(first.name, "device-plugin")
    if first.labels.get(PLUGIN_DEPLOY) == "false":
        action = (
            f"the device plugin is switched off on node {first.name}: if the node should serve "
            f"GPUs, kubectl label node {first.name} {PLUGIN_DEPLOY}=true --overwrite"
        )
    elif plugin is not None and not plugin.running:
        ns, name = plugin.pod.split("/", 1)
        action = (
            f"restart the device plugin on node {first.name}: read its logs (kubectl logs -n {ns} "
            f"{name}), then kubectl delete pod -n {ns} {name} (its DaemonSet starts a new one)"
        )
    else:
        action = (
            f"restart the device plugin on node {first.name} and check that it registers "
            f"{resource} with the kubelet (kubectl get pods -A -o wide --field-selector "
            f"spec.nodeName={first.name} shows its Pod)"
        )
    return Diagnosis("plugin-not-registered", verdict, action, tuple(facts))


def _plugin_facts(case: Case, b: Broken, resource: str) -> list[Fact]:
    facts = [
        label_fact(b.node, "nvidia.com/gpu.present"),
        label_fact(b.node, "nvidia.com/gpu.count"),
        label_fact(b.node, PLUGIN_DEPLOY),
        _offer_fact(b, resource),
    ]
    plugin = case.cluster.daemon(b.node.name, "device-plugin")
    if plugin is None:
        return [*facts, node_fact(b.node, "device plugin Pod", "none on this node")]
    return [*facts, node_fact(b.node, f"device plugin Pod {plugin.pod}", plugin.state())]


def not_advertised(case: Case, resource: str) -> Diagnosis:
    cluster = case.cluster
    vendor = resource.split("/", 1)[0] + "/"
    names = sorted(
        r for r in cluster.inventory.index.resources if r.startswith(vendor) and case.gpus.is_gpu(r)
    )
    facts = [
        Fact("cluster", f"nodes advertising {resource}", f"0 of {cluster.inventory.node_count}"),
        Fact("cluster", f"advertised {vendor} GPU resources", listing(names, 8) or "none"),
    ]
    verdict = (
        f"no node advertises {resource}, so the scheduler finds it Insufficient on every node "
        f"that passes its other filters"
    )
    single = mig_single_products(cluster, resource)
    if single:
        product, count = single[0]
        facts.append(
            Fact("cluster", f"nodes with {PRODUCT}={product}", f"{count} (MIG single strategy)")
        )
        verdict += (
            f"; under the MIG single strategy {plural(count, 'node')} advertise their "
            f"{profile_for_resource(resource)} slices as nvidia.com/gpu"
        )
        action = (
            f"request nvidia.com/gpu instead of {resource} and select those nodes with "
            f"nodeSelector {PRODUCT}={product}"
        )
        return Diagnosis("name-not-advertised", verdict, action, tuple(facts))
    hint, action = _hint(case, resource, names, vendor)
    return Diagnosis("name-not-advertised", verdict + hint, action, tuple(facts))


def _hint(case: Case, resource: str, names: list[str], vendor: str) -> tuple[str, str]:
    """(what the verdict adds, the next action) for a name no node advertises."""
    is_mig = resource.startswith("nvidia.com/mig-")
    slices = [n for n in names if n.startswith("nvidia.com/mig-")]
    mixed = case.cluster.inventory.index.label_bits("nvidia.com/mig.strategy", "mixed")
    if resource == "nvidia.com/gpu" and mixed and slices:
        run = "1 node runs" if mixed.bit_count() == 1 else f"{mixed.bit_count()} nodes run"
        return (
            f"; {run} the MIG mixed strategy and offer slices",
            f"request a MIG slice instead: {listing(slices, 4)}",
        )
    close = closest(resource, slices if is_mig else names)
    if close:
        more = f" (or {' or '.join(close[1:])})" if len(close) > 1 else ""
        return f"; did you mean {' or '.join(close)}?", f"fix the resource name to {close[0]}{more}"
    if is_mig and not slices:
        known = sorted(n for n in catalog_resource_names() if n.startswith("nvidia.com/mig-"))
        near = closest(resource, known)
        hint = "; no node offers MIG slices at all"
        if near and near[0] != resource:
            hint += f" (the nearest MIG name is {near[0]})"
        return hint, (
            "request whole GPUs (nvidia.com/gpu), or have the MIG manager partition some GPUs "
            "(label nvidia.com/mig.config) under the mixed strategy so that the slice is offered"
        )
    if names:
        return "", f"request one of the advertised names: {listing(names, 4)}"
    return "", (
        f"no node advertises any {vendor} resource: install the device plugin (or the GPU "
        f"Operator) on the GPU nodes"
    )
