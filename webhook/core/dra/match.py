"""Which published devices a DRA request can get: its class's selectors and its own.

The result of one (class, selectors) pair is worked out once per inventory snapshot
(memoised on it) from per-slice selector outcomes (webhook.core.dra.cel), so the
first request after a slice event costs that slice's devices, and every later one a
dictionary lookup.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.dra.cel import CACHE, SelectorError
from webhook.core.dra.model import ClaimSpec, Device, DeviceClass, DraSupply, Version
from webhook.core.dra.taints import blocking
from webhook.core.kit.text import closest, listing

_EQUALS = re.compile(r"""\.(\w+)\s*==\s*['"]([^'"]*)['"]""")


@dataclass(frozen=True, slots=True)
class DeviceMatch:
    devices: tuple[Device, ...]  # every selector holds
    # (expression, device, error): a runtime error on a device fails the allocation
    errors: tuple[tuple[str, Device, str], ...]
    broken: tuple[str, str] | None  # (expression, why) when one does not compile here
    total: int  # devices published
    # Of `devices`, those with a NoSchedule or NoExecute taint (webhook.core.dra.taints):
    # usable only by a request that tolerates it. Empty nearly always.
    tainted: tuple[Device, ...] = ()

    def per_node(self) -> Mapping[str, int]:
        out: dict[str, int] = {}
        for d in self.devices:
            out[d.node] = out.get(d.node, 0) + 1
        return out

    @property
    def most_on_one_node(self) -> tuple[str, int]:
        per = self.per_node()
        if not per:
            return "", 0
        node = max(per, key=lambda n: (per[n], n))
        return node, per[node]


def _key(device_class: DeviceClass, selectors: tuple[str, ...]) -> tuple[Any, ...]:
    # By name and expressions, not by the class record: its opaque config holds dicts
    # (unhashable), and a class whose config alone changed matches the same devices.
    return (device_class.name, device_class.selectors, selectors)


_PUT = threading.Lock()  # the watch threads warm the memo while requests read it


def match(supply: DraSupply, device_class: DeviceClass, selectors: tuple[str, ...]) -> DeviceMatch:
    key = _key(device_class, selectors)
    found: DeviceMatch | None = supply.matches.get(key)
    if found is None:
        found = _match(supply, (*device_class.selectors, *selectors))
        with _PUT:
            supply.matches.put(key, found, 64 + 8 * len(found.devices))
    return found


def remember(supply: DraSupply, key: Any, value: Any, nbytes: int) -> None:
    """Put a fact derived from classes and slices in the supply's memo (thread-safe)."""
    with _PUT:
        supply.matches.put(key, value, nbytes)


def cached(supply: DraSupply, device_class: DeviceClass, selectors: tuple[str, ...]) -> bool:
    """True when the match is known: judging it costs a lookup, not an evaluation."""
    return supply.matches.get(_key(device_class, selectors)) is not None


def claim_pairs(claim: ClaimSpec) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(class name, selectors) of every request and alternative of a claim."""
    for request in claim.requests:
        for alt in request.alternatives:
            yield alt.device_class, alt.selectors


def claim_cached(supply: DraSupply, claim: ClaimSpec) -> bool:
    """True when every (class, selectors) of the claim is known, or names no class (the
    check then says so without evaluating anything)."""
    classes = supply.classes
    return all(c not in classes or cached(supply, classes[c], sel) for c, sel in claim_pairs(claim))


def warm(
    supply: DraSupply, *, previous: DraSupply | None = None, claims: Iterable[ClaimSpec] = ()
) -> int:
    """Work out ahead of requests what they will ask (called off the event loop, by the
    watch threads, before the new supply is swapped in): with new classes or slices,
    every class alone, every known claim's requests and whatever the previous supply had
    been asked; otherwise only the given claims'. Returns how many pairs it evaluated."""
    pairs: dict[tuple[str, tuple[str, ...]], None] = {}
    fresh = previous is None or previous.matches is not supply.matches
    if fresh:
        pairs.update(((name, ()), None) for name in supply.classes)
        claims = [*claims, *supply.claims.values()]
        if previous is not None:
            pairs.update(((key[0], key[2]), None) for key in previous.matches.held())
    for claim in claims:
        pairs.update((pair, None) for pair in claim_pairs(claim))
    done = 0
    for name, selectors in pairs:
        device_class = supply.classes.get(name)
        if device_class is not None and not cached(supply, device_class, selectors):
            match(supply, device_class, selectors)
            done += 1
    return done


def _match(supply: DraSupply, expressions: tuple[str, ...]) -> DeviceMatch:
    total = supply.device_count
    for expression in expressions:
        try:
            CACHE.selector(expression)
        except SelectorError as exc:
            return DeviceMatch((), (), (expression, str(exc)), total)
    devices: list[Device] = []
    errors: list[tuple[str, Device, str]] = []
    for s in supply.slices.values():
        per_expr = [CACHE.outcomes(e, s) for e in expressions]
        for i, device in enumerate(s.devices):
            ok = True
            for expression, outcomes in zip(expressions, per_expr, strict=True):
                outcome = outcomes[i]
                if outcome is True:
                    continue
                if outcome is not False:
                    errors.append((expression, device, outcome))
                ok = False
                break  # CEL selectors are ANDed in order; the first that fails decides
            if ok:
                devices.append(device)
    tainted = tuple(d for d in devices if d.taints and blocking(d))
    return DeviceMatch(tuple(devices), tuple(errors), None, total, tainted)


def extended_classes(supply: DraSupply, resource: str) -> tuple[DeviceClass, ...]:
    """KEP-5004: the DeviceClasses that back an extended resource name (none: the name
    is a device plugin's, or unknown)."""
    if not supply.classes:
        return ()
    # On the supply's memo, which a new class set replaces (webhook.core.dra.model).
    mapping: Mapping[str, tuple[str, ...]] | None = supply.matches.get("dra-extended")
    if mapping is None:
        mapping = supply.extended_resources()
        supply.matches.put("dra-extended", mapping, 128 * len(mapping))
    return tuple(supply.classes[name] for name in mapping.get(resource, ()))


def extended_match(supply: DraSupply, resource: str) -> DeviceMatch | None:
    """The devices that can serve an extended resource through DRA; None if no class maps
    it. Several classes: the scheduler picks one (the newest, KEP-5004); the union is
    what any of them can give."""
    classes = extended_classes(supply, resource)
    if not classes:
        return None
    matches = [match(supply, c, ()) for c in classes]
    if len(matches) == 1:
        return matches[0]
    broken = next((m.broken for m in matches if m.broken), None)
    devices = tuple({d.label: d for m in matches for d in m.devices}.values())
    errors = tuple(e for m in matches for e in m.errors)
    tainted = tuple({d.label: d for m in matches for d in m.tainted}.values())
    return DeviceMatch(devices, errors, broken, matches[0].total, tainted)


def selector_hints(
    supply: DraSupply, device_class: DeviceClass, selectors: tuple[str, ...]
) -> list[str]:
    """For selectors that match nothing: the nearest real value of each attribute they
    compare for equality with a string, or that the attribute is a version."""
    hints: list[str] = []
    class_devices = match(supply, device_class, ()).devices
    for expression in selectors:
        for key, wanted in _EQUALS.findall(expression):
            raw = [v for d in class_devices for v in _values(d, key)]
            values = sorted({getattr(v, "text", str(v)) for v in raw})
            if wanted in values and any(isinstance(v, Version) for v in raw):
                hints.append(
                    f"{key} is a semantic version, never equal to a string: compare "
                    f"with semver({wanted!r}), e.g. .compareTo(semver({wanted!r})) == 0"
                )
            elif values and wanted not in values:
                near = closest(wanted, values) or values[:3]
                hints.append(f"{key} is {listing(near)} on the published devices, not {wanted!r}")
    return hints


def _values(device: Device, key: str) -> Iterator[object]:
    for values in device.attributes.values():
        if key in values:
            yield values[key]
