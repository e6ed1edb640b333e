"""Candidate nodes: nodeSelector, required node affinity, taints and tolerations."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.builders import cluster, gpu, pod
from webhook.core.supply.inventory import Node, Taint
from webhook.core.supply.scheduling import candidate_offers, pinning_selector, rejection
from webhook.core.workloads.targets import pod_views

LABELS = {"zone": "a", "gpu.count": "8", "pool": "h100", "kubernetes.io/hostname": "n1"}
NODE = Node("n1", LABELS, (), {"nvidia.com/gpu": 8})


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    required = {"nodeSelectorTerms": list(terms)}
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    }


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        e["values"] = list(values)
    return e


def term(*exprs: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {"matchExpressions": list(exprs)} if exprs else {}
    if fields is not None:
        t["matchFields"] = fields
    return t


AFFINITY = "required node affinity"


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({}, None),
        ({"nodeSelector": {"zone": "a"}}, None),
        ({"nodeSelector": {"zone": "a", "pool": "h100"}}, None),
        ({"nodeSelector": {"zone": "b"}}, "nodeSelector zone=b"),
        ({"nodeSelector": {"absent": ""}}, "nodeSelector absent="),
        ({"nodeSelector": {"gpu.count": 8}}, None),  # a YAML number compares as its text
        (affinity(term(expr("zone", "In", "a", "b"))), None),
        (affinity(term(expr("zone", "In", "b", "c"))), AFFINITY),
        (affinity(term(expr("absent", "In", "a"))), AFFINITY),
        (affinity(term(expr("zone", "NotIn", "b"))), None),
        (affinity(term(expr("zone", "NotIn", "a"))), AFFINITY),
        (affinity(term(expr("absent", "NotIn", "a"))), None),  # NotIn holds for a missing key
        (affinity(term(expr("pool", "Exists"))), None),
        (affinity(term(expr("absent", "Exists"))), AFFINITY),
        (affinity(term(expr("absent", "DoesNotExist"))), None),
        (affinity(term(expr("pool", "DoesNotExist"))), AFFINITY),
        (affinity(term(expr("gpu.count", "Gt", "7"))), None),
        (affinity(term(expr("gpu.count", "Gt", "8"))), AFFINITY),
        (affinity(term(expr("gpu.count", "Lt", "9"))), None),
        (affinity(term(expr("gpu.count", "Lt", "8"))), AFFINITY),
        (affinity(term(expr("pool", "Gt", "1"))), AFFINITY),  # not an integer label
        (affinity(term(expr("absent", "Lt", "1"))), AFFINITY),
        (affinity(term(expr("gpu.count", "Gt", "1", "2"))), AFFINITY),  # Gt takes one value
        (affinity(term(expr("zone", "Like", "a"))), AFFINITY),  # unknown operator
        # Expressions in a term are ANDed, terms are ORed.
        (affinity(term(expr("zone", "In", "a"), expr("pool", "In", "a100"))), AFFINITY),
        (affinity(term(expr("pool", "In", "a100")), term(expr("zone", "In", "a"))), None),
        # An empty term matches no node; so does an empty list of terms.
        (affinity(term()), AFFINITY),
        (affinity(), AFFINITY),
        # matchFields: metadata.name only.
        (affinity(term(fields=[expr("metadata.name", "In", "n1")])), None),
        (affinity(term(fields=[expr("metadata.name", "NotIn", "n1")])), AFFINITY),
        (
            affinity(term(expr("zone", "In", "a"), fields=[expr("metadata.name", "In", "n2")])),
            AFFINITY,
        ),
        # Preferred affinity is only a preference.
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 1, "preference": term(expr("zone", "In", "b"))}
                        ]
                    }
                }
            },
            None,
        ),
        # The nodeSelector is checked first.
        (
            {"nodeSelector": {"zone": "b"}, **affinity(term(expr("zone", "In", "b")))},
            "nodeSelector zone=b",
        ),
    ],
)
def test_node_selection(spec: dict[str, Any], why: str | None) -> None:
    assert rejection(spec, NODE) == why


def tainted(*taints: tuple[str, str, str]) -> Node:
    return Node("t", {}, tuple(Taint(*t) for t in taints), {"nvidia.com/gpu": 8})


GPU_NOSCHEDULE = ("nvidia.com/gpu", "present", "NoSchedule")


@pytest.mark.parametrize(
    ("taints", "tolerations", "why"),
    [
        ([GPU_NOSCHEDULE], [], "taint nvidia.com/gpu=present:NoSchedule"),
        ([("dedicated", "ml", "NoExecute")], [], "taint dedicated=ml:NoExecute"),
        ([("dedicated", "ml", "PreferNoSchedule")], [], None),  # a preference only
        ([GPU_NOSCHEDULE], [{"key": "nvidia.com/gpu", "operator": "Exists"}], None),
        (
            [GPU_NOSCHEDULE],
            [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            None,
        ),
        (
            [GPU_NOSCHEDULE],
            [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}],
            "taint nvidia.com/gpu=present:NoSchedule",
        ),
        (
            [GPU_NOSCHEDULE],
            [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}],
            None,
        ),
        (
            [GPU_NOSCHEDULE],
            [{"key": "nvidia.com/gpu", "value": "present"}],
            None,
        ),  # Equal by default
        (
            [GPU_NOSCHEDULE],
            [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true"}],
            "taint nvidia.com/gpu=present:NoSchedule",
        ),
        (
            [GPU_NOSCHEDULE],
            [{"key": "nvidia.com/gpu", "operator": "Equal"}],
            "taint nvidia.com/gpu=present:NoSchedule",
        ),
        (
            [GPU_NOSCHEDULE],
            [{"key": "other", "operator": "Exists"}],
            "taint nvidia.com/gpu=present:NoSchedule",
        ),
        # An empty key with Exists tolerates every taint.
        ([GPU_NOSCHEDULE, ("dedicated", "ml", "NoExecute")], [{"operator": "Exists"}], None),
        (
            [GPU_NOSCHEDULE, ("dedicated", "ml", "NoExecute")],
            [{"operator": "Exists", "effect": "NoSchedule"}],
            "taint dedicated=ml:NoExecute",
        ),
        # A taint without a value; every taint must be tolerated.
        ([("gpu", "", "NoSchedule")], [{"key": "gpu", "operator": "Equal", "value": ""}], None),
        (
            [("gpu", "", "NoSchedule"), GPU_NOSCHEDULE],
            [{"key": "gpu", "operator": "Exists"}],
            "taint nvidia.com/gpu=present:NoSchedule",
        ),
        (
            [GPU_NOSCHEDULE],
            [{"key": "nvidia.com/gpu", "operator": "Exists", "tolerationSeconds": 30}],
            None,
        ),
    ],
)
def test_taints_and_tolerations(
    taints: list[tuple[str, str, str]], tolerations: list[dict[str, Any]], why: str | None
) -> None:
    assert rejection({"tolerations": tolerations}, tainted(*taints)) == why


def candidates(obj: dict[str, Any], resource: str = "nvidia.com/gpu") -> list[str]:
    (view,) = pod_views(obj) or []
    return [o.node.name for o in candidate_offers(view, resource, cluster())]


TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists"}]


@pytest.mark.parametrize(
    ("spec", "resource", "nodes"),
    [
        ({}, "nvidia.com/gpu", ["a10g-ts"]),  # the H100 nodes are tainted
        ({"tolerations": TOLERATE}, "nvidia.com/gpu", ["h100-a", "h100-b", "a10g-ts"]),
        (
            {"tolerations": TOLERATE, "nodeSelector": {"nvidia.com/gpu.sharing-strategy": "none"}},
            "nvidia.com/gpu",
            ["h100-a", "h100-b"],
        ),
        (
            {
                "tolerations": TOLERATE,
                **affinity(term(fields=[expr("metadata.name", "In", "h100-b")])),
            },
            "nvidia.com/gpu",
            ["h100-b"],
        ),
        ({"nodeSelector": {"kubernetes.io/hostname": "cpu"}}, "nvidia.com/gpu", []),
        ({}, "nvidia.com/mig-1g.10gb", ["a100-mig"]),
        ({}, "nvidia.com/mig-7g.80gb", []),
    ],
)
def test_candidate_offers(spec: dict[str, Any], resource: str, nodes: list[str]) -> None:
    assert candidates(pod(gpu(resource), **spec), resource) == nodes


def test_candidates_are_memoised_per_constraints() -> None:
    first = pod(gpu(), tolerations=TOLERATE, name="a")
    second = pod(gpu("nvidia.com/gpu", 2), tolerations=TOLERATE, name="b")
    (a,) = pod_views(first) or []
    (b,) = pod_views(second) or []
    assert candidate_offers(a, "nvidia.com/gpu", cluster()) is candidate_offers(
        b, "nvidia.com/gpu", cluster()
    )


def labelled(name: str, **labels: str) -> Node:
    return Node(name, {"kubernetes.io/hostname": name, **labels}, (), {})


@pytest.mark.parametrize(
    ("good", "bad", "pin"),
    [
        ([labelled("a", pool="x")], [labelled("b", pool="y")], ("pool", "x")),
        ([], [labelled("b")], None),
        ([labelled("a", pool="x")], [labelled("b", pool="x")], None),  # hostname never suggested
        # The GFD sharing-strategy label is preferred over any other that also works.
        (
            [labelled("a", pool="x", **{"nvidia.com/gpu.sharing-strategy": "none"})],
            [labelled("b", pool="y", **{"nvidia.com/gpu.sharing-strategy": "time-slicing"})],
            ("nvidia.com/gpu.sharing-strategy", "none"),
        ),
        # The label that covers the most good nodes wins.
        (
            [labelled("a", pool="x", zone="1"), labelled("c", pool="z", zone="1")],
            [labelled("b", pool="y", zone="2")],
            ("zone", "1"),
        ),
    ],
)
def test_pinning_selector(good: list[Node], bad: list[Node], pin: tuple[str, str] | None) -> None:
    assert pinning_selector(good, bad) == pin
