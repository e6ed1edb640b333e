"""DRA device taints (KEP-5055): devices with a NoSchedule/NoExecute taint a request does
not tolerate are not allocatable; a toleration with operator Exists and no key is a
warning. Exact messages, through the engine with the shipped policies."""

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
LOST = {"key": "gpu.nvidia.com/gpu-lost", "effect": "NoSchedule"}
XID = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"}
INFO = {"key": "gpu.nvidia.com/xid", "value": "13", "effect": "None"}


def gpu(index: int, *taints: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": f"gpu-{index}",
        "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H100"}},
        "capacity": {"memory": {"value": "80Gi"}},
    }
    if taints:
        out["taints"] = list(taints)
    return out


def claim(count: int = 1, tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": DRIVER, "count": count}
    if tolerations is not None:
        exactly["tolerations"] = tolerations
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def findings(obj: dict[str, Any], inv: Inventory) -> list[tuple[str, str, str]]:
    decision = evaluate(POLICIES, subject_of(obj), inv)
    assert decision.error is None
    return [(f.action, f.rule, f.message) for f in decision.findings]


TAIL = (
    "so the scheduler never allocates it. A NoSchedule or NoExecute device taint marks a "
    "device unusable (a lost GPU, an XID error); tolerate only a taint known to be harmless."
)
EVERY = (
    "tolerates every device taint, so the claim can get a GPU its driver marked lost or "
    "failing (gpu.nvidia.com/gpu-lost, gpu.nvidia.com/xid). Name the taint keys it may accept."
)

CASES = [
    ("no taint", dra_inventory([gpu(0), gpu(1)]), claim(), []),
    ("an informational taint (effect None)", dra_inventory([gpu(0, INFO)]), claim(), []),
    (
        "the only device is lost",
        dra_inventory([gpu(0, LOST)]),
        claim(),
        [
            (
                "deny",
                "device-tainted",
                'ResourceClaim "c" request "gpu": 1 device it can match is tainted and not '
                "tolerated (gpu.nvidia.com/n0/gpu-0 (gpu.nvidia.com/gpu-lost:NoSchedule)), "
                "leaving none usable for 1 device, " + TAIL,
            )
        ],
    ),
    (
        "two on one node, one with an XID: two asked",
        dra_inventory([gpu(0), gpu(1, XID)]),
        claim(2),
        [
            (
                "deny",
                "device-tainted",
                'ResourceClaim "c" request "gpu": 1 device it can match is tainted and not '
                "tolerated (gpu.nvidia.com/n0/gpu-1 (gpu.nvidia.com/xid=79:NoExecute)), "
                "leaving at most 1 usable on one node for 2 devices, " + TAIL,
            )
        ],
    ),
    ("another node has a clean one", dra_inventory([gpu(0, LOST)], [gpu(0)]), claim(), []),
    (
        "the request tolerates the taint by key",
        dra_inventory([gpu(0, LOST)]),
        claim(tolerations=[{"key": "gpu.nvidia.com/gpu-lost", "operator": "Exists"}]),
        [],
    ),
    (
        "a toleration of another value does not tolerate it",
        dra_inventory([gpu(0, XID)]),
        claim(tolerations=[{"key": "gpu.nvidia.com/xid", "value": "48"}]),
        [
            (
                "deny",
                "device-tainted",
                'ResourceClaim "c" request "gpu": 1 device it can match is tainted and not '
                "tolerated (gpu.nvidia.com/n0/gpu-0 (gpu.nvidia.com/xid=79:NoExecute)), "
                "leaving none usable for 1 device, " + TAIL,
            )
        ],
    ),
    (
        "Exists with no key swallows every taint: allocatable, but a warning",
        dra_inventory([gpu(0, LOST)]),
        claim(tolerations=[{"operator": "Exists"}]),
        [
            (
                "warn",
                "tolerates-every-taint",
                'ResourceClaim "c" request "gpu": tolerations[0] (operator Exists, no key) '
                + EVERY,
            )
        ],
    ),
]


@pytest.mark.parametrize(
    ("inv", "obj", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_device_taints(inv: Inventory, obj: dict[str, Any], expected: list[Any]) -> None:
    assert findings(obj, inv) == expected


def test_the_toleration_warning_needs_no_inventory() -> None:
    obj = claim(tolerations=[{"operator": "Exists", "effect": "NoExecute"}])
    [(action, rule, message)] = findings(obj, Inventory.unknown())
    assert (action, rule) == ("warn", "tolerates-every-taint")
    assert "tolerates every NoExecute device taint" in message
