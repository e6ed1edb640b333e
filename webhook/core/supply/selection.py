"""The nodes a pod may be scheduled to, from the inventory's indexes: a node-id bitset.

The same rules as `scheduling.rejection` (the per-node reference, which the property
test compares this with), evaluated per distinct label value instead of per node:
- nodeSelector: the intersection of its pairs' sets;
- required node affinity: terms ORed, expressions ANDed; In/NotIn from the value sets,
  Exists/DoesNotExist from the key's set, Gt/Lt over the key's distinct values;
  matchFields on metadata.name through the name index;
- taints: the nodes of every NoSchedule/NoExecute taint no toleration matches are out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.kit.dicts import as_dict, as_list
from webhook.core.kit.idsets import as_bits
from webhook.core.kit.tolerations import BLOCKING, tolerates
from webhook.core.supply.nodeindex import NodeIndex


def allowed(spec: Mapping[str, Any], index: NodeIndex) -> int:
    """The nodes whose labels and taints let the pod land on them."""
    bits = index.all
    for key, value in as_dict(spec.get("nodeSelector")).items():
        bits &= index.label_bits(key, str(value))
        if not bits:
            return 0
    affinity = as_dict(
        as_dict(as_dict(spec.get("affinity")).get("nodeAffinity")).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    )
    if affinity:
        matched = 0
        for term in as_list(affinity.get("nodeSelectorTerms")):
            matched |= _term(as_dict(term), index)
        bits &= matched
    if bits:
        bits &= ~untolerated(spec, index)
    return bits


def untolerated(spec: Mapping[str, Any], index: NodeIndex) -> int:
    """The nodes with a NoSchedule/NoExecute taint that the pod does not tolerate."""
    tolerations = [as_dict(t) for t in as_list(spec.get("tolerations"))]
    bits = 0
    for taint, nodes in index.taints.items():
        if taint.effect in BLOCKING and not any(tolerates(t, taint) for t in tolerations):
            bits |= as_bits(nodes)
    return bits


def _term(term: Mapping[str, Any], index: NodeIndex) -> int:
    expressions = as_list(term.get("matchExpressions"))
    fields = as_list(term.get("matchFields"))
    if not expressions and not fields:
        return 0  # an empty term matches no node
    bits = index.all
    for expr in expressions:
        bits &= _label_expression(as_dict(expr), index)
        if not bits:
            return 0
    for expr in fields:
        bits &= _field_expression(as_dict(expr), index)
    return bits


def _parts(expr: Mapping[str, Any]) -> tuple[str, Any, list[str]]:
    return (
        str(expr.get("key", "")),
        expr.get("operator"),
        [str(v) for v in as_list(expr.get("values"))],
    )


def _label_expression(expr: Mapping[str, Any], index: NodeIndex) -> int:
    key, op, values = _parts(expr)
    if op == "In":
        return _any_value(index, key, values)
    if op == "NotIn":
        return index.all & ~_any_value(index, key, values)
    if op == "Exists":
        return index.key_bits(key)
    if op == "DoesNotExist":
        return index.all & ~index.key_bits(key)
    if op in ("Gt", "Lt") and len(values) == 1:
        ki = index.labels.get(key)
        if ki is None:
            return 0
        return _compared(((v, as_bits(s)) for v, s in ki.values.items()), op, values[0])
    return 0


def _any_value(index: NodeIndex, key: str, values: list[str]) -> int:
    bits = 0
    for value in set(values):
        bits |= index.label_bits(key, value)
    return bits


def _field_expression(expr: Mapping[str, Any], index: NodeIndex) -> int:
    # A node's only field here is metadata.name (as the reference's field map).
    key, op, values = _parts(expr)
    if key != "metadata.name":
        return index.all if op in ("NotIn", "DoesNotExist") else 0
    if op == "In":
        return index.name_bits(values)
    if op == "NotIn":
        return index.all & ~index.name_bits(values)
    if op == "Exists":
        return index.all
    if op in ("Gt", "Lt") and len(values) == 1:
        # Names are nearly never integers; this one walks the nodes, as nothing else.
        pairs = ((name, 1 << i) for name, i in index.ids.items())
        return _compared(pairs, op, values[0])
    return 0


def _compared(pairs: Any, op: str, wanted: str) -> int:
    try:
        want = int(wanted)
    except ValueError:
        return 0
    bits = 0
    for value, nodes in pairs:
        try:
            have = int(value)
        except ValueError:
            continue
        if (have > want) if op == "Gt" else (have < want):
            bits |= nodes
    return bits
