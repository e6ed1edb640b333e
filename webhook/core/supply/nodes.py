"""The cluster's Nodes as the checks see them: labels, taints, and GPU offers.

Built from Node objects (allocatable plus NVIDIA GPU Feature Discovery labels; where
those are absent, the cluster profile's cloud labels and vGPU registers: cloud_offers).
Only what a check reads is kept: labels less the volatile ones (VOLATILE_LABELS),
taints, extended resources with a count, and the two vGPU register annotations, so two
Node objects that differ only in a heartbeat, a condition, a resourceVersion or
managedFields parse to equal Nodes.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any, Literal

from webhook.core.kit.dicts import as_dict, as_list, str_map
from webhook.core.kit.quantity import parse_quantity
from webhook.core.kit.text import shown
from webhook.core.supply import mig_catalog
from webhook.core.supply.cloud_offers import (
    DEFAULT_READ,
    KEPT_ANNOTATIONS,
    MAX_ANNOTATION,
    NO_FACTS,
    VOLCANO_VGPU,
    Adapter,
    node_facts,
)
from webhook.core.supply.vendor_offers import vendor_facts
from webhook.errors import InventoryError, QuantityError

# vgpu: a GPU split between tenants by a vGPU scheduler (HAMi, Volcano), each pod's
# share of memory and compute enforced in the container, not by the hardware.
SharingMode = Literal["exclusive", "mig", "time-slicing", "mps", "vgpu"]
SHARING_MODES: tuple[SharingMode, ...] = ("exclusive", "mig", "time-slicing", "mps", "vgpu")
_STRATEGY_MODES: dict[str, SharingMode] = {"time-slicing": "time-slicing", "mps": "mps"}

# Labels whose value changes without anything about the node changing, left out of the
# inventory so that their updates are no change at all (the inventory, its candidate
# memo and the server's evaluation cache stay). A nodeSelector may name any label, so
# only labels that are known to churn belong here:
# - nvidia.com/gfd.timestamp: GPU Feature Discovery writes time.Now().Unix() on every
#   labelling pass (NVIDIA/k8s-device-plugin internal/lm/timestamp.go; every
#   sleepInterval, 60 s by default). Selecting on it makes no sense: it names a moment.
VOLATILE_LABELS = frozenset({"nvidia.com/gfd.timestamp"})


NO_ANNOTATIONS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    allocatable: Mapping[str, int]  # extended resources only, count > 0
    # Only the vGPU registers (cloud_offers.KEPT_ANNOTATIONS), each bounded in length.
    annotations: Mapping[str, str] = field(default_factory=lambda: NO_ANNOTATIONS)


@dataclass(frozen=True, slots=True)
class Offer:
    """One node's offer of one resource: how many devices, how much memory each."""

    resource: str
    node: Node
    count: int
    sharing: SharingMode
    replicas: int
    memory_mib: int | None  # per physical device or MIG slice
    memory_source: str  # e.g. 'label nvidia.com/gpu.memory' or 'catalog value for A100 80GB'
    product: str

    @property
    def shape(self) -> tuple[SharingMode, int, int | None, str]:
        """What the checks read of an offer besides its count: offers of one shape are
        judged alike, so the inventory groups them."""
        return (self.sharing, self.replicas, self.memory_mib, self.memory_source)

    @property
    def share_mib(self) -> Fraction | None:
        """What one allocation can count on: a time-sliced or MPS replica gets 1/replicas."""
        if self.memory_mib is None:
            return None
        if self.sharing in ("time-slicing", "mps") and self.replicas > 1:
            return Fraction(self.memory_mib, self.replicas)
        return Fraction(self.memory_mib)


def parse_node(obj: Mapping[str, Any], *, index: int = 0) -> Node:
    if not isinstance(obj, Mapping) or obj.get("kind", "Node") != "Node":
        raise InventoryError(
            f"item {index} is not a Node (kind {_quoted(as_dict(obj).get('kind'))})"
        )
    meta = as_dict(obj.get("metadata"))
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise InventoryError(f"item {index}: a Node without metadata.name")
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect", "")))
        for t in as_list(as_dict(obj.get("spec")).get("taints"))
        if isinstance(t, Mapping)
    )
    allocatable: dict[str, int] = {}
    for resource, raw in as_dict(as_dict(obj.get("status")).get("allocatable")).items():
        if "/" not in str(resource):
            continue
        try:
            count = parse_quantity(raw)
        except QuantityError:
            raise InventoryError(
                f"node {shown(name)}: status.allocatable[{_quoted(resource)}] = "
                f"{_quoted(raw)} is not a quantity"
            ) from None
        if count >= 1:
            allocatable[str(resource)] = int(count)
    labels = _labels(meta.get("labels"))
    return Node(sys.intern(name), labels, taints, allocatable, _kept(meta.get("annotations")))


def _kept(raw: object) -> Mapping[str, str]:
    """The annotations an offer reads (HAMi's and Volcano's device registers), cut to
    MAX_ANNOTATION characters; every other annotation changes nothing a check reads."""
    if not isinstance(raw, Mapping):
        return NO_ANNOTATIONS
    found = {k: raw[k][:MAX_ANNOTATION] for k in KEPT_ANNOTATIONS if isinstance(raw.get(k), str)}
    return found or NO_ANNOTATIONS


def _labels(raw: object) -> dict[str, str]:
    # Interned: 50,000 nodes repeat a few hundred distinct keys and values, and a
    # string per occurrence would cost more than the rest of the inventory.
    labels = raw if type(raw) is dict else str_map(raw)
    intern = sys.intern
    out: dict[str, str] = {}
    for key, value in labels.items():
        if type(value) is not str:
            return _labels(str_map(labels))  # numbers and nulls as str_map words them
        out[intern(key) if type(key) is str else key] = intern(value)
    for key in VOLATILE_LABELS:
        out.pop(key, None)
    return out


def make_offer(
    node: Node, resource: str, count: int, *, read: frozenset[Adapter] = DEFAULT_READ
) -> Offer:
    """`read`: the node-fact adapters besides GFD's labels (ClusterProfile.node_facts)."""
    labels = node.labels
    product = labels.get("nvidia.com/gpu.product", "")
    profile = mig_catalog.profile_for_resource(resource)
    if profile is not None:
        return _mig_offer(node, resource, count, profile, product)
    if resource in ("nvidia.com/gpu", "nvidia.com/gpu.shared"):
        return _gpu_offer(node, resource, count, product, read)
    if resource == VOLCANO_VGPU:  # Volcano's vGPU device plugin: slots of split GPUs
        f = node_facts(node.labels, node.annotations, read=read)
        mib, source = (f.mib, f.memory_source) if f.mode == "vgpu" else (None, "no memory label")
        return Offer(resource, node, count, "vgpu", f.replicas, mib, source, product or f.product)
    vendor = vendor_facts(labels, resource, count)  # AMD, Intel: webhook.core.supply.vendor_offers
    if vendor is not None:
        return Offer(resource, node, count, *vendor)
    return Offer(resource, node, count, "exclusive", 1, None, "no memory label", product)


def _gpu_offer(
    node: Node, resource: str, count: int, product: str, read: frozenset[Adapter]
) -> Offer:
    labels = node.labels
    # Without GFD's product label (or with a vGPU register), the cloud's labels and the
    # vGPU schedulers' facts say what GFD would have (webhook.core.supply.cloud_offers).
    wanted = read and (node.annotations or not product)
    facts = node_facts(labels, node.annotations, read=read) if wanted else NO_FACTS
    product = product or facts.product
    replicas = _int_label(labels, "nvidia.com/gpu.replicas") or facts.replicas
    mode: SharingMode = _STRATEGY_MODES.get(
        labels.get("nvidia.com/gpu.sharing-strategy", ""), facts.mode or "exclusive"
    )
    if facts.mode == "vgpu":
        mode = "vgpu"
    if mode == "exclusive" and (
        resource.endswith(".shared") or replicas > 1 or product.endswith("-SHARED")
    ):
        mode = "time-slicing"
    # MIG single strategy: nvidia.com/gpu is a slice, named in the product suffix (GFD)
    # or in GKE's partition-size label.
    mig_single = labels.get("nvidia.com/mig.strategy") == "single" and "-MIG-" in product
    if mig_single and mode == "exclusive":
        mode = "mig"
    memory = _int_label(labels, "nvidia.com/gpu.memory")
    if memory is not None:
        return Offer(
            resource, node, count, mode, replicas, memory, "label nvidia.com/gpu.memory", product
        )
    profile = facts.mig_profile
    if mig_single:
        profile = product.split("-MIG-", 1)[1].removesuffix("-SHARED")
    if profile is not None:
        return _slice_offer(node, resource, count, mode, replicas, profile, product)
    return Offer(resource, node, count, mode, replicas, facts.mib, facts.memory_source, product)


def _slice_offer(
    node: Node,
    resource: str,
    count: int,
    mode: SharingMode,
    replicas: int,
    profile: str,
    product: str,
) -> Offer:
    found = mig_catalog.profile_memory(profile, product=product or None)
    if found is None:
        return Offer(resource, node, count, mode, replicas, None, "no memory label", product)
    return Offer(resource, node, count, mode, replicas, found.mib, found.describe(), product)


def _mig_offer(node: Node, resource: str, count: int, profile: str, product: str) -> Offer:
    labels = node.labels
    prefix = "nvidia.com/mig-" + profile.replace("+me", ".me") + "."
    replicas = _int_label(labels, prefix + "replicas") or 1
    mode: SharingMode = _STRATEGY_MODES.get(labels.get(prefix + "sharing-strategy", ""), "mig")
    if mode == "mig" and (resource.endswith(".shared") or replicas > 1):
        mode = "time-slicing"
    memory = _int_label(labels, prefix + "memory")
    if memory is not None:
        return Offer(
            resource, node, count, mode, replicas, memory, f"label {prefix}memory", product
        )
    found = mig_catalog.profile_memory(profile, product=product or None)
    if found is not None:
        return Offer(resource, node, count, mode, replicas, found.mib, found.describe(), product)
    return Offer(resource, node, count, mode, replicas, None, "no memory label", product)


def _int_label(labels: Mapping[str, str], key: str) -> int | None:
    value = labels.get(key)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _quoted(value: object) -> str:
    """A value as repr writes it, bounded: a 100 KB label must not make a 100 KB error."""
    return shown(repr(value[:80]) if isinstance(value, str) else value, 80)
