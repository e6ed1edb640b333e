"""The DRA side of the cluster as a diagnosis sees it: what is published (a DraSupply),
which devices allocated claims hold, and which DRA kinds were read at all (a kind not
read says nothing: a dump without deviceclasses is no proof that none exist)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.core.dra.model import (
    CLAIM_KINDS,
    EMPTY,
    ClaimSpec,
    DeviceClass,
    DraSupply,
    Slice,
    parse_claim,
    parse_class,
    parse_slice,
)
from webhook.core.kit.dicts import as_dict, as_list

DeviceKey = tuple[str, str, str]  # driver, pool, device


@dataclass(frozen=True, slots=True)
class Holding:
    claim: str  # namespace/name of the ResourceClaim whose allocation holds the device
    pod: str  # namespace/name of the Pod that owns it (a claim from a template), or ""


@dataclass(frozen=True, slots=True)
class DraFacts:
    """What the cluster publishes and has allocated, and which DRA kinds were read."""

    supply: DraSupply = EMPTY
    held: Mapping[DeviceKey, Holding] = field(default_factory=dict)
    allocated: frozenset[str] = frozenset()  # namespace/name of claims with an allocation
    read: frozenset[str] = frozenset()  # DRA kinds read (listed, or found in a dump)


NO_DRA = DraFacts()


class DraCollector:
    """DRA objects fed one by one (any order, any number of dumps) into one DraFacts.

    Builds the supply's tables directly: DraSupply.with_object copies a table per
    object, which is quadratic over a dump."""

    __slots__ = ("_allocated", "_claims", "_classes", "_held", "_read", "_slices")

    def __init__(self) -> None:
        self._classes: dict[str, DeviceClass] = {}
        self._slices: dict[str, Slice] = {}
        self._claims: dict[tuple[str, str, str], ClaimSpec] = {}
        self._held: dict[DeviceKey, Holding] = {}
        self._allocated: set[str] = set()
        self._read: set[str] = set()

    def listed(self, kind: str) -> None:
        """A live LIST of `kind` succeeded: none of that kind exist, if none came."""
        self._read.add(kind)

    def add(self, obj: Mapping[str, Any]) -> None:
        kind = obj.get("kind")
        meta = as_dict(obj.get("metadata"))
        name = meta.get("name")
        if not isinstance(name, str):
            return
        if kind == "DeviceClass":
            self._classes[name] = parse_class(obj)
        elif kind == "ResourceSlice":
            self._slices[name] = parse_slice(obj)
        elif kind in CLAIM_KINDS:
            claim = parse_claim(obj)
            self._claims[(str(kind), claim.namespace, name)] = claim
            if kind == "ResourceClaim":
                self._allocation(obj, f"{claim.namespace}/{name}", meta)
        else:
            return
        self._read.add(str(kind))

    def _allocation(self, obj: Mapping[str, Any], ref: str, meta: Mapping[str, Any]) -> None:
        allocation = as_dict(as_dict(obj.get("status")).get("allocation"))
        if not allocation:
            return
        self._allocated.add(ref)
        namespace = ref.split("/", 1)[0]
        owner = next(
            (
                f"{namespace}/{o.get('name')}"
                for o in map(as_dict, as_list(meta.get("ownerReferences")))
                if o.get("kind") == "Pod"
            ),
            "",
        )
        for result in map(as_dict, as_list(as_dict(allocation.get("devices")).get("results"))):
            key = (str(result.get("driver")), str(result.get("pool")), str(result.get("device")))
            self._held[key] = Holding(ref, owner)

    def facts(self) -> DraFacts:
        supply = DraSupply(self._classes, self._slices, self._claims)
        return DraFacts(supply, self._held, frozenset(self._allocated), frozenset(self._read))
