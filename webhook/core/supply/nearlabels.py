"""A "did you mean" for node selectors: the real label value closest to a typo.

`nvidia.com/gpu.product: NVIDIA-A100-SXM4-80G` matches no node, and the Pod would stay
Pending forever; the nodes carry `NVIDIA-A100-SXM4-80GB`. Only asked on the deny path,
and bounded: label values are at most 63 characters (apimachinery's IsValidLabelValue),
so a longer wanted value is no typo of one, and at most MAX_COMPARISONS values are
compared in all (a Pod may name many keys); a key with more distinct values than that (a
hostname per node) gets no guess, as one from a sample would mislead.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.kit.dicts import as_dict, as_list
from webhook.core.kit.text import closest, shown
from webhook.core.supply.nodeindex import NodeIndex

MAX_COMPARISONS = 512
_LABEL_VALUE_MAX = 63


def selector_hint(spec: Mapping[str, Any], index: NodeIndex) -> str:
    """`; nodeSelector k=v matches no node: did you mean k=w?` for the first wanted
    label value that no node carries and that is close to one some node carries; ""
    when there is none. All nodes, not only those that offer the resource: the value
    the author meant may be on a node that offers something else (a MIG node), and the
    next message will say so once the typo is fixed."""
    budget = [MAX_COMPARISONS]
    for where, key, wanted in _wanted_values(spec):
        found = _nearest(index, key, wanted, budget)
        if found:
            return (
                f"; {where} {shown(key, 80)}={shown(wanted, 80)} matches no node: "
                f"did you mean {key}={' or '.join(found)}?"
            )
    return ""


def _wanted_values(spec: Mapping[str, Any]) -> Iterator[tuple[str, str, str]]:
    selector = spec.get("nodeSelector")
    if isinstance(selector, Mapping):
        for key, value in selector.items():
            if isinstance(key, str) and isinstance(value, str):
                yield "nodeSelector", key, value
    required = as_dict(
        as_dict(as_dict(spec.get("affinity")).get("nodeAffinity")).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    )
    for term in as_list(required.get("nodeSelectorTerms"))[:8]:
        for expr in as_list(as_dict(term).get("matchExpressions"))[:8]:
            expr = as_dict(expr)
            key = expr.get("key")
            if expr.get("operator") == "In" and isinstance(key, str):
                for value in as_list(expr.get("values"))[:8]:
                    if isinstance(value, str):
                        yield "node affinity", key, value


def _nearest(index: NodeIndex, key: str, wanted: str, budget: list[int]) -> list[str]:
    ki = index.labels.get(key)
    if ki is None or not wanted or len(wanted) > _LABEL_VALUE_MAX or wanted in ki.values:
        return []  # a value some node carries: the nodes are refused for another reason
    if len(ki.values) > budget[0]:
        return []  # a guess from a sample of the values would mislead
    budget[0] -= len(ki.values)
    return closest(wanted, list(ki.values))
