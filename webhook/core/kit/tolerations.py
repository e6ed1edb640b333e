"""Whether a toleration tolerates a taint: the one rule for node taints and DRA device taints.

k8s.io/api core/v1 toleration.go `Toleration.ToleratesTaint` (kubernetes v1.34), which
k8s.io/dynamic-resource-allocation resourceclaim `ToleratesTaint` copies for
DeviceTolerations:

1. an empty effect matches every effect, else the effects must be equal;
2. an empty key matches every key (the apiserver lets only `Exists` leave it empty),
   else the keys must be equal;
3. operator `Exists` matches any value; `Equal`, or none, the same value; any other
   operator nothing (`Lt`/`Gt` match only behind the alpha feature gate
   TaintTolerationComparisonOperators, off by default).

The taint is anything with `key`, `value` and `effect` (a node's Taint, a device's
DeviceTaint); the toleration is the pod's or the request's mapping as written, whose
values may be of any type in a file (`value: 1`), read as their text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

# The effects that keep a Pod off a node (or a device from a request) unless tolerated;
# PreferNoSchedule only scores, and a DRA taint's None informs.
BLOCKING = ("NoSchedule", "NoExecute")


class Taint(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def effect(self) -> str: ...


def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    if key and key != taint.key:
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator != "Equal":
        return False
    value = toleration.get("value")
    return ("" if value is None else value if type(value) is str else str(value)) == taint.value
