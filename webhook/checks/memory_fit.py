"""gpu-memory-fit: the declared peak GPU memory fits every device the pod can land on.

The `Ngb` in a MIG profile name is nominal (`1g.10gb` exposes 9856 MiB on an A100), so
the peak is compared MiB to MiB with what nodes advertise (GFD labels), else with the
MIG catalog, never with the name. A time-sliced or MPS replica counts on 1/replicas. A
GPU share (KAI, HAMi, Volcano: webhook.core.access.shares) counts on what it asks for: its MiB,
or its fraction of the memory of the devices where it can land.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Literal

from webhook.core.access.gpuresources import DEVICE_PLUGIN_GPUS
from webhook.core.access.model import GpuResources, Share, gpu_requests, gpu_resources, gpu_shares
from webhook.core.access.shares import SHARE_ANNOTATIONS, asks, memory_request
from webhook.core.engine.check import Check, CheckParams, Rule
from webhook.core.engine.context import Context
from webhook.core.engine.reads import Reads
from webhook.core.kit.paths import format_path
from webhook.core.kit.quantity import format_mib, to_mib
from webhook.core.kit.text import PLACEHOLDER, is_placeholder, matches_any, shown
from webhook.core.kit.violation import Violation
from webhook.core.supply import mig_catalog
from webhook.core.supply.inventory import Inventory, Offer
from webhook.core.supply.scheduling import (
    Candidates,
    candidates,
    node_listing,
    offered,
    pin_selector,
)
from webhook.core.workloads.pods import PodView, ResourceAmount
from webhook.core.workloads.targets import TargetKind
from webhook.errors import QuantityError

EXAMPLE = "12Gi"


@dataclass(frozen=True)
class Params(CheckParams):
    label: str = "gpu-admission.io/peak-memory"
    require: Literal["all", "any"] = "all"
    gpu_resources: tuple[str, ...] = DEVICE_PLUGIN_GPUS

    @cached_property
    def gpus(self) -> GpuResources:
        return gpu_resources(include=self.gpu_resources)


def _gpu_amounts(
    pod: PodView, params: Params, shares: tuple[Share, ...]
) -> dict[str, ResourceAmount]:
    """The first request (count above zero) of each GPU resource the pod asks for, less
    those a share of the same container stands for (HAMi's nvidia.com/gpu by gpumem)."""
    covered = {(id(s.container), s.resource) for s in shares} if shares else None
    first: dict[str, ResourceAmount] = {}
    for a in gpu_requests(pod, gpus=params.gpus):
        if not covered or (id(a.container), a.resource) not in covered:
            first.setdefault(a.resource, a)
    return first


def _add_label(pod: PodView, label: str) -> str:
    if label in pod.object_labels:  # on the Deployment (Job, ...) itself, not its pods
        where = format_path((*pod.metadata_path, "labels"))
        return (
            f"The label is on the object's own metadata.labels, which its pods do not "
            f"inherit: move them to {where}."
        )
    return f"Add the label to the pod (template) metadata, e.g. {label}: {EXAMPLE}."


def _peak(pod: PodView, params: Params, first: ResourceAmount | Share) -> Fraction | Violation:
    label_path = (*pod.metadata_path, "labels", params.label)
    raw = pod.labels.get(params.label)
    if raw is None:
        if isinstance(first, Share):
            what = asks(first)
        else:
            what = f"{first.container.label} requests {first.resource}"
        return Violation(
            "missing-peak-memory",
            first.path,
            f"{what} but the pod has no "
            f"{params.label} label: without the peak GPU memory per device nothing can tell "
            f"whether the model fits the device. {_add_label(pod, params.label)}",
        )
    if is_placeholder(raw):
        return Violation(
            "invalid-peak-memory",
            label_path,
            f'label {params.label}="{shown(raw)}" is {PLACEHOLDER}.',
        )
    try:
        mib: Fraction | None = to_mib(raw)
    except QuantityError:
        mib = None
    if mib is None or mib <= 0:
        what = "a Kubernetes memory quantity" if mib is None else "a positive amount of memory"
        return Violation(
            "invalid-peak-memory",
            label_path,
            f'label {params.label}="{shown(raw)}" is not {what}: write the '
            f"peak GPU memory per device with a unit, e.g. {EXAMPLE}, 11G or 12000Mi.",
        )
    if raw.strip().isdigit():
        # A bare number is bytes to Kubernetes; nobody's model peaks at 12 bytes.
        return Violation(
            "invalid-peak-memory",
            label_path,
            f'label {params.label}="{shown(raw)}" has no unit, so it means {shown(raw)} bytes: '
            f"write the peak GPU memory per device with a unit, e.g. {shown(raw)}Gi or "
            f"{shown(raw)}G.",
        )
    return mib


def _fits(offer: Offer, peak: Fraction) -> bool | None:
    """peak <= memory / replicas, in integers: Fraction comparisons cost a microsecond."""
    memory = offer.memory_mib
    if memory is None:
        return None
    shared = offer.sharing in ("time-slicing", "mps") and offer.replicas > 1
    replicas = offer.replicas if shared else 1
    return peak.numerator * replicas <= memory * peak.denominator


def _offer_text(offer: Offer) -> str:
    share = offer.share_mib
    assert share is not None and offer.memory_mib is not None
    if offer.sharing in ("time-slicing", "mps") and offer.replicas > 1:
        return (
            f"{int(share)} MiB per replica ({offer.memory_mib} MiB shared by "
            f"{offer.replicas} {offer.sharing} replicas, {offer.memory_source})"
        )
    return f"{offer.memory_mib} MiB ({offer.memory_source})"


class _Verdicts:
    """The candidates of one resource split by whether the peak fits: per offer shape,
    so the cost is the number of shapes, not of nodes."""

    def __init__(self, offers: Candidates, peak: Fraction) -> None:
        self.fit = self.miss = self.unknown = 0
        self.worst: Offer | None = None  # the first miss of the smallest share
        self.unknown_offer: Offer | None = None  # the first offer of unknown memory
        worst_bits, worst_share = 0, None
        for offer, bits in offers.groups():
            verdict = _fits(offer, peak)
            if verdict is None:
                self.unknown |= bits
                self.unknown_offer = self.unknown_offer or offer
            elif verdict:
                self.fit |= bits
            else:
                self.miss |= bits
                share = offer.share_mib or 0
                if worst_share is None or share < worst_share:
                    worst_bits, worst_share = bits, share
                elif share == worst_share:
                    worst_bits |= bits
        if worst_bits:
            self.worst = offers.first(worst_bits)


def _suggestion(
    inventory: Inventory, peak: Fraction, verdicts: _Verdicts, params: Params, resource: str
) -> str:
    good, bad = verdicts.fit, verdicts.miss | verdicts.unknown
    pin = pin_selector(inventory, good=good, bad=bad) if good else None
    if pin is not None:
        return f"Pin the pod to nodes where it fits with nodeSelector {pin[0]}: {pin[1]}."
    best: tuple[Fraction, str] | None = None
    vendor = resource.partition("/")[0] + "/"  # a ROCm image does not run on NVIDIA GPUs
    for name in inventory.offers:
        if not name.startswith(vendor) or not matches_any(name, params.gpu_resources):
            continue
        shares = [o.share_mib for o, _ in offered(name, inventory).groups() if _fits(o, peak)]
        if shares:
            smallest = min(s for s in shares if s is not None)
            best = min(best, (smallest, name)) if best else (smallest, name)
    if best is None:
        return "No GPU resource in the cluster has that much memory per device: reduce the peak."
    return f"Request {best[1]} ({int(best[0])} MiB per device) instead."


class _Needs:
    """`needs 12 GiB (12288 MiB) per device (label=12Gi)`, formatted only for a message."""

    def __init__(self, peak: Fraction, label: str, declared: str) -> None:
        self.peak, self.label, self.declared = peak, label, declared

    def __str__(self) -> str:
        return f"needs {format_mib(self.peak)} per device ({self.label}={shown(self.declared)})"


def _judge(
    pod: PodView, amount: ResourceAmount, peak: Fraction, inventory: Inventory, params: Params
) -> Iterator[Violation]:
    resource = amount.resource
    offers = candidates(pod, resource, inventory) if inventory.known else None
    needs = _Needs(peak, params.label, pod.labels[params.label])
    if not offers:
        # With an inventory, no offer means no node can take the pod: resource-names
        # reports that. The catalog speaks only when there is no inventory at all.
        if not inventory.known:
            yield from _judge_by_catalog(pod, amount, peak, needs)
        return
    verdicts = _Verdicts(offers, peak)
    if params.require == "any" and verdicts.fit:
        return
    if verdicts.worst is not None and (params.require == "all" or not verdicts.unknown):
        nodes = node_listing(inventory, verdicts.miss)
        yield Violation(
            "exceeds-device-memory",
            amount.path,
            f"the pod {needs}, but {resource} offers {_offer_text(verdicts.worst)} on node "
            f"{nodes}, where the scheduler may place it: the workload would run out of GPU "
            f"memory. {_suggestion(inventory, peak, verdicts, params, resource)}",
        )
    elif verdicts.unknown:
        nodes = node_listing(inventory, verdicts.unknown)
        yield Violation(
            "unknown-device-memory",
            amount.path,
            f"the pod {needs}, but the memory of {resource} on node {nodes} is unknown "
            f"({_no_memory(verdicts.unknown_offer, resource)}), so the fit cannot be proven. "
            f"Label the nodes with {_MEMORY_LABELS.get(vendor_of(resource), _GFD)}, or pin "
            f"the pod to nodes whose memory is known.",
        )


_GFD = "nvidia.com/gpu.memory (GPU Feature Discovery does)"
_MEMORY_LABELS = {
    "amd.com": "amd.com/gpu.vram (the AMD GPU node labeller does)",
    "gpu.intel.com": "gpu.intel.com/memory.max (the Intel GPU plugin's labeller does, with NFD)",
}


def vendor_of(resource: str) -> str:
    return resource.partition("/")[0]


def _no_memory(offer: Offer | None, resource: str) -> str:
    # An offer says why it has no memory when it knows (a partitioned AMD GPU).
    if offer is not None and offer.memory_source != "no memory label":
        return offer.memory_source
    if vendor_of(resource) != "nvidia.com":
        return "no memory label"
    return "no GFD memory label and no catalog entry"


def _judge_by_catalog(
    pod: PodView, amount: ResourceAmount, peak: Fraction, needs: _Needs
) -> Iterator[Violation]:
    # No inventory (a PR check without --inventory): MIG names still say enough.
    profile = mig_catalog.profile_for_resource(amount.resource)
    found = mig_catalog.profile_memory(profile) if profile else None
    if found is not None and peak > found.mib:
        yield Violation(
            "exceeds-device-memory",
            amount.path,
            f"the pod {needs}, but {amount.resource} offers {found.mib} MiB ({found.describe()}; "
            f"no inventory given): the workload would run out of GPU memory. Request a larger "
            f"MIG profile, or pass --inventory to compare with the real nodes.",
        )


def run(pod: PodView, *, context: Context, params: Params) -> Iterator[Violation]:
    inventory = context.inventory
    shares = gpu_shares(pod)
    amounts = _gpu_amounts(pod, params, shares)
    if not amounts and not shares:
        return
    first = next(iter(amounts.values()), None)
    peak = _peak(pod, params, first if first is not None else shares[0])
    if isinstance(peak, Violation):
        yield peak
        return
    for share in shares:
        yield from _judge_share(pod, share, peak, inventory, params)
    for amount in amounts.values():
        yield from _judge(pod, amount, peak, inventory, params)


# What running over a share's memory does, by mechanism.
_OVER = {
    "KAI scheduler": "KAI enforces no limit, so the workload would take memory promised to "
    "the pods it shares the GPU with, or run out of it",
    "HAMi": "HAMi-core stops the workload at that limit, so it would run out of GPU memory",
    "Volcano vGPU": "HAMi-core stops the workload at that limit, so it would run out of GPU memory",
    "Volcano GPU share": "the workload would take memory promised to the pods it shares the "
    "GPU with, or run out of it",
}


def _judge_share(
    pod: PodView, share: Share, peak: Fraction, inventory: Inventory, params: Params
) -> Iterator[Violation]:
    needs = _Needs(peak, params.label, pod.labels[params.label])
    mib = math.ceil(peak)
    ask = f"Ask for at least {format_mib(peak)} per device ({memory_request(share, mib)})"
    if share.problem:
        yield Violation(
            "unknown-device-memory",
            share.path,
            f"the pod {needs}, but {share.problem}, so the fit cannot be proven. {ask}.",
        )
    elif share.memory_mib is not None:
        if peak > share.memory_mib:
            yield Violation(
                "exceeds-device-memory",
                share.path,
                f"the pod {needs}, but {asks(share)}, which gives it "
                f"{format_mib(share.memory_mib)} per device: {_OVER[share.mechanism]}. {ask}.",
            )
    elif share.fraction is not None and inventory.known:
        yield from _judge_fraction(pod, share, peak, needs, inventory, ask)
    elif share.fraction is not None and share.fraction < 1:
        yield Violation(
            "unknown-device-memory",
            share.path,
            f"the pod {needs}, and {asks(share)}: a fraction of a device whose memory is not "
            f"known without an inventory, so the fit cannot be proven. {ask}, or pass "
            f"--inventory to compare with the real nodes.",
        )


def _judge_fraction(
    pod: PodView, share: Share, peak: Fraction, needs: _Needs, inventory: Inventory, ask: str
) -> Iterator[Violation]:
    fraction = share.fraction
    assert fraction is not None
    offers = candidates(pod, share.resource, inventory)
    miss = unknown = 0
    worst: tuple[Fraction, Offer] | None = None
    for offer, bits in offers.groups():
        if offer.memory_mib is None:
            unknown |= bits
            continue
        got = fraction * offer.memory_mib
        if peak > got:
            miss |= bits
            worst = min(worst, (got, offer), key=lambda w: w[0]) if worst else (got, offer)
    if worst is not None:
        got, offer = worst
        yield Violation(
            "exceeds-device-memory",
            share.path,
            f"the pod {needs}, but {asks(share)}, which is {format_mib(got)} of the "
            f"{offer.memory_mib} MiB of {share.resource} ({offer.memory_source}) on node "
            f"{node_listing(inventory, miss)}, where the scheduler may place it: "
            f"{_OVER[share.mechanism]}. {ask}.",
        )
    elif unknown:
        yield Violation(
            "unknown-device-memory",
            share.path,
            f"the pod {needs}, and {asks(share)}, but the memory of {share.resource} on node "
            f"{node_listing(inventory, unknown)} is unknown (no memory label and no catalog "
            f"entry), so the fit cannot be proven. {ask}, or label the nodes with their memory.",
        )


def judges(params: Params) -> Mapping[TargetKind, Reads]:
    """GPU requests and shares (KAI's by annotation), against the devices they can land on."""
    return {"pod": Reads(extended_resources=True, annotations=SHARE_ANNOTATIONS)}


CHECK = Check(
    name="memory-fit",
    params=Params,
    run=run,
    judges=judges,
    rules={
        "missing-peak-memory": Rule("A GPU pod without the peak-memory label."),
        "invalid-peak-memory": Rule("A peak-memory label that is not a Kubernetes quantity."),
        "exceeds-device-memory": Rule(
            "The declared peak does not fit the memory of a device the pod can land on.",
            uses_inventory=True,
        ),
        "unknown-device-memory": Rule(
            "A device the pod can land on has no known memory size.", uses_inventory=True
        ),
    },
)
