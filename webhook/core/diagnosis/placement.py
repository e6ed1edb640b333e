"""Where a Pod may go: each hard rule as the set of nodes it lets through.

The same rules as `webhook.core.supply.selection.allowed` (nodeSelector, required node
affinity, NoSchedule/NoExecute taints), kept apart so that a finding can say which
rule excludes how many nodes. Taints and conditions that say a node is out of service
(cordoned, NotReady, unreachable, under pressure) are availability, not placement: a
Pod that tolerates nothing else would land there once the node is back.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.diagnosis.cluster import ClusterFacts
from webhook.core.kit.dicts import as_dict, as_list
from webhook.core.kit.idsets import as_bits
from webhook.core.kit.tolerations import BLOCKING, tolerates
from webhook.core.supply.nodes import Taint
from webhook.core.supply.selection import allowed

# The taints the node lifecycle controller and TaintNodesByCondition set from node
# conditions, and the one `kubectl cordon` stands for (Kubernetes well-known taints).
AVAILABILITY_TAINTS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/network-unavailable",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/out-of-service",
    }
)
_CORDON = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
_EVERYTHING = [{"operator": "Exists"}]


@dataclass(frozen=True, slots=True)
class Rule:
    kind: str  # nodeSelector | affinity | taint
    text: str  # as a finding names it
    passes: int  # the nodes it lets through
    key: str = ""  # nodeSelector and affinity In: the label key
    values: tuple[str, ...] = ()  # the values it asks for


@dataclass(frozen=True, slots=True)
class Placement:
    rules: tuple[Rule, ...]
    placed: int  # the nodes every rule lets through
    down: tuple[tuple[str, int], ...]  # (why, nodes) for every reason a node is out
    unavailable: int  # the union of `down`

    def excluding(self, target: int) -> list[tuple[Rule, int]]:
        """The rules that exclude nodes of `target`, with those nodes."""
        return [(r, target & ~r.passes) for r in self.rules if target & ~r.passes]

    def without(self, rule: Rule) -> int:
        """The nodes every rule but `rule` lets through."""
        bits = -1
        for other in self.rules:
            if other is not rule:
                bits &= other.passes
        return bits


def placement(spec: Mapping[str, Any], cluster: ClusterFacts) -> Placement:
    """The Pod's rules, worked out once per distinct nodeSelector/affinity/tolerations."""
    key = ("placement", repr([spec.get(f) for f in ("nodeSelector", "affinity", "tolerations")]))
    found: Placement | None = cluster.memo(key)
    if found is None:
        found = cluster.remember(key, _placement(spec, cluster))
    return found


def _placement(spec: Mapping[str, Any], cluster: ClusterFacts) -> Placement:
    index = cluster.inventory.index
    everything = index.all
    rules: list[Rule] = []
    for key, value in as_dict(spec.get("nodeSelector")).items():
        text = f"nodeSelector {key}={value}"
        rules.append(
            Rule("nodeSelector", text, index.label_bits(key, str(value)), key, (str(value),))
        )
    affinity = as_dict(as_dict(spec.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if affinity:
        # The affinity alone: every taint tolerated, no nodeSelector.
        bits = allowed({"affinity": spec["affinity"], "tolerations": _EVERYTHING}, index)
        key, values = _in_expression(as_dict(affinity))
        rules.append(Rule("affinity", "required node affinity", bits, key, values))
    tolerations = [as_dict(t) for t in as_list(spec.get("tolerations"))]
    down: list[tuple[str, int]] = []
    if cluster.cordoned and not any(tolerates(t, _CORDON) for t in tolerations):
        down.append(("cordoned", cluster.cordoned))
    if cluster.not_ready:
        down.append(("not Ready", cluster.not_ready))
    for taint, nodes in index.taints.items():
        if taint.effect not in BLOCKING or any(tolerates(t, taint) for t in tolerations):
            continue
        if taint.key in AVAILABILITY_TAINTS:
            down.append((f"taint {taint_words(taint)}", as_bits(nodes)))
        else:
            text = f"taint {taint_words(taint)}"
            rules.append(Rule("taint", text, everything & ~as_bits(nodes), taint.key))
    placed = everything
    for rule in rules:
        placed &= rule.passes
    unavailable = 0
    for _, nodes in down:
        unavailable |= nodes
    return Placement(tuple(rules), placed, tuple(down), unavailable)


def taint_words(taint: Taint) -> str:
    """`key=value:Effect`, or `key:Effect` without a value, as kubectl writes a taint."""
    value = f"={taint.value}" if taint.value else ""
    return f"{taint.key}{value}:{taint.effect}"


def _in_expression(affinity: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    """The first `In` expression of a one-term affinity: the label a nearest value is
    looked for (with more terms, any of them may be the one meant)."""
    terms = as_list(affinity.get("nodeSelectorTerms"))
    if len(terms) != 1:
        return "", ()
    for expr in as_list(as_dict(terms[0]).get("matchExpressions")):
        expr = as_dict(expr)
        if expr.get("operator") == "In":
            return str(expr.get("key", "")), tuple(str(v) for v in as_list(expr.get("values")))
    return "", ()


def nearest_value(cluster: ClusterFacts, rule: Rule, target: int) -> tuple[str, int] | None:
    """The value of the rule's label, carried by nodes of `target`, that is closest to
    what the rule asks for, and on how many of those nodes."""
    if not rule.key or not rule.values:
        return None
    ki = cluster.inventory.index.labels.get(rule.key)
    if ki is None:
        return None
    present = {}
    for value, nodes in ki.values.items():
        count = (as_bits(nodes) & target).bit_count()
        if count:
            present[value] = count
    if not present:
        return None
    best = max(
        present,
        key=lambda v: (
            max(difflib.SequenceMatcher(None, want, v).ratio() for want in rule.values),
            present[v],
        ),
    )
    return best, present[best]
