"""DRA claim evaluation against 1,000 and 10,000 published devices: first and cached,
and the cost of one ResourceSlice watch event (the next evaluation after it).

    .venv/bin/python bench/dra.py
"""

from __future__ import annotations

import time

from webhook.core.dra import DraSupply
from webhook.core.dramatch import match
from webhook.core.inventory import Inventory

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
    first = match(inventory, device_class, selectors)
    first_ms = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    for _ in range(1000):
        match(inventory, device_class, selectors)
    cached_us = (time.perf_counter() - t) * 1e3
    changed = slice_obj(0, generation=2)
    changed["spec"]["devices"][0]["attributes"]["index"] = {"int": 99}  # type: ignore[index]
    t = time.perf_counter()
    after = inventory.with_dra(supply.with_object(changed))
    event_us = (time.perf_counter() - t) * 1e6
    t = time.perf_counter()
    match(after, device_class, selectors)
    next_ms = (time.perf_counter() - t) * 1e3
    print(
        f"{devices:>6} devices: first {first_ms:8.1f} ms ({len(first.devices)} match), "
        f"cached {cached_us:6.2f} us, slice event {event_us:7.1f} us, "
        f"next evaluation {next_ms:6.2f} ms"
    )


if __name__ == "__main__":
    for n in (1_000, 10_000):
        run(n)
