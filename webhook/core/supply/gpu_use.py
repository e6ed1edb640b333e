"""GPU use in GPU units: what a running Pod holds of its node's GPUs.

A bound Pod holds, of each GPU resource it requests, that many devices of its node's
offer: a whole GPU or a MIG slice with the memory the inventory knows of it, a
time-sliced or MPS replica a share of its GPU's memory (webhook.core.supply.nodes
Offer.share_mib). ResourceQuota counts devices; a budget in GPU memory needs these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.supply.inventory import Inventory
from webhook.core.workloads.podrequests import pod_requests


@dataclass(frozen=True, slots=True)
class GpuUse:
    gpus: int = 0  # devices held: GPUs, MIG slices, shares (each one)
    memory_mib: int = 0  # the GPU memory of the devices whose memory is known
    unknown: int = 0  # devices whose memory the inventory does not know

    def __add__(self, other: GpuUse) -> GpuUse:
        return GpuUse(
            self.gpus + other.gpus,
            self.memory_mib + other.memory_mib,
            self.unknown + other.unknown,
        )


NONE = GpuUse()


def pod_use(
    spec: Mapping[str, Any], *, inventory: Inventory, is_gpu: Callable[[str], bool]
) -> GpuUse | None:
    """What a Pod bound to a node holds of its GPUs; None for a Pod that holds none."""
    node = spec.get("nodeName")
    if not isinstance(node, str):
        return None  # not placed: it holds nothing yet
    asks = [(r, n) for r, n in pod_requests(spec).items() if n and is_gpu(r)]
    if not asks:
        return None
    index = inventory.index
    i = index.ids.get(node)
    use = NONE
    for resource, count in asks:
        offer = index.entries[i].offers.get(resource) if i is not None else None
        share = offer.share_mib if offer is not None else None
        if share is None:
            use += GpuUse(count, 0, count)
        else:
            use += GpuUse(count, int(share * count), 0)
    return use
