"""gpu-slo-class: a pod's SLO class decides which GPU sharing modes it may land on.

Time-slicing shares a GPU's time and memory with no isolation: a latency-sensitive
service on it sees unbounded tail latency. Each class lists the modes it accepts. A GPU
share (KAI, HAMi, Volcano: webhook.core.access.shares) is a time-shared GPU wherever it lands.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from webhook.core.access.gpuresources import DEVICE_PLUGIN_GPUS
from webhook.core.access.model import GpuResources, Share, gpu_requests, gpu_resources, gpu_shares
from webhook.core.access.shares import SHARE_ANNOTATIONS, asks, mig_option, own_device
from webhook.core.engine.check import Check, CheckParams, Rule
from webhook.core.engine.context import Context
from webhook.core.engine.reads import Reads
from webhook.core.kit.paths import format_path
from webhook.core.kit.text import PLACEHOLDER, is_placeholder, listing, shown
from webhook.core.kit.violation import Violation
from webhook.core.supply import mig_catalog
from webhook.core.supply.inventory import SHARING_MODES, Inventory, Offer, SharingMode
from webhook.core.supply.scheduling import (
    candidates,
    node_listing,
    offered,
    pin_selector,
    placement_spec,
    untolerated_among,
)
from webhook.core.workloads.pods import PodView, ResourceAmount
from webhook.core.workloads.targets import TargetKind


@dataclass(frozen=True)
class Params(CheckParams):
    label: str = "gpu-admission.io/slo-class"
    classes: Mapping[str, tuple[SharingMode, ...]] = field(
        default_factory=lambda: {"latency-sensitive": ("exclusive", "mig"), "batch": SHARING_MODES}
    )
    gpu_resources: tuple[str, ...] = DEVICE_PLUGIN_GPUS

    @cached_property
    def gpus(self) -> GpuResources:
        return gpu_resources(include=self.gpu_resources)


# Why a mode is wrong for a class that rejects it, in the words a tenant needs.
_WHY = {
    "time-slicing": "time-sliced replicas share the GPU's time and memory with no "
    "isolation, so another tenant can stall this one or take its memory",
    "mps": "MPS clients split the GPU's memory but share its compute and fault domain, so "
    "another tenant's load or crash reaches this one",
    "mig": "a MIG slice is a fixed fraction of a GPU",
    "vgpu": "a vGPU scheduler (HAMi, Volcano) splits the GPU between tenants, who share its "
    "compute and fault domain with only software limits between them",
    "exclusive": "whole GPUs are reserved for other classes here",
}


def _modes(accepted: tuple[SharingMode, ...]) -> str:
    return " or ".join(accepted)


def _mode_text(offer: Offer) -> str:
    if offer.sharing in ("time-slicing", "mps"):
        return f"{offer.sharing} ({offer.replicas} replicas per device)"
    if offer.sharing == "vgpu":
        return f"vgpu ({offer.replicas} vGPUs per device)"
    return offer.sharing


def _fix(
    pod: PodView,
    accepted: tuple[SharingMode, ...],
    bad: Offer,
    bad_nodes: int,
    inventory: Inventory,
) -> str:
    # Nodes anywhere that offer the same resource in an accepted mode: the pod's own
    # constraints may be what keeps it off them, so they are not limited to candidates.
    good = 0
    for offer, nodes in offered(bad.resource, inventory).groups():
        if offer.sharing in accepted:
            good |= nodes
    pin = pin_selector(inventory, good=good, bad=bad_nodes)
    options = []
    if "mig" in accepted and bad.resource.startswith("nvidia.com/"):
        options.append("a MIG resource (nvidia.com/mig-<profile>)")
    if "exclusive" in accepted:
        options.append("exclusive GPUs")
    text = f"Request {' or '.join(options)}" if options else "Request another resource"
    if pin is not None:
        text += f", or pin the pod with nodeSelector {pin[0]}: {pin[1]}"
        # The pinned nodes may be tainted (dedicated GPU pools usually are): a pin
        # without the toleration would leave the pod Pending.
        pinned = good & inventory.index.label_bits(*pin)
        taints = untolerated_among(placement_spec(pod), inventory, pinned)
        if taints:
            text += f" and tolerate {listing(taints)}"
    return text + "."


class _Where:
    """`container "main" requests nvidia.com/gpu`, formatted only when a message is."""

    __slots__ = ("amount",)

    def __init__(self, amount: ResourceAmount) -> None:
        self.amount = amount

    def __str__(self) -> str:
        return f"{self.amount.container.label} requests {self.amount.resource}"


def _judge(
    pod: PodView,
    amount: ResourceAmount,
    slo: str,
    accepted: tuple[SharingMode, ...],
    inventory: Inventory,
    params: Params,
) -> Iterator[Violation]:
    where = _Where(amount)  # the text only for a message: most pods get none
    why = _WHY["time-slicing"]
    if inventory.known:
        offers = candidates(pod, amount.resource, inventory)
        bad_nodes = 0
        for offer, nodes in offers.groups():
            if offer.sharing not in accepted:
                bad_nodes |= nodes
        if bad_nodes:
            bad = offers.first(bad_nodes)
            listed = node_listing(inventory, bad_nodes)
            yield Violation(
                "sharing-mode-not-accepted",
                amount.path,
                f"the pod is {slo} ({params.label}), which accepts only {_modes(accepted)} GPUs, "
                f"but {where}, which is {_mode_text(bad)} on node {listed}, where it can land: "
                f"{_WHY.get(bad.sharing, why)}. {_fix(pod, accepted, bad, bad_nodes, inventory)}",
            )
        return
    # No inventory: only the name speaks. `.shared` is time-sliced or MPS by construction.
    if amount.resource.endswith(".shared") and not {"time-slicing", "mps"} <= set(accepted):
        yield Violation(
            "sharing-mode-not-accepted",
            amount.path,
            f"the pod is {slo} ({params.label}), which accepts only {_modes(accepted)} GPUs, but "
            f"{where}, a time-sliced or MPS resource by its name: {why}. "
            f"Request {amount.resource.removesuffix('.shared')} instead.",
        )
    elif mig_catalog.profile_for_resource(amount.resource) and "mig" not in accepted:
        yield Violation(
            "sharing-mode-not-accepted",
            amount.path,
            f"the pod is {slo} ({params.label}), which accepts only {_modes(accepted)} GPUs, but "
            f"{where}, a MIG slice. Request nvidia.com/gpu instead.",
        )


# Why a share is wrong for a class that accepts no time-shared GPU, by mechanism.
_HAMI_CORE = (
    "HAMi-core caps the share's memory but time-slices the GPU's compute between the "
    "pods on it, so another tenant's load stalls this one"
)
_SHARE_WHY = {
    "KAI scheduler": "KAI packs several pods onto one GPU and enforces neither a memory "
    "limit nor isolation between them, so another tenant can stall this one or take its "
    "memory",
    "HAMi": _HAMI_CORE,
    "Volcano vGPU": _HAMI_CORE,
    "Volcano GPU share": _WHY["time-slicing"],
}
_SHARED_AS = {"time-slicing": "a time-shared GPU", "mps": "an MPS-shared GPU", "mig": "a MIG slice"}


def _judge_share(
    share: Share, slo: str, accepted: tuple[SharingMode, ...], params: Params
) -> Violation | None:
    if share.mode in accepted:
        return None
    why = _WHY["mps"] if share.mode == "mps" else _SHARE_WHY[share.mechanism]
    if share.mode == "mig":
        why = _WHY["mig"]
    fixes = [own_device(share)] if "exclusive" in accepted else []
    mig = mig_option(share)
    if "mig" in accepted and share.mode != "mig":
        fixes.append(mig or "request a MIG resource (nvidia.com/mig-<profile>)")
    fix = ", or ".join(fixes) if fixes else "request another kind of GPU"
    return Violation(
        "sharing-mode-not-accepted",
        share.path,
        f"the pod is {slo} ({params.label}), which accepts only {_modes(accepted)} GPUs, "
        f"but {asks(share)}, {_SHARED_AS[share.mode]} wherever it lands: {why}. "
        f"{fix[0].upper()}{fix[1:]}.",
    )


def _add_label(pod: PodView, params: Params) -> str:
    if params.label in pod.object_labels:  # on the Deployment (Job, ...), not its pods
        where = format_path((*pod.metadata_path, "labels"))
        return (
            f"The label is on the object's own metadata.labels, which its pods do not "
            f"inherit: move them to {where}."
        )
    return f"Add the label to the pod (template) metadata with one of: {', '.join(params.classes)}."


def run(pod: PodView, *, context: Context, params: Params) -> Iterator[Violation]:
    inventory = context.inventory
    shares = gpu_shares(pod)
    # A share's own device request (HAMi's nvidia.com/gpu beside gpumem) is the share.
    covered = {(id(s.container), s.resource) for s in shares} if shares else None
    amounts: dict[str, ResourceAmount] = {}
    for a in gpu_requests(pod, gpus=params.gpus):  # counts above zero
        if not covered or (id(a.container), a.resource) not in covered:
            amounts.setdefault(a.resource, a)
    if not amounts and not shares:
        return
    slo = pod.labels.get(params.label)
    if slo is None:
        first = next(iter(amounts.values()), None)
        asked = f"{first.container.label} requests {first.resource}" if first else ""
        yield Violation(
            "missing-slo-class",
            first.path if first else shares[0].path,
            f"{asked or asks(shares[0])} but the pod has no "
            f"{params.label} label: it decides which GPU sharing modes the pod may use. "
            f"{_add_label(pod, params)}",
        )
        return
    accepted = params.classes.get(slo)
    if accepted is None:
        yield Violation(
            "unknown-slo-class",
            (*pod.metadata_path, "labels", params.label),
            f'label {params.label}="{shown(slo)}" is {PLACEHOLDER}.'
            if is_placeholder(slo)
            else f'label {params.label}="{shown(slo)}" is not a configured SLO class; use '
            f"one of: {', '.join(params.classes)}.",
        )
        return
    for share in shares:
        found = _judge_share(share, slo, accepted, params)
        if found is not None:
            yield found
    for amount in amounts.values():
        yield from _judge(pod, amount, slo, accepted, inventory, params)


def judges(params: Params) -> Mapping[TargetKind, Reads]:
    """GPU requests and shares (KAI's by annotation), against the sharing of their devices."""
    return {"pod": Reads(extended_resources=True, annotations=SHARE_ANNOTATIONS)}


CHECK = Check(
    name="slo-class",
    params=Params,
    run=run,
    judges=judges,
    rules={
        "missing-slo-class": Rule("A GPU pod without the SLO-class label."),
        "unknown-slo-class": Rule("An SLO-class label with a class that is not configured."),
        "sharing-mode-not-accepted": Rule(
            "The pod can land on a GPU whose sharing mode its SLO class does not accept.",
            uses_inventory=True,
        ),
    },
)
