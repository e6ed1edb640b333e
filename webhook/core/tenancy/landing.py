"""Where a Pod's GPU request can land: the products, sharing modes and MIG profiles of
the candidate nodes (webhook.core.supply.scheduling `candidates`: nodeSelector, required
node affinity and taints, as the scheduler filters).

A node's product is the value of one of its product labels (GFD's nvidia.com/gpu.product,
GKE's and Karpenter's GPU names), else what its offer says (cloud facts); GFD's
`-SHARED` suffix (a time-sliced GPU, renameByDefault: false) and `-MIG-<profile>` suffix
(MIG single strategy) are left out, so `NVIDIA-L4` names an L4 however it is shared.
Products are read per label value from the inventory's label index, not per node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from webhook.core.kit.idsets import as_bits, first, ids_of
from webhook.core.kit.text import listing, shown
from webhook.core.supply.inventory import Inventory, Offer, SharingMode
from webhook.core.supply.scheduling import (
    node_listing,
    offered,
    pin_selector,
    placement_spec,
    untolerated_among,
)
from webhook.core.tenancy.tenants import Tenant
from webhook.core.workloads.pods import PodView

# Node labels that name a GPU product: GPU feature discovery's (NVIDIA/k8s-device-plugin
# docs: nvidia.com/gpu.product), GKE's node pools (cloud.google.com/gke-accelerator),
# Karpenter's on EKS (karpenter.k8s.aws/instance-gpu-name).
PRODUCT_LABELS = (
    "nvidia.com/gpu.product",
    "cloud.google.com/gke-accelerator",
    "karpenter.k8s.aws/instance-gpu-name",
)
_GKE_PARTITION = "cloud.google.com/gke-gpu-partition-size"


def product_name(value: str) -> str:
    """A product label's value without GFD's sharing and MIG suffixes."""
    if "-MIG-" in value:
        value = value.split("-MIG-", 1)[0]
    return value.removesuffix("-SHARED")


class Split(NamedTuple):
    """Candidate nodes (bits) on a product that is not allowed, and of unknown product."""

    bad: int
    unknown: int
    products: tuple[tuple[str, int], ...]  # the bad nodes by product, in node order

    def text(self, inventory: Inventory) -> str:
        """`NVIDIA-H100-80GB-HBM3 on node h100-0, h100-1 and NVIDIA-L4 on node l4-0`."""
        parts = [f"{p} on node {node_listing(inventory, bits)}" for p, bits in self.products]
        shown_parts = parts[:3] + ([f"{len(parts) - 3} more products"] if len(parts) > 3 else [])
        return " and ".join(shown_parts) if len(shown_parts) <= 2 else "; ".join(shown_parts)


def products_split(
    bits: int,
    resource: str,
    inventory: Inventory,
    *,
    allowed: Callable[[str], bool],
    labels: tuple[str, ...] = PRODUCT_LABELS,
) -> Split:
    """The nodes of `bits` whose GPU is no allowed product, or of no known product."""
    index = inventory.index
    good = labelled = 0
    refused: dict[str, int] = {}
    for key in labels:
        ki = index.labels.get(key)
        if ki is None:
            continue
        labelled |= as_bits(ki.present)
        for value, nodes in ki.values.items():
            name = product_name(value)
            if allowed(name):
                good |= as_bits(nodes)
            elif as_bits(nodes) & bits:
                refused[name] = refused.get(name, 0) | as_bits(nodes)
    bad = bits & labelled & ~good
    unknown = 0
    for i in ids_of(bits & ~labelled):  # no product label: the cloud's facts, node by node
        product = product_name(index.offer(resource, i).product)
        if not product:
            unknown |= 1 << i
        elif not allowed(product):
            bad |= 1 << i
            refused[product] = refused.get(product, 0) | 1 << i
    groups = sorted(
        ((p, nodes & bad) for p, nodes in refused.items() if nodes & bad),
        key=lambda g: first(g[1]),
    )
    return Split(bad, unknown, tuple(groups))


def allowed_nodes(
    resource: str,
    inventory: Inventory,
    *,
    allowed: Callable[[str], bool],
    labels: tuple[str, ...] = PRODUCT_LABELS,
) -> int:
    """Every node (not only candidates) that offers `resource` on an allowed product."""
    every = offered(resource, inventory).bits
    split = products_split(every, resource, inventory, allowed=allowed, labels=labels)
    return every & ~split.bad & ~split.unknown


def fit_nodes(
    resource: str, inventory: Inventory, *, tenant: Tenant, labels: tuple[str, ...]
) -> int:
    """Every node (not only candidates) where `resource` passes all of the tenant's
    placement rules: product, sharing mode, trust, MIG profile of a single-strategy GPU.
    A fix that pins a Pod to them fixes every such finding at once."""
    good = 0
    for offer, bits in offered(resource, inventory).groups():
        profile = single_profile(offer)
        if tenant.accepts_mode(offer.sharing) and (
            profile is None or tenant.allows_profile(profile)
        ):
            good |= bits
    if tenant.products and good:
        good &= allowed_nodes(resource, inventory, allowed=tenant.allows_product, labels=labels)
    return good


def by_mode(
    groups: tuple[tuple[Offer, int], ...], rejects: Callable[[SharingMode], bool]
) -> list[tuple[Offer, int]]:
    """The candidate offers (first of each sharing mode, with its nodes) `rejects` takes."""
    found: dict[SharingMode, tuple[Offer, int]] = {}
    for offer, bits in groups:
        if rejects(offer.sharing):
            first_offer, seen = found.get(offer.sharing, (offer, 0))
            found[offer.sharing] = (first_offer, seen | bits)
    return list(found.values())


def mode_text(offer: Offer) -> str:
    if offer.sharing in ("time-slicing", "mps") and offer.replicas > 1:
        return f"{offer.sharing} ({offer.replicas} replicas per device)"
    if offer.sharing == "vgpu":
        return f"vgpu ({offer.replicas} vGPUs per device)"
    return offer.sharing


def modes_text(inventory: Inventory, bad: list[tuple[Offer, int]]) -> str:
    """`exclusive on node h100-0 and time-slicing (4 replicas per device) on node l4-0`."""
    parts = [f"{mode_text(o)} on node {node_listing(inventory, bits)}" for o, bits in bad]
    return " and ".join(parts) if len(parts) <= 2 else "; ".join(parts)


def single_profile(offer: Offer) -> str | None:
    """The MIG profile of an nvidia.com/gpu that is a MIG slice (MIG single strategy:
    GFD's product suffix, GKE's partition-size label)."""
    if offer.sharing != "mig" and "-MIG-" not in offer.product:
        return None
    if "-MIG-" in offer.product:
        return offer.product.split("-MIG-", 1)[1].removesuffix("-SHARED")
    return offer.node.labels.get(_GKE_PARTITION)


def pin_fix(pod: PodView, inventory: Inventory, *, good: int, bad: int) -> str | None:
    """`pin the pod with nodeSelector k: v (and tolerate t)`: a label the good nodes
    share and no bad node has; the pinned nodes' taints it does not tolerate too."""
    pin = pin_selector(inventory, good=good, bad=bad)
    if pin is None:
        return None
    text = f"pin the pod with nodeSelector {shown(pin[0], 80)}: {shown(pin[1])}"
    pinned = good & inventory.index.label_bits(*pin)
    taints = untolerated_among(placement_spec(pod), inventory, pinned)
    return text + (f" and tolerate {listing(taints)}" if taints else "")
