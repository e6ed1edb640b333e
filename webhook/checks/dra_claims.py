"""gpu-dra-claims: every DRA claim can be allocated from the devices the cluster publishes.

The apiserver rejects malformed claims (CEL that does not compile, a class name that is
no DNS subdomain), but not a class that does not exist, a selector no device matches, a
count no node has, or a device too small for the model: the Pod then sits Pending and
the scheduler says only "cannot allocate all claims". This check says which fact fails,
for a ResourceClaim, a ResourceClaimTemplate, or a pod that references them (resolved in
its namespace from the inventory, or from the same `check` input).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from webhook.core.dra.findings import joint, mixed, tainted, tolerations
from webhook.core.dra.joint import Ask
from webhook.core.dra.match import DeviceMatch, match, selector_hints
from webhook.core.dra.model import ClaimSpec, ExactRequest, parse_claim
from webhook.core.engine.check import Check, CheckParams, Rule
from webhook.core.engine.context import Context
from webhook.core.engine.reads import Reads
from webhook.core.kit.dicts import as_dict
from webhook.core.kit.paths import Path, format_path
from webhook.core.kit.quantity import format_mib, quantity_or_none
from webhook.core.kit.text import closest, listing, plural, shown
from webhook.core.kit.violation import Violation
from webhook.core.supply.inventory import Inventory
from webhook.core.workloads.pods import PodView
from webhook.core.workloads.targets import ClaimView, TargetKind

_MIB = 1024 * 1024


@dataclass(frozen=True)
class Params(CheckParams):
    peak_memory_label: str = "gpu-admission.io/peak-memory"
    slo_label: str = "gpu-admission.io/slo-class"
    # SLO classes that must not land on a device other claims share.
    exclusive_slo_classes: tuple[str, ...] = ("latency-sensitive",)
    # A referenced template or claim that is not in the inventory: Helm creates
    # templates after the Pods that use them, so a warning by default.
    missing_source: Literal["warn", "deny"] = "warn"


class _Declared:
    """What a claim is judged with: the declared peak and SLO class of the pod (or of
    the claim object's own labels), if any."""

    __slots__ = ("peak", "slo")

    def __init__(self, labels: Mapping[str, str], params: Params) -> None:
        raw = labels.get(params.peak_memory_label)
        self.peak = quantity_or_none(raw) if raw else None
        self.slo = labels.get(params.slo_label, "")


def run(target: PodView | ClaimView, *, context: Context, params: Params) -> Iterator[Violation]:
    if type(target) is ClaimView:
        yield from _claim_object(target, context, params)
        return
    assert type(target) is PodView
    items = target.spec.get("resourceClaims")
    if type(items) is not list or not items:
        return  # nearly every pod: one lookup
    yield from _pod_claims(target, items, context, params)


def _claim_object(target: ClaimView, context: Context, params: Params) -> Iterator[Violation]:
    inventory = context.inventory
    claim = parse_claim(target.obj, namespace=context.namespace)
    base: Path = (
        ("spec", "spec", "devices")
        if claim.kind == "ResourceClaimTemplate"
        else ("spec", "devices")
    )
    yield from tolerations(claim, base, f'{claim.kind} "{shown(claim.name)}"')
    if inventory.dra.known:
        asks: list[Ask] = []
        declared = _Declared(target.labels, params)
        yield from _claim(claim, inventory, declared, params, base, None, asks)
        yield from joint(inventory.dra, asks, base, f'{claim.kind} "{shown(claim.name)}"')


def _pod_claims(
    pod: PodView, items: list[Any], context: Context, params: Params
) -> Iterator[Violation]:
    inventory = context.inventory
    supply = inventory.dra
    namespace = context.namespace
    declared = _Declared(pod.labels, params)
    asks: list[Ask] = []
    for index, item in enumerate(items):
        item = as_dict(item)
        path = pod.where("resourceClaims", index)
        for field, kind in (
            ("resourceClaimTemplateName", "ResourceClaimTemplate"),
            ("resourceClaimName", "ResourceClaim"),
        ):
            name = item.get(field)
            if not isinstance(name, str):
                continue
            claim = supply.claims.get((kind, namespace, name))
            if claim is None:
                if supply.known or supply.claims:
                    yield _missing(kind, name, namespace, (*path, field), supply.claims, params)
                continue
            if supply.known:
                where = f'pod claim "{shown(item.get("name"))}" ({format_path(path)}): '
                yield from _claim(claim, inventory, declared, params, (*path, field), where, asks)
    yield from joint(inventory.dra, asks, pod.where("resourceClaims"), "the pod")


def _missing(
    kind: str,
    name: str,
    namespace: str,
    path: Path,
    claims: Mapping[tuple[str, str, str], ClaimSpec],
    params: Params,
) -> Violation:
    names = sorted(n for k, ns, n in claims if k == kind and ns == namespace)
    near = closest(name, names)
    hint = f" Did you mean {' or '.join(near)}?" if near else ""
    return Violation(
        "missing-claim-source",
        path,
        f'{kind} "{shown(name)}" ({format_path(path)}) does not exist in namespace {namespace}'
        f"{' (it has ' + listing(names) + ')' if names else ''}: the Pod stays Pending until "
        f"it does.{hint}",
        advisory=params.missing_source == "warn" and not near,
    )


def _claim(
    claim: ClaimSpec,
    inventory: Inventory,
    declared: _Declared,
    params: Params,
    base: Path,
    where: str | None,
    asks: list[Ask],
) -> Iterator[Violation]:
    label = where or ""
    label += f'{claim.kind} "{shown(claim.name)}"'
    shared_by_config = _shared_strategy(claim)
    for request in claim.requests:
        feasible: list[tuple[ExactRequest, DeviceMatch]] = []
        findings: list[Violation] = []
        for alt in request.alternatives:
            path = base if where is not None else (*base, *alt.path)
            found = list(_exact(alt, inventory, f'{label} request "{alt.name}"', path))
            if found:
                findings.extend(found)
                continue
            m = match(inventory.dra, inventory.dra.classes[alt.device_class], alt.selectors)
            feasible.append((alt, m))
            if not request.first_available:
                break
        if not feasible:
            # firstAvailable: only when every alternative fails does the claim fail.
            yield from findings if not request.first_available else findings[-1:]
            continue
        alt, m = feasible[0]
        path = base if where is not None else (*base, *alt.path)
        what = f'{label} request "{alt.name}"'
        ask = Ask(what, alt, m)
        if not request.first_available:  # the scheduler may take another alternative
            asks.append(ask)
        if alt.mode == "All":
            yield from mixed(ask, path)
        yield from _memory(alt, m, declared, what, path)
        if declared.slo in params.exclusive_slo_classes and (
            shared_by_config or any(d.shared for d in m.devices)
        ):
            why = (
                f"its config sets GPU sharing strategy {shared_by_config}"
                if shared_by_config
                else "the devices it can match allow multiple allocations"
            )
            yield Violation(
                "shared-device",
                path,
                f"{what}: the pod is {declared.slo} ({params.slo_label}), but {why}, so other "
                f"workloads share the GPU and its tail latency is unbounded. Ask for an "
                f"exclusive device (no MPS or TimeSlicing config).",
            )


def _exact(alt: ExactRequest, inventory: Inventory, what: str, path: Path) -> Iterator[Violation]:
    supply = inventory.dra
    device_class = supply.classes.get(alt.device_class)
    if device_class is None:
        names = sorted(supply.classes)
        near = closest(alt.device_class, names)
        hint = f"did you mean {' or '.join(near)}?" if near else f"classes: {listing(names, 6)}."
        yield Violation(
            "unknown-device-class",
            path,
            f'{what} names DeviceClass "{shown(alt.device_class)}", which does not exist: the '
            f'scheduler says only "device class {shown(alt.device_class)} does not exist" and '
            f"the Pod stays Pending; {hint}",
        )
        return
    m = match(inventory.dra, device_class, alt.selectors)
    if m.broken is not None:
        expression, why = m.broken
        yield Violation(
            "selector-unevaluable",
            path,
            f"{what}: the selector {shown(expression, 80)!r} cannot be evaluated here ({why}); "
            f"whether any device matches is unknown.",
            advisory=True,
        )
        return
    if m.errors:
        expression, device, error = m.errors[0]
        yield Violation(
            "selector-error",
            path,
            f"{what}: the selector {shown(expression, 80)!r} fails on "
            f"{plural(len(m.errors), 'device')} ({device.label}: {shown(error, 80)}): the "
            f"scheduler stops at a CEL runtime error, so the claim is never allocated. Guard "
            f"the lookup with .?name.orValue(...) or an `in` test.",
        )
        return
    if not m.devices:
        yield _no_device(alt, inventory, what, path, m)
        return
    if alt.mode == "ExactCount":
        node, most = m.most_on_one_node
        if alt.count > most:
            yield Violation(
                "count-exceeds-node",
                path,
                f"{what} asks for {alt.count} devices of class {alt.device_class}; the most "
                f"that match on one node is {most} ({node or 'no node-local slice'}), and all "
                f"devices of a claim come from one node, so it is never allocated.",
            )
            return
    if m.tainted:
        yield from tainted(alt, m, what, path)


def _no_device(
    alt: ExactRequest, inventory: Inventory, what: str, path: Path, m: DeviceMatch
) -> Violation:
    device_class = inventory.dra.classes[alt.device_class]
    class_devices = match(inventory.dra, device_class, ()).devices
    hints = selector_hints(inventory.dra, device_class, alt.selectors)
    selectors = " && ".join(alt.selectors) or "(none)"
    return Violation(
        "selector-matches-nothing",
        path,
        f"{what}: no device of class {alt.device_class} matches the selector "
        f"{shown(selectors, 100)!r} ({plural(len(class_devices), 'device')} of the class, "
        f"{plural(m.total, 'device')} published), so the claim is never allocated"
        + (f": {'; '.join(hints)}." if hints else "."),
    )


def _memory(
    alt: ExactRequest, m: DeviceMatch, declared: _Declared, what: str, path: Path
) -> Iterator[Violation]:
    if declared.peak is None or declared.peak <= 0:
        return
    sizes = [mem for d in m.devices if (mem := d.memory()) is not None]
    if not sizes or len(sizes) < len(m.devices):
        return  # a device without a memory capacity: nothing to compare with
    largest = max(sizes)
    if declared.peak > largest:
        yield Violation(
            "memory-exceeds-device",
            path,
            f"{what}: the declared peak GPU memory {format_mib(Fraction(declared.peak, _MIB))} "
            f"is above the memory capacity of every device the request can match (largest "
            f"{format_mib(Fraction(largest, _MIB))}, of {plural(len(sizes), 'device')}); "
            f"MIG slices expose less than their nominal size. Ask for a larger device.",
        )


def _shared_strategy(claim: ClaimSpec) -> str:
    """The NVIDIA driver's GpuConfig sharing strategy (TimeSlicing, MPS), if any."""
    for config in claim.config:
        params = as_dict(as_dict(config.get("opaque")).get("parameters"))
        strategy = as_dict(params.get("sharing")).get("strategy")
        if isinstance(strategy, str) and strategy in ("TimeSlicing", "MPS"):
            return strategy
    return ""


def judges(params: Params) -> Mapping[TargetKind, Reads]:
    """Pods' claims and claim objects, against the DRA supply; a claim's findings
    quote its name."""
    return {
        "pod": Reads(claims=True, dra_supply=True),
        "claim": Reads(dra_supply=True, names=True),
    }


CHECK = Check(
    name="dra-claims",
    params=Params,
    run=run,
    judges=judges,
    rules={
        "unknown-device-class": Rule(
            "A DRA request names a DeviceClass that does not exist.", uses_inventory=True
        ),
        "selector-matches-nothing": Rule(
            "A DRA selector that no published device matches.", uses_inventory=True
        ),
        "selector-error": Rule(
            "A DRA selector that fails with a CEL runtime error on a device.",
            uses_inventory=True,
        ),
        "selector-unevaluable": Rule(
            "A DRA selector this environment cannot evaluate (reported, never allowed).",
            uses_inventory=True,
        ),
        "count-exceeds-node": Rule(
            "More devices than any one node publishes for the request.", uses_inventory=True
        ),
        "memory-exceeds-device": Rule(
            "A declared peak memory above every device the request can match.",
            uses_inventory=True,
        ),
        "shared-device": Rule(
            "A latency-sensitive pod whose claim lands on a shared GPU.", uses_inventory=True
        ),
        "claims-exceed-node": Rule(
            "A pod's DRA requests, each satisfiable alone, that no one node serves at once.",
            uses_inventory=True,
        ),
        "all-on-mixed-pool": Rule(
            "allocationMode All over devices of different products or memory on a node.",
            uses_inventory=True,
        ),
        "device-tainted": Rule(
            "Too few devices left once those with untolerated taints are set aside.",
            uses_inventory=True,
        ),
        "tolerates-every-taint": Rule(
            "A DRA toleration with operator Exists and no key: every device taint."
        ),
        "missing-claim-source": Rule(
            "A pod references a claim or claim template not in its namespace.",
            uses_inventory=True,
        ),
    },
)
