"""Device matches worked out ahead of requests: kept across claim changes, warmed by the
watch threads before a new supply serves, readiness waiting for the DRA lists, and a
claim with selectors nobody asked for yet judged off the event loop."""

from __future__ import annotations

import asyncio
import copy
import io
from pathlib import Path
from typing import Any

import httpx
import orjson
import yaml

from tests.support.paths import ROOT
from tests.support.reviews import review
from webhook.core.dra.match import cached, match, warm
from webhook.core.dra.model import DraSupply
from webhook.serve.decisionlog import DecisionLog
from webhook.serve.server import create_app
from webhook.serve.state import Settings, State

ITEMS = yaml.safe_load((ROOT / "examples/dra/cluster.yaml").read_text())["items"]
GPU_CLASS = "device.driver == 'gpu.nvidia.com'"


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [copy.deepcopy(o) for o in ITEMS if o["kind"] == kind]


def device_class(name: str = "gpu.nvidia.com", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": GPU_CLASS}}], **spec},
    }


def slice_obj(node: str, devices: int, *, product: str = "NVIDIA H100 80GB HBM3") -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"productName": {"string": product}}}
                for i in range(devices)
            ],
        },
    }


def claim(name: str, selector: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "selectors": [{"cel": {"expression": selector}}],
                        },
                    }
                ]
            }
        },
    }


H100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"


def test_a_claim_keeps_the_device_matches_and_a_slice_does_not() -> None:
    supply = DraSupply().with_object(device_class()).with_object(slice_obj("n0", 2))
    cls = supply.classes["gpu.nvidia.com"]
    assert len(match(supply, cls, (H100,)).devices) == 2
    with_claim = supply.with_object(claim("a", H100))
    assert with_claim.matches is supply.matches and cached(with_claim, cls, (H100,))
    with_slice = with_claim.with_object(slice_obj("n1", 1))
    assert not cached(with_slice, cls, (H100,))
    # The warm-up works out what the previous supply was asked, on the new one.
    assert warm(with_slice, previous=with_claim) == 2  # the class alone, and H100
    assert len(match(with_slice, cls, (H100,)).devices) == 3


def test_a_device_class_with_opaque_config_matches() -> None:
    """The match is keyed by the class's name and selectors: its config holds dicts."""
    config = [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {"sharing": {}}}}]
    supply = DraSupply().with_object(device_class(config=config))
    supply = supply.with_object(slice_obj("n0", 1))
    assert len(match(supply, supply.classes["gpu.nvidia.com"], ()).devices) == 1


def test_the_watches_warm_classes_and_claims_before_requests_see_them() -> None:
    state = State.start(Settings(str(ROOT / "policies")))
    state.set_dra("DeviceClass", of_kind("DeviceClass"))
    state.set_dra("ResourceSlice", of_kind("ResourceSlice"))
    dra = state.inventory.dra
    assert all(cached(dra, c, ()) for c in dra.classes.values())
    state.update_dra("ResourceClaim", {"ml/a": claim("a", H100)})
    dra = state.inventory.dra
    assert cached(dra, dra.classes["gpu.nvidia.com"], (H100,))


def get(app: Any, path: str) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.get(path)

    return asyncio.run(go())


def test_readiness_waits_for_device_classes_and_slices_too() -> None:
    state = State.start(Settings(str(ROOT / "policies")))
    state.dra_pending = {"DeviceClass", "ResourceSlice"}  # as serve's live watches set it
    app = create_app(state, decision_log=DecisionLog(io.BytesIO()))
    state.set_nodes([])
    ready = get(app, "/readyz")
    assert ready.status_code == 503
    assert ready.json()["inventoryDraPending"] == ["DeviceClass", "ResourceSlice"]
    state.set_dra("DeviceClass", [])  # a 404 (no resource.k8s.io) delivers an empty list
    assert get(app, "/readyz").status_code == 503
    state.set_dra("ResourceSlice", [])
    ready = get(app, "/readyz")
    assert ready.status_code == 200 and ready.json()["inventoryDraPending"] == []


def test_a_claim_with_new_selectors_is_judged_off_the_event_loop(tmp_path: Path) -> None:
    """Sent first, the claim still answers after a /healthz sent while it is judged:
    its first evaluation (thousands of devices) ran on a thread, not on the loop."""
    items = [device_class()] + [slice_obj(f"n{i}", 8) for i in range(500)]
    (tmp_path / "inventory.json").write_bytes(orjson.dumps({"kind": "List", "items": items}))
    state = State.start(Settings(str(ROOT / "policies"), str(tmp_path / "inventory.json")))
    app = create_app(state, decision_log=DecisionLog(io.BytesIO()))
    body = review(
        claim("new", H100 + " && device.attributes['gpu.nvidia.com'].?index.orValue(0) == 0")
    )
    body["request"]["kind"] = {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"}
    done: list[str] = []

    async def go() -> dict[str, Any]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:

            async def judged() -> httpx.Response:
                r = await client.post("/validate", content=orjson.dumps(body))
                done.append("claim")
                return r

            async def health() -> None:
                await asyncio.sleep(0.005)  # the claim's evaluation has begun
                await client.get("/healthz")
                done.append("healthz")

            resp, _ = await asyncio.gather(judged(), health())
            return dict(resp.json()["response"])

    out = asyncio.run(go())
    assert out["allowed"] is True and done == ["healthz", "claim"]
    dra = state.inventory.dra
    assert cached(
        dra,
        dra.classes["gpu.nvidia.com"],
        tuple(
            s["cel"]["expression"]
            for s in body["request"]["object"]["spec"]["devices"]["requests"][0]["exactly"][
                "selectors"
            ]
        ),
    )
