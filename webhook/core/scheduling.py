"""Which nodes could ever run a pod: nodeSelector, required node affinity, taints.

Only the hard constraints count; preferences and resources in use do not, because an
admission decision must hold for any moment the scheduler might pick.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.core.inventory import Inventory, Node, Offer, Taint
from webhook.core.workloads import PodView, as_dict, as_list

_HARD_EFFECTS = ("NoSchedule", "NoExecute")


def candidate_offers(pod: PodView, resource: str, inventory: Inventory) -> tuple[Offer, ...]:
    """The offers of `resource` on nodes this pod may be scheduled to."""
    constraints = pod.memo.get("constraints")
    if constraints is None:
        constraints = pod.memo["constraints"] = _constraints_key(pod.spec)
    key = (resource, constraints)
    cached = inventory.memo(key)
    if cached is None:
        cached = tuple(
            o for o in inventory.offers.get(resource, ()) if rejection(pod.spec, o.node) is None
        )
        inventory.remember(key, cached)
    return cached  # type: ignore[no-any-return]


def rejection(spec: Mapping[str, Any], node: Node) -> str | None:
    """Why the pod cannot land on the node, or None if it can."""
    selector = as_dict(spec.get("nodeSelector"))
    for key, value in selector.items():
        if node.labels.get(key) != str(value):
            return f"nodeSelector {key}={value}"
    affinity = as_dict(
        as_dict(as_dict(spec.get("affinity")).get("nodeAffinity")).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    )
    if affinity:
        terms = as_list(affinity.get("nodeSelectorTerms"))
        if not any(_term_matches(as_dict(t), node) for t in terms):
            return "required node affinity"
    taints = untolerated_taints(spec, node)
    return f"taint {taint_text(taints[0])}" if taints else None


def untolerated_taints(spec: Mapping[str, Any], node: Node) -> tuple[Taint, ...]:
    """The node's NoSchedule/NoExecute taints that the pod does not tolerate."""
    tolerations = [as_dict(t) for t in as_list(spec.get("tolerations"))]
    return tuple(
        taint
        for taint in node.taints
        if taint.effect in _HARD_EFFECTS and not any(_tolerates(t, taint) for t in tolerations)
    )


def taint_text(taint: Taint) -> str:
    return f"{taint.key}={taint.value}:{taint.effect}"


def _term_matches(term: Mapping[str, Any], node: Node) -> bool:
    expressions = as_list(term.get("matchExpressions"))
    fields = as_list(term.get("matchFields"))
    if not expressions and not fields:
        return False  # an empty term matches no node
    field_values = {"metadata.name": node.name}
    return all(_expression_matches(as_dict(e), node.labels) for e in expressions) and all(
        _expression_matches(as_dict(f), field_values) for f in fields
    )


def _expression_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op = str(expr.get("key", "")), expr.get("operator")
    values = [str(v) for v in as_list(expr.get("values"))]
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    if toleration.get("operator") == "Exists":
        return bool(not key or key == taint.key)
    return key == taint.key and str(toleration.get("value") or "") == taint.value


def _constraints_key(spec: Mapping[str, Any]) -> str:
    # Pods of one workload share these fields; their repr makes a cheap cache key.
    fields: Sequence[str] = ("nodeSelector", "affinity", "tolerations")
    return repr([spec.get(f) for f in fields])


# Labels that say most about a GPU node, tried first when suggesting a nodeSelector.
_PREFERRED_KEYS = (
    "nvidia.com/gpu.sharing-strategy",
    "nvidia.com/gpu.product",
    "nvidia.com/mig.strategy",
)
_NODE_UNIQUE_KEYS = ("kubernetes.io/hostname",)


def pinning_selector(good: Sequence[Node], bad: Sequence[Node]) -> tuple[str, str] | None:
    """The label that the most good nodes have and no bad node has: a nodeSelector fix."""
    coverage: dict[tuple[str, str], int] = {}
    for node in good:
        for pair in node.labels.items():
            if pair[0] not in _NODE_UNIQUE_KEYS:
                coverage[pair] = coverage.get(pair, 0) + 1
    rank = {k: i for i, k in enumerate(_PREFERRED_KEYS)}
    usable = [p for p in coverage if not any(n.labels.get(p[0]) == p[1] for n in bad)]
    if not usable:
        return None
    return min(usable, key=lambda p: (-coverage[p], rank.get(p[0], len(rank)), p))
