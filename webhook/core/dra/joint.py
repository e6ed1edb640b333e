"""A Pod's DRA requests judged together against one node, and `allocationMode: All` on a
node whose matching devices differ.

The scheduler allocates every claim of a Pod from the one node the Pod lands on, and a
device to one request only: two requests that could both take a device count it once.
Each request may be satisfiable alone and the Pod still never fit. Whether a node can
serve all of them is a bipartite matching (request slots to devices); a Pod has a few
requests and a node a few devices, so augmenting paths are cheap, and the answer is
memoised on the DRA supply (it depends on classes and slices only).

Source: k8s.io/dynamic-resource-allocation structured allocator (all claims of a Pod on
one node; AllocationMode All takes every matching device of the node).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.core.dra.match import DeviceMatch, remember
from webhook.core.dra.model import Device, DraSupply, ExactRequest
from webhook.core.dra.taints import untolerated

MAX_SLOTS = 256  # devices asked for in all; past this the per-request checks speak alone


@dataclass(frozen=True, slots=True)
class Ask:
    what: str  # how a message names the request
    request: ExactRequest
    match: DeviceMatch

    @property
    def need(self) -> int:
        # All takes every matching device of the node: at least one, shared with no other.
        return self.request.count if self.request.mode == "ExactCount" else 1

    def usable(self) -> tuple[Device, ...]:
        if not self.match.tainted:
            return self.match.devices
        blocked = {d.label for d in self.match.tainted if untolerated(d, self.request.tolerations)}
        return tuple(d for d in self.match.devices if d.label not in blocked)


def best_node(supply: DraSupply, asks: Sequence[Ask]) -> tuple[str, int, int] | None:
    """None when one node can serve every request at once (or it cannot be told:
    devices without a node, too many asked); else (the best node, how many of the
    devices asked it can give, how many are asked)."""
    key = ("dra-joint", *(_ask_key(supply, a) for a in asks))
    found = supply.matches.get(key)
    if found is None:
        found = (_best_node(asks),)
        remember(supply, key, found, 200)
    result: tuple[str, int, int] | None = found[0]
    return result


def _ask_key(supply: DraSupply, ask: Ask) -> tuple[Any, ...]:
    r = ask.request
    device_class = supply.classes.get(r.device_class)
    tolerations = tuple(
        tuple(sorted((str(k), str(v)) for k, v in t.items())) for t in r.tolerations
    )
    return (
        r.device_class,
        device_class.selectors if device_class is not None else (),
        r.selectors,
        r.mode,
        r.count,
        tolerations,
    )


def _best_node(asks: Sequence[Ask]) -> tuple[str, int, int] | None:
    need = sum(a.need for a in asks)
    if need > MAX_SLOTS:
        return None
    per_ask = [a.usable() for a in asks]
    if any(d.node == "" for devices in per_ask for d in devices):
        return None  # a pool that is not node-local: which nodes it reaches is not here
    candidates: dict[str, int] = {}
    for devices in per_ask:
        for d in devices:
            candidates[d.node] = candidates.get(d.node, 0) + 1
    best_node, best = "", 0
    # The nodes with the most candidate devices first: a node that serves all is found
    # at once in the common case.
    for node in sorted(candidates, key=lambda n: (-candidates[n], n)):
        options = [[d.label for d in ds if d.node == node] for ds in per_ask]
        got = _assign([a.need for a in asks], options)
        if got == need:
            return None
        if got > best:
            best_node, best = node, got
    return best_node, best, need


def _assign(needs: list[int], options: list[list[str]]) -> int:
    """How many request slots get a distinct device (augmenting paths, Kuhn)."""
    slots = [i for i, n in enumerate(needs) for _ in range(n)]
    owner: dict[str, int] = {}  # device -> slot

    def augment(slot: int, seen: set[str]) -> bool:
        for device in options[slots[slot]]:
            if device in seen:
                continue
            seen.add(device)
            if device not in owner or augment(owner[device], seen):
                owner[device] = slot
                return True
        return False

    return sum(augment(s, set()) for s in range(len(slots)))


def mixed_nodes(ask: Ask) -> Iterator[tuple[str, list[tuple[str, int]]]]:
    """For an `All` request: each node whose matching devices differ in product or
    memory, with (kind, how many) of each."""
    per_node: dict[str, dict[str, int]] = {}
    for d in ask.usable():
        kinds = per_node.setdefault(d.node, {})
        kind = _kind(d)
        kinds[kind] = kinds.get(kind, 0) + 1
    for node in sorted(per_node):
        if len(per_node[node]) > 1:
            yield node, sorted(per_node[node].items())


def _kind(device: Device) -> str:
    product = ""
    for values in device.attributes.values():
        name = values.get("productName")
        if isinstance(name, str):
            product = name
            break
    memory = device.memory()
    size = f"{float(memory / (1 << 30)):.4g} GiB" if memory is not None else ""
    return " ".join(p for p in (product or device.name, size) if p)
