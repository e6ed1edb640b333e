"""A Pod's DRA claims judged jointly against one node (each device to one request), and
allocationMode All on a node whose matching devices differ. Exact messages, through the
engine with the shipped policies."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.builders import dra_inventory
from tests.support.paths import ROOT
from webhook.core.engine.evaluation import evaluate
from webhook.core.engine.subject import subject_of
from webhook.core.supply.inventory import Inventory
from webhook.sources.policy_files import load_policy_dir

POLICIES = load_policy_dir(str(ROOT / "policies"))
DRIVER = "gpu.nvidia.com"
A100 = ("NVIDIA A100-SXM4-80GB", "80Gi")
A10 = ("NVIDIA A10", "24Gi")


def gpu(index: int, kind: tuple[str, str] = A100) -> dict[str, Any]:
    return {
        "name": f"gpu-{index}",
        "attributes": {"type": {"string": "gpu"}, "productName": {"string": kind[0]}},
        "capacity": {"memory": {"value": kind[1]}},
    }


def request(name: str, count: int = 1, *, mode: str = "", selector: str = "") -> dict:
    exactly: dict[str, Any] = {"deviceClassName": DRIVER}
    if mode:
        exactly["allocationMode"] = mode
    else:
        exactly["count"] = count
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"name": name, "exactly": exactly}


def template(name: str, *requests: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": list(requests)}}},
    }


def pod(*templates: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {
            "resourceClaims": [
                {"name": t, "resourceClaimTemplateName": t} for t in templates
            ],
            "containers": [{"name": "c", "image": "registry.example.com/x:1",
                            "resources": {"claims": [{"name": t} for t in templates]}}],
        },
    }  # fmt: skip


def with_templates(inv: Inventory, *objs: dict[str, Any]) -> Inventory:
    supply = inv.dra
    for obj in objs:
        supply = supply.with_object(obj)
    return inv.with_dra(supply)


def findings(obj: dict[str, Any], inv: Inventory) -> list[tuple[str, str, str]]:
    decision = evaluate(POLICIES, subject_of(obj), inv)
    assert decision.error is None
    return [(f.action, f.rule, f.message) for f in decision.findings]


TWO_NODES = dra_inventory([gpu(0), gpu(1)], [gpu(0), gpu(1)])
JOINT_TAIL = (
    "each request fits alone, but all of them are allocated from one node and a device "
    "serves one request: the most any node can give at once is 2 (n0), so it is never "
    "allocated."
)
PRODUCT = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB'"

CASES = [
    (
        "two claims of two GPUs each, on nodes of two: never",
        with_templates(TWO_NODES, template("a", request("g", 2)), template("b", request("g", 2))),
        pod("a", "b"),
        [
            (
                "deny",
                "claims-exceed-node",
                'the pod asks for 4 devices in all (2 for pod claim "a" '
                '(spec.resourceClaims[0]): ResourceClaimTemplate "a" request "g", 2 for pod '
                'claim "b" (spec.resourceClaims[1]): ResourceClaimTemplate "b" request "g"); '
                + JOINT_TAIL,
            )
        ],
    ),
    (
        "two claims of one GPU each: fits on one node",
        with_templates(TWO_NODES, template("a", request("g")), template("b", request("g"))),
        pod("a", "b"),
        [],
    ),
    (
        "one claim, two requests that could both take the same devices, counted once",
        TWO_NODES,
        template("a", request("x", 2), request("y", 1, selector=PRODUCT)),
        [
            (
                "deny",
                "claims-exceed-node",
                'ResourceClaimTemplate "a" asks for 3 devices in all (2 for '
                'ResourceClaimTemplate "a" request "x", 1 for ResourceClaimTemplate "a" '
                'request "y"); ' + JOINT_TAIL,
            )
        ],
    ),
    (
        "All on a node with two products",
        dra_inventory([gpu(0), gpu(1), gpu(2, A10)]),
        template("a", request("all", mode="All")),
        [
            (
                "warn",
                "all-on-mixed-pool",
                'ResourceClaimTemplate "a" request "all" (allocationMode All) gets every '
                "device it matches on the node it lands on, and they differ there (n0: 1x "
                "NVIDIA A10 24 GiB, 2x NVIDIA A100-SXM4-80GB 80 GiB): the Pod gets whichever "
                "mix its node has. Narrow the selector to one product and memory size.",
            )
        ],
    ),
    (
        "All narrowed to one product",
        dra_inventory([gpu(0), gpu(1), gpu(2, A10)]),
        template("a", request("all", mode="All", selector=PRODUCT)),
        [],
    ),
]


@pytest.mark.parametrize(
    ("inv", "obj", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_joint_and_mixed(inv: Inventory, obj: dict[str, Any], expected: list[Any]) -> None:
    assert findings(obj, inv) == expected
