"""The dra-claims findings about what several requests, taints and tolerations do
together (webhook.core.dra.joint, webhook.core.dra.taints): kept here so the check stays
one screenful per concern. Each yields Violations with the facts named."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from webhook.core.dra.joint import Ask, best_node, mixed_nodes
from webhook.core.dra.match import DeviceMatch
from webhook.core.dra.model import ClaimSpec, Device, DeviceTaint, DraSupply, ExactRequest
from webhook.core.dra.taints import describe, tolerates_every_key, untolerated
from webhook.core.kit.paths import Path
from webhook.core.kit.text import listing, plural
from webhook.core.kit.violation import Violation


def joint(supply: DraSupply, asks: list[Ask], path: Path, who: str) -> Iterator[Violation]:
    """All claims of a Pod (all requests of a claim) come from one node, each device to
    one request: each may fit alone and all of them on no node."""
    if len(asks) < 2:
        return
    found = best_node(supply, asks)
    if found is None:
        return
    node, got, need = found
    parts = listing([f"{a.need} for {a.what}" for a in asks], 4)
    yield Violation(
        "claims-exceed-node",
        path,
        f"{who} asks for {need} devices in all ({parts}); each request fits alone, but all "
        f"of them are allocated from one node and a device serves one request: the most "
        f"any node can give at once is {got} ({node}), so it is never allocated.",
    )


def mixed(ask: Ask, path: Path) -> Iterator[Violation]:
    """allocationMode All takes every matching device of the node the Pod lands on."""
    mixed = list(mixed_nodes(ask))
    if not mixed:
        return
    shown_nodes = "; ".join(
        f"{node}: {', '.join(f'{n}x {kind}' for kind, n in kinds)}" for node, kinds in mixed[:3]
    )
    more = f"; and {plural(len(mixed) - 3, 'more node')}" if len(mixed) > 3 else ""
    yield Violation(
        "all-on-mixed-pool",
        path,
        f"{ask.what} (allocationMode All) gets every device it matches on the node it lands "
        f"on, and they differ there ({shown_nodes}{more}): the Pod gets whichever mix its "
        f"node has. Narrow the selector to one product and memory size.",
        advisory=True,
    )


class Blocked(NamedTuple):
    """Matching devices set aside for taints the request does not tolerate, when too
    few are left: the devices with their taints, the most left on one node, the need."""

    devices: tuple[tuple[Device, tuple[DeviceTaint, ...]], ...]
    most: int
    need: int

    def taints_shown(self, limit: int = 4) -> str:
        return listing(
            [f"{d.label} ({', '.join(map(describe, ts))})" for d, ts in self.devices], limit
        )

    def left(self) -> str:
        return f"at most {self.most} usable on one node" if self.most else "none usable"


def blocked_by_taints(alt: ExactRequest, m: DeviceMatch) -> Blocked | None:
    """Devices with a NoSchedule/NoExecute taint the request does not tolerate are not
    allocatable (KEP-5055); None while enough are left on some node."""
    blocked: dict[str, tuple[Device, tuple[DeviceTaint, ...]]] = {}
    for d in m.tainted:
        taints = untolerated(d, alt.tolerations)
        if taints:
            blocked[d.label] = (d, taints)
    if not blocked:
        return None
    usable: dict[str, int] = {}
    for d in m.devices:
        if d.label not in blocked:
            usable[d.node] = usable.get(d.node, 0) + 1
    need = alt.count if alt.mode == "ExactCount" else 1
    most = max(usable.values(), default=0)
    return None if most >= need else Blocked(tuple(blocked.values()), most, need)


def tainted(alt: ExactRequest, m: DeviceMatch, what: str, path: Path) -> Iterator[Violation]:
    """Too few devices left once the untolerated tainted ones are set aside: the claim
    is never allocated."""
    b = blocked_by_taints(alt, m)
    if b is None:
        return
    n = len(b.devices)
    yield Violation(
        "device-tainted",
        path,
        f"{what}: {plural(n, 'device')} it can match "
        f"{'is' if n == 1 else 'are'} tainted and not tolerated ({b.taints_shown()}), "
        f"leaving {b.left()} for {plural(b.need, 'device')}, so the scheduler never allocates "
        f"it. A NoSchedule or NoExecute device taint marks a device unusable (a lost GPU, an "
        f"XID error); tolerate only a taint known to be harmless.",
    )


def tolerations(claim: ClaimSpec, base: Path, label: str) -> Iterator[Violation]:
    """`operator: Exists` without a key tolerates every device taint: a lost GPU too."""
    for request in claim.requests:
        for alt in request.alternatives:
            for i, toleration in enumerate(alt.tolerations):
                if not tolerates_every_key(toleration):
                    continue
                effect = toleration.get("effect")
                which = f"every {effect} device taint" if effect else "every device taint"
                yield Violation(
                    "tolerates-every-taint",
                    (*base, *alt.path, "tolerations", i),
                    f'{label} request "{alt.name}": tolerations[{i}] (operator Exists, no key) '
                    f"tolerates {which}, so the claim can get a GPU its driver marked lost or "
                    f"failing (gpu.nvidia.com/gpu-lost, gpu.nvidia.com/xid). Name the taint "
                    f"keys it may accept.",
                    advisory=True,
                )
