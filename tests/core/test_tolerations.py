"""The one toleration rule (webhook.core.kit.tolerations), for node and device taints alike.

Rows after k8s.io/api core/v1 toleration_test.go TestTolerationToleratesTaint, and the
cases where the two rules this one replaced disagreed with it (an unknown operator, a
key left empty with Equal, a value that YAML read as a number)."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from webhook.core.kit.tolerations import tolerates


class T(NamedTuple):
    key: str
    value: str
    effect: str


GPU = T("nvidia.com/gpu", "present", "NoSchedule")

ROWS: list[tuple[str, dict[str, Any], T, bool]] = [
    ("exists, same key", {"key": "nvidia.com/gpu", "operator": "Exists"}, GPU, True),
    ("exists, other key", {"key": "amd.com/gpu", "operator": "Exists"}, GPU, False),
    ("exists, no key: every taint", {"operator": "Exists"}, GPU, True),
    ("equal, same value", {"key": "nvidia.com/gpu", "value": "present"}, GPU, True),
    (
        "equal spelt out",
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"},
        GPU,
        True,
    ),
    ("equal, other value", {"key": "nvidia.com/gpu", "value": "absent"}, GPU, False),
    ("equal, no value against a value", {"key": "nvidia.com/gpu"}, GPU, False),
    ("effect differs", {"operator": "Exists", "effect": "NoExecute"}, GPU, False),
    ("effect equal", {"operator": "Exists", "effect": "NoSchedule"}, GPU, True),
    (
        "empty effect matches every effect",
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": ""},
        GPU,
        True,
    ),
    # Upstream: an operator it does not know matches nothing (the node rule took it as Equal).
    (
        "unknown operator",
        {"key": "nvidia.com/gpu", "operator": "Lt", "value": "present"},
        GPU,
        False,
    ),
    # An empty key with Equal is refused by the apiserver; ToleratesTaint compares values.
    ("no key, equal value", {"value": "present"}, GPU, True),
    ("a number as the value", {"key": "xid", "value": 79}, T("xid", "79", "NoSchedule"), True),
    (
        "null value against an empty one",
        {"key": "k", "value": None},
        T("k", "", "NoSchedule"),
        True,
    ),
]


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_tolerates(toleration: dict[str, Any], taint: T, expected: bool) -> None:
    assert tolerates(toleration, taint) is expected
