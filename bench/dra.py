"""DRA claim evaluation against 1,000 and 10,000 published devices: first and cached,
the cost of one ResourceSlice watch event on the watch thread (the new supply, then the
warm-up that works out the matches requests will ask for before it is swapped in), the
evaluation a request then pays on the event loop, and what a new ResourceClaim costs
(it keeps the device matches).

    .venv/bin/python bench/dra.py
"""

from __future__ import annotations

import time

from webhook.core.dra.match import cached, match, warm
from webhook.core.dra.model import DraSupply
from webhook.core.supply.inventory import Inventory

SELECTOR = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"
CLASS = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"


def slice_obj(node: int, generation: int = 1) -> dict[str, object]:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "type": {"string": "gpu"},
                "productName": {"string": "NVIDIA H100 80GB HBM3"},
                "driverVersion": {"version": "570.124.6"},
                "index": {"int": i},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(8)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"node-{node}-gpu"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": f"node-{node}",
            "pool": {"name": f"node-{node}", "generation": generation},
            "devices": devices,
        },
    }


def run(devices: int) -> None:
    supply = DraSupply().with_object(
        {
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": CLASS}}]},
        }
    )
    for n in range(devices // 8):
        supply = supply.with_object(slice_obj(n))
    inventory = Inventory.from_nodes([]).with_dra(supply)
    device_class = supply.classes["gpu.nvidia.com"]
    selectors = (SELECTOR + f" && {devices} > 0",)  # a selector no earlier run cached
    t = time.perf_counter()
    first = match(inventory.dra, device_class, selectors)
    first_ms = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    for _ in range(1000):
        match(inventory.dra, device_class, selectors)
    cached_us = (time.perf_counter() - t) * 1e3
    changed = slice_obj(0, generation=2)
    changed["spec"]["devices"][0]["attributes"]["index"] = {"int": 99}  # type: ignore[index]
    t = time.perf_counter()
    new_supply = supply.with_object(changed)
    event_us = (time.perf_counter() - t) * 1e6
    t = time.perf_counter()
    warmed = warm(new_supply, previous=supply)
    warm_ms = (time.perf_counter() - t) * 1e3
    after = inventory.with_dra(new_supply)
    t = time.perf_counter()
    match(after.dra, device_class, selectors)
    next_us = (time.perf_counter() - t) * 1e6
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "new", "namespace": "ml"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }
    with_claim = new_supply.with_object(claim)
    assert cached(with_claim, device_class, selectors), "a claim must keep the matches"
    print(
        f"{devices:>6} devices: first {first_ms:8.1f} ms ({len(first.devices)} match), "
        f"cached {cached_us:6.2f} us; slice event {event_us:7.1f} us + warm-up of "
        f"{warmed} pairs {warm_ms:6.2f} ms (watch thread), then the request's "
        f"evaluation {next_us:6.2f} us; a new claim keeps the matches"
    )


if __name__ == "__main__":
    for n in (1_000, 10_000):
        run(n)
