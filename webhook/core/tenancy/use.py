"""A Pod's GPU use: the devices it is given, and the memory of each.

Devices are what a device plugin allocates: each `nvidia.com/gpu`, each MIG slice, each
time-sliced or MPS replica is one, at Kubernetes' effective request (init containers
run before the others: webhook.core.workloads.requests). A GPU share (KAI, HAMi,
Volcano: webhook.core.access.shares) is one device for each GPU it is spread over
(KAI's gpu-fraction-num-devices, HAMi's nvidia.com/gpu beside gpumem).

Memory per device, at most what the Pod can be given where it can land:
- a MIG slice: the node's `nvidia.com/mig-<profile>.memory` label, else the MIG catalog
  (webhook.core.supply.mig_catalog); without an inventory, the catalog's smallest value
  of the profile (the slice has at least that);
- a whole GPU: the largest of its candidate nodes' offers (`nvidia.com/gpu.memory`,
  cloud and catalog facts: webhook.core.supply.nodes); an MPS replica gets its 1/replicas
  (the MPS control daemon caps each client's memory), a time-sliced replica the whole
  device, which nothing caps (NVIDIA device plugin docs: time-slicing gives no memory
  isolation); without an inventory, the product a nodeSelector pins, from the GPU table
  of webhook.core.supply.cloud_offers;
- a share: the MiB it asks for, else its fraction of the device's memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction
from typing import NamedTuple

from webhook.core.access.gpuresources import GpuResources, gpu_requests
from webhook.core.access.shares import Share, asks, gpu_shares
from webhook.core.kit.paths import Path
from webhook.core.kit.text import listing
from webhook.core.supply import mig_catalog
from webhook.core.supply.cloud_offers import GKE_ACCELERATORS, GPUS
from webhook.core.supply.inventory import Inventory, Offer
from webhook.core.supply.scheduling import candidates, node_listing
from webhook.core.workloads.pods import PodView, ResourceAmount

_KAI_DEVICES = "gpu-fraction-num-devices"


class Use(NamedTuple):
    """One line of a Pod's GPU use: a resource it requests, or a share."""

    what: str  # 'container "train" asks 2 nvidia.com/mig-3g.40gb'
    resource: str  # what the nodes it lands on advertise
    devices: int
    path: Path
    share: Share | None = None


def pod_use(pod: PodView, *, gpus: GpuResources) -> tuple[Use, ...]:
    """The Pod's GPU use, memoised per pod view and GPU selection."""
    key = ("tenancy-use", gpus)
    found: tuple[Use, ...] | None = pod.memo.get(key)
    if found is None:
        found = pod.memo[key] = _uses(pod, gpus)
    return found


def devices(uses: Iterable[Use]) -> int:
    return sum(u.devices for u in uses)


def _uses(pod: PodView, gpus: GpuResources) -> tuple[Use, ...]:
    shares = gpu_shares(pod)
    by_share = {(id(s.container), s.resource): s for s in shares}
    grouped: dict[str, list[ResourceAmount]] = {}
    for a in gpu_requests(pod, gpus=gpus):
        if a.container.field != "ephemeralContainers":  # they are given no device
            grouped.setdefault(a.resource, []).append(a)
    out: list[Use] = []
    backed: set[int] = set()
    effective = pod.effective_requests if grouped else {}
    for resource, amounts in grouped.items():
        count = math.ceil(effective.get(resource, 0))
        if count <= 0:
            continue
        share = next((by_share.get((id(a.container), resource)) for a in amounts), None)
        if share is not None:
            backed.add(id(share))
            out.append(Use(_share_text(share, count), resource, count, share.path, share))
        else:
            out.append(Use(_text(amounts, resource, count), resource, count, amounts[0].path))
    for share in shares:
        if id(share) not in backed:
            n = _share_devices(pod, share)
            out.append(Use(_share_text(share, n), share.resource, n, share.path, share))
    return tuple(out)


def _text(amounts: list[ResourceAmount], resource: str, count: int) -> str:
    parts = [f"{a.container.label} asks {a.amount}" for a in amounts]
    text = " and ".join(parts) + f" {resource}"
    if count != sum(a.amount or 0 for a in amounts):  # an init step larger than the rest
        text += f", {count} as Kubernetes counts the Pod (init containers run first)"
    return text


def _share_text(share: Share, count: int) -> str:
    return asks(share) + (f" on {count} devices" if count > 1 else "")


def _share_devices(pod: PodView, share: Share) -> int:
    if share.mechanism == "KAI scheduler":
        raw = pod.annotations.get(_KAI_DEVICES, "")
        return int(raw) if raw.isdigit() and 0 < len(raw) < 4 and int(raw) > 0 else 1
    for a in pod.amounts:
        mine = a.container is share.container and a.resource == share.resource
        if mine and a.amount is not None and a.amount > 0:
            return math.ceil(a.amount)
    return 1


# -- memory per device ------------------------------------------------------------------


class Memory(NamedTuple):
    """The most memory one device of a Use can have where the Pod can land."""

    mib: Fraction | None  # None: not known
    source: str  # where the figure comes from, or why it is not known
    nodes: int = 0  # the candidate nodes that offer that much (node-id bits)
    unknown: int = 0  # candidate nodes whose memory is not known


def device_memory(
    pod: PodView, use: Use, inventory: Inventory, *, pinned: frozenset[str] | None
) -> Memory | None:
    """Memory per device of `use`; None when no node can take it at all (resource-names
    reports that). `pinned`: the products a nodeSelector pins (used without inventory)."""
    share = use.share
    if share is not None and share.memory_mib is not None:
        return Memory(share.memory_mib, share.memory_field)
    if share is not None and share.problem:
        return Memory(None, share.problem)
    fraction = share.fraction if share is not None else None
    if inventory.known:
        return _offered(pod, use.resource, inventory, fraction)
    if fraction is not None:
        return Memory(None, "a fraction of a device whose memory is not known without an inventory")
    return _catalog(use.resource, pinned)


def _offered(
    pod: PodView, resource: str, inventory: Inventory, fraction: Fraction | None
) -> Memory | None:
    offers = candidates(pod, resource, inventory)
    if not offers:
        return None
    best: tuple[Fraction, Offer] | None = None
    best_bits = unknown = 0
    for offer, bits in offers.groups():
        mib = per_allocation(offer, fraction)
        if mib is None:
            unknown |= bits
        elif best is None or mib > best[0]:
            best, best_bits = (mib, offer), bits
        elif mib == best[0]:
            best_bits |= bits
    if best is None:
        return Memory(None, "no memory label and no catalog entry", 0, unknown)
    mib, offer = best
    source = f"{offer.memory_source} on node {node_listing(inventory, best_bits)}"
    if fraction is not None and fraction != 1:
        source = f"{fraction} of {offer.memory_mib} MiB, " + source
    if offer.sharing == "time-slicing" and offer.replicas > 1 and fraction is None:
        source += ", time-sliced: nothing caps a replica's memory"
    elif offer.sharing == "mps" and offer.replicas > 1 and fraction is None:
        source += f", an MPS replica's 1/{offer.replicas}"
    return Memory(mib, source, best_bits, unknown)


def per_allocation(offer: Offer, fraction: Fraction | None) -> Fraction | None:
    """What one device of the offer gives a Pod (a share: its fraction of it)."""
    if offer.memory_mib is None:
        return None
    if fraction is not None:
        return fraction * offer.memory_mib
    if offer.sharing == "mps" and offer.replicas > 1:
        return Fraction(offer.memory_mib, offer.replicas)
    return Fraction(offer.memory_mib)


_BY_PRODUCT = {gpu.product: gpu for gpu in GPUS.values()}


def _catalog(resource: str, pinned: frozenset[str] | None) -> Memory:
    profile = mig_catalog.profile_for_resource(resource)
    if profile is not None:
        product = next(iter(pinned)) if pinned is not None and len(pinned) == 1 else None
        found = mig_catalog.profile_memory(profile, product=product)
        if found is not None:
            return Memory(Fraction(found.mib), f"{found.describe()}; no inventory given")
        return Memory(None, f"MIG profile {profile} is not in the catalog")
    if not pinned:
        return Memory(None, "no inventory given, and the Pod pins no GPU product")
    gpus = {p: _BY_PRODUCT.get(p) or GPUS.get(GKE_ACCELERATORS.get(p, "")) for p in sorted(pinned)}
    missing = [p for p, g in gpus.items() if g is None]
    if missing:
        return Memory(
            None, f"no inventory given, and no GPU table has the memory of {listing(missing)}"
        )
    largest = max((g for g in gpus.values() if g is not None), key=lambda g: g.mib)
    return Memory(Fraction(largest.mib), f"{largest.source}; no inventory given")


def up(mib: Fraction | int) -> Fraction:
    """MiB rounded up to a thousandth of a GiB: what `gib` shows, so that the figures a
    message adds up agree with what it shows (`2 x 22.495Gi = 44.99Gi`)."""
    return Fraction(math.ceil(Fraction(mib) * 1000 / 1024) * 1024, 1000)


def gib(mib: Fraction | int) -> str:
    """`39.5Gi`: MiB as GiB with at most three decimals, rounded up (a use is never shown
    smaller than it is; MIG slices and catalog values are whole eighths of a GiB)."""
    thousandths = math.ceil(Fraction(mib) * 1000 / 1024)
    whole, rest = divmod(thousandths, 1000)
    return f"{whole}Gi" if not rest else f"{whole}.{rest:03d}".rstrip("0") + "Gi"
