"""Label selectors as apimachinery reads them (metav1.LabelSelector).

One rule for every selector a check or a model reads: a pod-affinity term's, a Kueue
ClusterQueue's namespaceSelector, a tenant's namespaceSelector.
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.core.kit.dicts import as_dict, as_list


def selects(selector: object, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector against labels (apimachinery LabelSelectorAsSelector: a
    missing selector picks nothing, an empty one everything; an operator it rejects
    makes the selector invalid, and then it picks nothing here)."""
    if not isinstance(selector, Mapping):
        return False
    for key, value in as_dict(selector.get("matchLabels")).items():
        if labels.get(key) != value:
            return False
    for expr in map(as_dict, as_list(selector.get("matchExpressions"))):
        name, op = expr.get("key"), expr.get("operator")
        values = as_list(expr.get("values"))
        have = labels.get(name) if isinstance(name, str) else None
        if op == "In" and not (have is not None and have in values):
            return False
        if op == "NotIn" and have is not None and have in values:
            return False
        if op == "Exists" and have is None:
            return False
        if op == "DoesNotExist" and have is not None:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True
