"""A GPU resource that no node the Pod could use advertises: a MIG change under way,
a device plugin that is not registered, or a name no device plugin advertises."""

from __future__ import annotations

from webhook.core.diagnosis.case import SHOWN_NODES, Case, label_fact, more_nodes, node_fact
from webhook.core.diagnosis.evidence import Fact, Finding
from webhook.core.diagnosis.gpunodes import (
    MIG_CONFIG,
    MIG_STATE,
    PLUGIN_DEPLOY,
    PRODUCT,
    Broken,
    broken_nodes,
    closest,
    mig_single_products,
)
from webhook.core.mig_catalog import profile_for_resource
from webhook.core.text import listing, plural


def absent(case: Case, resource: str) -> Finding:
    """`resource` is offered by no node: who should offer it, or what to ask for."""
    for bits in (case.place.placed, case.cluster.all):
        broken = list(broken_nodes(case.cluster, resource, bits, case.gpus))
        if broken:
            return broken_finding(case, resource, broken)
    return not_advertised(case, resource)


def broken_finding(case: Case, resource: str, broken: list[Broken]) -> Finding:
    mig = [b for b in broken if b.domain == "mig-reconfiguring"]
    if mig:
        return _mig(case, resource, mig, len(broken) - len(mig))
    return _plugin(case, resource, broken)


def _mig(case: Case, resource: str, nodes: list[Broken], others: int) -> Finding:
    facts: list[Fact] = []
    for b in nodes[:SHOWN_NODES]:
        facts += [
            label_fact(b.node, MIG_STATE),
            label_fact(b.node, MIG_CONFIG),
            node_fact(b.node, b.why),
        ]
        facts.append(node_fact(b.node, f"status.allocatable {resource}", "absent"))
        manager = case.cluster.daemon(b.node.name, "mig-manager")
        if manager is not None:
            facts.append(node_fact(b.node, f"MIG manager Pod {manager.pod}", manager.state()))
    facts += more_nodes(len(nodes), SHOWN_NODES)
    first = nodes[0].node
    state = first.labels.get(MIG_STATE, "")
    config = first.labels.get(MIG_CONFIG, "")
    where = (
        f"node {first.name}"
        if len(nodes) == 1
        else f"{plural(len(nodes), 'node')} ({first.name}, ...)"
    )
    verdict = (
        f"no node offers {resource} while the MIG manager reconfigures {where} "
        f"({nodes[0].why}): the MIG resources are gone until it is done"
    )
    layout = _layout_lacks(config, resource)
    if layout:
        verdict += f"; {layout}"
    manager = case.cluster.daemon(first.name, "mig-manager")
    logs = (
        f"kubectl logs -n {manager.pod.replace('/', ' ', 1)}"
        if manager
        else ("kubectl logs -n <gpu-operator namespace> -l app=nvidia-mig-manager")
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
    return Finding("mig-reconfiguring", verdict, action, tuple(facts), also)


def _layout_lacks(config: str, resource: str) -> str:
    """The target layout `all-<profile>` names another profile than the one asked for."""
    profile = profile_for_resource(resource)
    if (
        not profile
        or not config.startswith("all-")
        or config in ("all-balanced", "all-disabled", "all-enabled")
    ):
        return ""
    target = config.removeprefix("all-")
    if target == profile:
        return ""
    return f"and the layout it applies ({MIG_CONFIG}={config}) has no {profile} slices"


def _plugin(case: Case, resource: str, nodes: list[Broken]) -> Finding:
    facts: list[Fact] = []
    for b in nodes[:SHOWN_NODES]:
        facts += [
            label_fact(b.node, "nvidia.com/gpu.present"),
            label_fact(b.node, "nvidia.com/gpu.count"),
            label_fact(b.node, PLUGIN_DEPLOY),
            node_fact(b.node, b.why),
        ]
        plugin = case.cluster.daemon(b.node.name, "device-plugin")
        if plugin is None:
            facts.append(node_fact(b.node, "device plugin Pod", "none on this node"))
        elif plugin.running:
            facts.append(node_fact(b.node, f"device plugin Pod {plugin.pod}", plugin.state()))
    facts += more_nodes(len(nodes), SHOWN_NODES)
    first = nodes[0].node
    where = (
        f"node {first.name}"
        if len(nodes) == 1
        else f"{plural(len(nodes), 'node')} ({first.name}, ...)"
    )
    verdict = (
        f"GPU Feature Discovery says {where} has GPUs, but no node offers {resource}: "
        f"the device plugin has not registered it ({nodes[0].why})"
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
    return Finding("plugin-not-registered", verdict, action, tuple(facts))


def not_advertised(case: Case, resource: str) -> Finding:
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
        f"no node advertises {resource}: the scheduler reports it as Insufficient on every node"
    )
    single = mig_single_products(cluster, resource)
    close = closest(resource, names)
    mixed = cluster.inventory.index.label_bits("nvidia.com/mig.strategy", "mixed")
    if single:
        product, count = single[0]
        profile = profile_for_resource(resource)
        facts.append(
            Fact("cluster", f"nodes with {PRODUCT}={product}", f"{count} (MIG single strategy)")
        )
        verdict += (
            f"; under the MIG single strategy {plural(count, 'node')} advertise their {profile} "
            f"slices as nvidia.com/gpu"
        )
        action = (
            f"request nvidia.com/gpu instead of {resource} and select those nodes with "
            f"nodeSelector {PRODUCT}={product}"
        )
    elif close:
        verdict += f"; did you mean {' or '.join(close)}?"
        action = f"fix the resource name to {close[0]}" + (
            f" (or {' or '.join(close[1:])})" if len(close) > 1 else ""
        )
    elif resource == "nvidia.com/gpu" and mixed:
        slices = [n for n in names if n.startswith("nvidia.com/mig-")]
        verdict += (
            f"; {plural(mixed.bit_count(), 'node')} run the MIG mixed strategy and offer slices"
        )
        action = f"request a MIG slice instead: {listing(slices, 4)}"
    elif names:
        action = f"request one of the advertised names: {listing(names, 4)}"
    else:
        action = (
            f"no node advertises any {vendor} resource: install the device plugin (or the GPU "
            f"Operator) on the GPU nodes"
        )
    return Finding("name-not-advertised", verdict, action, tuple(facts))
