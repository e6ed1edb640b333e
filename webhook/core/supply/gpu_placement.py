"""Whether a Pod may ever run on a GPU node: now, or after an autoscaler adds one.

Today's nodes prove nothing about tomorrow's (a nodeSelector that matches no node today
matches the node an autoscaler makes for it), so a Pod is kept off GPU nodes only by what
**every** GPU node carries, as the cluster profile states it (`GpuNodes`), and by naming a
node that is known and has no GPU:

- `spec.nodeName` skips the scheduler. The kubelet still admits the Pod only if it fits
  the node's labels (nodeSelector, required node affinity: scheduler.AdmissionCheck) and
  tolerates its **NoExecute** taints; NoSchedule taints it does not look at
  (pkg/kubelet/lifecycle/predicate.go generalFilter, "Kubelet is only interested in the
  NoExecute taint", kubernetes/kubernetes@00991fb9). A nodeName naming a known node
  without GPUs cannot reach one; naming a GPU node, or a node the inventory does not
  have, can.
- Otherwise the scheduler places it: it cannot reach a GPU node when it does not tolerate
  a NoSchedule or NoExecute taint that every GPU node carries (with the tolerations the
  cluster's admission adds: `placement_spec`), or when its nodeSelector or every term of
  its required node affinity excludes a label every GPU node carries.

`may_run_on_gpu_node` answers why it may (a reason for a message) or None when it provably
cannot. It reads the Pod's placement fields and the profile only: linear in them, and it
caches nothing keyed by their text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from webhook.core.kit.dicts import as_dict, as_list
from webhook.core.kit.idsets import first
from webhook.core.kit.text import shown
from webhook.core.kit.tolerations import tolerates
from webhook.core.supply.inventory import Inventory
from webhook.core.supply.nodes import Node, Taint
from webhook.core.supply.profiles import ClusterProfile, GpuNodes, TaintFact, placement_spec
from webhook.core.supply.scheduling import rejection
from webhook.core.workloads.pods import PodView

# Labels only GPU nodes carry, for nodes whose device plugin advertises nothing (yet):
# the GPU Operator's nvidia.com/gpu.present, GFD's product, the AMD and Intel labellers'.
GPU_NODE_LABELS = (
    "nvidia.com/gpu.present",
    "nvidia.com/gpu.product",
    "amd.com/gpu.product-name",
    "beta.amd.com/gpu.product-name",
    "gpu.intel.com/gpu-numbers",
)
OTHER_VENDORS = frozenset({"amd.com/gpu", "gpu.intel.com/i915", "gpu.intel.com/xe"})


def gpu_node_bits(inventory: Inventory, *, is_gpu: Callable[[str], bool]) -> int:
    """The inventory's nodes that have GPUs: they offer a GPU resource (`is_gpu`, or
    another vendor's) or carry a GPU label (worked out once per snapshot and `is_gpu`)."""
    key = ("gpu-nodes", is_gpu)
    found = inventory.memo(key)
    if found is None:
        index = inventory.index
        found = 0
        for name, ri in index.resources.items():
            if is_gpu(name) or name in OTHER_VENDORS:
                found |= ri.bits
        for label in GPU_NODE_LABELS:
            found |= index.key_bits(label)
        inventory.remember(key, found, found.bit_length() // 8 + 64)
    return found  # type: ignore[no-any-return]


def plain_node_names(inventory: Inventory) -> frozenset[str]:
    """The names of the inventory's nodes that advertise no extended resource and carry no
    GPU label: a Pod bound to one reaches no GPU, whatever the policies call a GPU (the
    pre-filter skips such bound Pods; worked out once per inventory snapshot)."""
    if not inventory.known:
        return frozenset()
    key = "plain-node-names"
    found: frozenset[str] | None = inventory.memo(key)
    if found is None:
        index = inventory.index
        busy = 0
        for name, ri in index.resources.items():
            if "/" in name:
                busy |= ri.bits
        for label in GPU_NODE_LABELS:
            busy |= index.key_bits(label)
        plain = index.all & ~busy
        found = frozenset(node.name for node in index.nodes_in(plain))
        inventory.remember(key, found, 64 + 80 * len(found))
    return found


def may_run_on_gpu_node(
    pod: PodView,
    *,
    inventory: Inventory,
    profile: ClusterProfile,
    is_gpu: Callable[[str], bool],
) -> str | None:
    """Why this Pod may run on a GPU node, now or later; None if it provably cannot."""
    spec = placement_spec(pod)
    facts = profile.gpu_nodes
    if _excluded_label(spec, facts) is not None:
        return None
    name = spec.get("nodeName")
    if type(name) is str and name:
        return _named(spec, name, inventory, facts, is_gpu)
    if _untolerated(spec, facts, ("NoSchedule", "NoExecute")) is not None:
        return None
    if not facts.taints and not facts.labels:
        return "the cluster profile names no taint or label that every GPU node carries"
    return (
        "it tolerates every taint the cluster profile puts on all GPU nodes, and selects "
        "none of their labels away"
    )


def _named(
    spec: Mapping[str, Any],
    name: str,
    inventory: Inventory,
    facts: GpuNodes,
    is_gpu: Callable[[str], bool],
) -> str | None:
    if _untolerated(spec, facts, ("NoExecute",)) is not None:
        return None  # the kubelet refuses it on every GPU node
    placed = (
        f'spec.nodeName "{shown(name, 80)}" places it without the scheduler, past NoSchedule taints'
    )
    if not inventory.known:
        return f"{placed}, on a node no inventory shows"
    bits = inventory.index.name_bits([name])
    if not bits:
        return f"{placed}, on a node the inventory does not have"
    i = first(bits)
    if not bits & gpu_node_bits(inventory, is_gpu=is_gpu):
        return None  # a known node without GPUs
    node = inventory.index.node(i)
    if _kubelet_refuses(spec, node):
        return None
    return f"{placed}, on GPU node {shown(name, 80)}"


def _kubelet_refuses(spec: Mapping[str, Any], node: Node) -> bool:
    """The kubelet's own admission (predicate.go generalFilter): labels, NoExecute taints."""
    labels = {"nodeSelector": spec.get("nodeSelector"), "affinity": spec.get("affinity")}
    why = rejection(labels, node)  # with no tolerations: a taint is no refusal here
    if why is not None and not why.startswith("taint "):
        return True
    tolerations = [as_dict(t) for t in as_list(spec.get("tolerations"))]
    return any(
        t.effect == "NoExecute" and not any(tolerates(x, t) for x in tolerations)
        for t in node.taints
    )


def _untolerated(
    spec: Mapping[str, Any], facts: GpuNodes, effects: tuple[str, ...]
) -> TaintFact | None:
    """A taint every GPU node carries, of these effects, that the pod does not tolerate.
    A taint of any value is tolerated by any toleration of its key and effect (the value
    it names may be the node's)."""
    tolerations = [as_dict(t) for t in as_list(spec.get("tolerations"))]
    for fact in facts.taints:
        if fact.effect not in effects:
            continue
        if not any(tolerates(t, _as_taint(fact, t)) for t in tolerations):
            return fact
    return None


def _as_taint(fact: TaintFact, toleration: Mapping[str, Any]) -> Taint:
    if fact.value is not None:
        return Taint(fact.key, fact.value, fact.effect)
    value = toleration.get("value")
    return Taint(fact.key, "" if value is None else str(value), fact.effect)


def _excluded_label(spec: Mapping[str, Any], facts: GpuNodes) -> tuple[str, str | None] | None:
    """A label every GPU node carries that the pod's nodeSelector, or every term of its
    required node affinity, rules out."""
    if not facts.labels:
        return None
    selector = as_dict(spec.get("nodeSelector"))
    for key, want in facts.labels:
        if key in selector and want is not None and str(selector[key]) != want:
            return key, want
    required = as_dict(
        as_dict(as_dict(spec.get("affinity")).get("nodeAffinity")).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    )
    if not required:
        return None
    terms = as_list(required.get("nodeSelectorTerms"))
    for fact in facts.labels:
        if all(_term_excludes(as_dict(t), fact) for t in terms):
            return fact
    return None


def _term_excludes(term: Mapping[str, Any], fact: tuple[str, str | None]) -> bool:
    expressions = as_list(term.get("matchExpressions"))
    if not expressions and not as_list(term.get("matchFields")):
        return True  # an empty term matches no node
    return any(_expression_excludes(as_dict(e), fact) for e in expressions)


def _expression_excludes(expr: Mapping[str, Any], fact: tuple[str, str | None]) -> bool:
    """Whether a node whose label `key` is `want` (any value when None) fails `expr`
    (the scheduler's rule: webhook.core.supply.scheduling _expression_matches)."""
    key, want = fact
    if str(expr.get("key", "")) != key:
        return False
    op = expr.get("operator")
    values = [str(v) for v in as_list(expr.get("values"))]
    if op == "DoesNotExist":
        return True
    if op == "Exists" or want is None:
        return op not in (
            "In",
            "NotIn",
            "Exists",
            "Gt",
            "Lt",
        )  # an unknown operator matches nothing
    if op == "In":
        return want not in values
    if op == "NotIn":
        return want in values
    if op in ("Gt", "Lt") and len(values) == 1:
        try:
            have, bound = int(want), int(values[0])
        except ValueError:
            return True  # a label that is no integer fails Gt and Lt
        return not (have > bound if op == "Gt" else have < bound)
    return True
