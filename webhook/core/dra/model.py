"""What Dynamic Resource Allocation publishes and asks: DeviceClasses, ResourceSlices, claims.

Parsed from `resource.k8s.io` objects (v1, v1beta2 and v1beta1: v1beta1 wraps each
device's fields in `basic`, and a request's fields sit on the request itself rather
than under `exactly`) into frozen records that keep only what the checks read, so an
update that changes nothing they read parses to an equal record.

`DraSupply` holds every class, slice, claim and claim template (from files or a live
watch). It is immutable: `with_object` and `without` make the next one at the cost of
one object, and hand back this very supply when nothing a check reads changed.
Selector results are cached per slice (webhook.core.dra.cel), so a slice event costs
the devices of that slice, not of the cluster.

Sources: k8s.io/api resource/v1 types.go (DeviceClassSpec.ExtendedResourceName,
ResourceSliceSpec, DeviceRequest.Exactly/FirstAvailable, ExactDeviceRequest.Count
defaulting to 1, AllocationMode ExactCount/All); KEP-5004 (the implicit extended
resource name `deviceclass.resource.kubernetes.io/<class>`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from webhook.core.kit.dicts import as_dict, as_list
from webhook.core.kit.memo import Memo
from webhook.core.kit.quantity import quantity_or_none
from webhook.core.workloads.targets import CLAIM_GROUP
from webhook.core.workloads.targets import CLAIM_KINDS as TARGET_CLAIM_KINDS

GROUP = CLAIM_GROUP  # resource.k8s.io
SUPPLY_KINDS = frozenset({"DeviceClass", "ResourceSlice"})
CLAIM_KINDS = frozenset(TARGET_CLAIM_KINDS)  # the claim targets' kinds
# A Namespace labelled so lets its claims set adminAccess (k8s.io/api resource/v1
# types.go; the label key since 1.34).
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
DRA_KINDS = SUPPLY_KINDS | CLAIM_KINDS | {"Namespace"}
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"  # KEP-5004


@dataclass(frozen=True, slots=True)
class Version:
    """A semantic version attribute (`version` in a ResourceSlice: semver 2.0.0)."""

    text: str


AttributeValue = int | bool | str | Version


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str
    effect: str  # NoSchedule or NoExecute (v1: None as well, from 1.35)


@dataclass(frozen=True, slots=True)
class Device:
    driver: str
    pool: str
    name: str
    node: str  # "" when the slice is not node-local (allNodes or a nodeSelector)
    # domain -> id -> value; a name without a domain is in the driver's (compile.go)
    attributes: Mapping[str, Mapping[str, AttributeValue]]
    capacity: Mapping[str, Mapping[str, Fraction]]
    taints: tuple[DeviceTaint, ...] = ()
    shared: bool = False  # allowMultipleAllocations: one device, many claims

    @property
    def label(self) -> str:
        return f"{self.driver}/{self.pool}/{self.name}"

    def memory(self) -> Fraction | None:
        """The `memory` capacity in bytes, in the driver's domain (NVIDIA: gpu.nvidia.com)."""
        for domain in (self.driver, *self.capacity):
            found = self.capacity.get(domain, {}).get("memory")
            if found is not None:
                return found
        return None


@dataclass(frozen=True, slots=True)
class Slice:
    name: str
    driver: str
    pool: str
    node: str
    devices: tuple[Device, ...]


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...]  # CEL expressions, all must hold
    extended_resource_name: str  # "" when the class names none
    config: tuple[Mapping[str, Any], ...] = ()  # opaque driver config (sharing, ...)


@dataclass(frozen=True, slots=True)
class ExactRequest:
    name: str  # the request's (or subrequest's) name
    device_class: str
    selectors: tuple[str, ...]
    mode: str  # ExactCount or All
    count: int
    admin_access: bool
    tolerations: tuple[Mapping[str, Any], ...]
    path: tuple[str | int, ...]  # from the claim spec's `devices`


@dataclass(frozen=True, slots=True)
class Request:
    """One entry of `devices.requests`: exactly one way, or alternatives in order."""

    name: str
    alternatives: tuple[ExactRequest, ...]  # one for `exactly`; firstAvailable's, in order
    first_available: bool


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    kind: str  # ResourceClaim or ResourceClaimTemplate
    namespace: str
    name: str
    requests: tuple[Request, ...]
    config: tuple[Mapping[str, Any], ...]  # devices.config: opaque parameters per request


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _name(obj: Mapping[str, Any]) -> str:
    return _str(as_dict(obj.get("metadata")).get("name"))


def parse_class(obj: Mapping[str, Any]) -> DeviceClass:
    spec = as_dict(obj.get("spec"))
    selectors = tuple(
        _str(as_dict(as_dict(s).get("cel")).get("expression"))
        for s in as_list(spec.get("selectors"))
    )
    config = tuple(as_dict(c) for c in as_list(spec.get("config")))
    ext = _str(spec.get("extendedResourceName"))
    return DeviceClass(_name(obj), selectors, ext, config)


def parse_slice(obj: Mapping[str, Any]) -> Slice:
    spec = as_dict(obj.get("spec"))
    driver = sys.intern(_str(spec.get("driver")))
    pool = _str(as_dict(spec.get("pool")).get("name"))
    node = _str(spec.get("nodeName"))
    devices = tuple(_device(as_dict(d), driver, pool, node) for d in as_list(spec.get("devices")))
    return Slice(_name(obj), driver, pool, node, devices)


def _device(raw: Mapping[str, Any], driver: str, pool: str, node: str) -> Device:
    body = as_dict(raw.get("basic")) or raw  # v1beta1 keeps the fields under `basic`
    attributes: dict[str, dict[str, AttributeValue]] = {}
    for qualified, value in as_dict(body.get("attributes")).items():
        domain, ident = _split(str(qualified), driver)
        parsed = _attribute(as_dict(value))
        if parsed is not None:
            attributes.setdefault(domain, {})[ident] = parsed
    capacity: dict[str, dict[str, Fraction]] = {}
    for qualified, value in as_dict(body.get("capacity")).items():
        domain, ident = _split(str(qualified), driver)
        # v1beta1 wrote a bare quantity; v1beta2 and v1 {value: quantity}.
        amount = quantity_or_none(value.get("value") if isinstance(value, Mapping) else value)
        if amount is not None:
            capacity.setdefault(domain, {})[ident] = amount
    taints = tuple(
        DeviceTaint(_str(t.get("key")), _str(t.get("value")), _str(t.get("effect")))
        for t in map(as_dict, as_list(body.get("taints")))
    )
    return Device(
        driver,
        pool,
        _str(raw.get("name")),
        node,
        attributes,
        capacity,
        taints,
        body.get("allowMultipleAllocations") is True,
    )


def _split(qualified: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = qualified.partition("/")
    return (domain, ident) if sep else (driver, qualified)


def _attribute(value: Mapping[str, Any]) -> AttributeValue | None:
    for key, kind in (("int", int), ("bool", bool), ("string", str)):
        got = value.get(key)
        if type(got) is kind:
            return got
    version = value.get("version")
    return Version(version) if isinstance(version, str) else None


def parse_claim(obj: Mapping[str, Any], *, namespace: str = "") -> ClaimSpec:
    """A ResourceClaim's spec, or a ResourceClaimTemplate's `spec.spec`."""
    kind = _str(obj.get("kind"))
    spec = as_dict(obj.get("spec"))
    if kind == "ResourceClaimTemplate":
        spec = as_dict(spec.get("spec"))
    devices = as_dict(spec.get("devices"))
    requests = tuple(
        _request(as_dict(r), ("requests", i))
        for i, r in enumerate(as_list(devices.get("requests")))
    )
    config = tuple(as_dict(c) for c in as_list(devices.get("config")))
    ns = namespace or _str(as_dict(obj.get("metadata")).get("namespace"))
    return ClaimSpec(kind, ns, _name(obj), requests, config)


def _request(raw: Mapping[str, Any], path: tuple[str | int, ...]) -> Request:
    name = _str(raw.get("name"))
    subs = as_list(raw.get("firstAvailable"))
    if subs:
        alternatives = tuple(
            _exact(
                as_dict(s), f"{name}/{_str(as_dict(s).get('name'))}", (*path, "firstAvailable", i)
            )
            for i, s in enumerate(subs)
        )
        return Request(name, alternatives, True)
    exactly = raw.get("exactly")
    if isinstance(exactly, Mapping):
        return Request(name, (_exact(exactly, name, (*path, "exactly")),), False)
    return Request(name, (_exact(raw, name, path),), False)  # v1beta1: on the request


def _exact(raw: Mapping[str, Any], name: str, path: tuple[str | int, ...]) -> ExactRequest:
    selectors = tuple(
        _str(as_dict(as_dict(s).get("cel")).get("expression"))
        for s in as_list(raw.get("selectors"))
    )
    count = raw.get("count")
    return ExactRequest(
        name,
        _str(raw.get("deviceClassName")),
        selectors,
        _str(raw.get("allocationMode")) or "ExactCount",
        # The apiserver omits a zero count and defaults it to 1: store what it stores.
        count if type(count) is int and count > 0 else 1,
        raw.get("adminAccess") is True,
        tuple(as_dict(t) for t in as_list(raw.get("tolerations"))),
        path,
    )


@dataclass(frozen=True, slots=True)
class DraSupply:
    """Every DeviceClass, ResourceSlice, claim, claim template and Namespace label set
    known, by key. Immutable; `generation` grows with every change."""

    classes: Mapping[str, DeviceClass] = field(default_factory=dict)
    slices: Mapping[str, Slice] = field(default_factory=dict)
    claims: Mapping[tuple[str, str, str], ClaimSpec] = field(default_factory=dict)
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    generation: int = 0
    # Device-match results (webhook.core.dra.match) depend on classes and slices only: a
    # supply that changes claims or namespaces hands this memo on, so a new claim does
    # not make every (class, selectors) pair cost its first evaluation again.
    matches: Memo = field(default_factory=lambda: Memo(8 << 20), compare=False, repr=False)

    @property
    def known(self) -> bool:
        """True when any DRA object was given: a cluster without DRA says nothing here."""
        return bool(self.classes or self.slices)

    def devices(self) -> Iterator[Device]:
        for s in self.slices.values():
            yield from s.devices

    @property
    def device_count(self) -> int:
        return sum(len(s.devices) for s in self.slices.values())

    def extended_resources(self) -> Mapping[str, tuple[str, ...]]:
        """KEP-5004: extended resource name -> the classes that back it (explicit
        extendedResourceName first, then the implicit deviceclass.resource.kubernetes.io
        name every class has)."""
        out: dict[str, list[str]] = {}
        for c in self.classes.values():
            if c.extended_resource_name:
                out.setdefault(c.extended_resource_name, []).append(c.name)
            out.setdefault(IMPLICIT_PREFIX + c.name, []).append(c.name)
        return {k: tuple(v) for k, v in out.items()}

    def with_object(self, obj: Mapping[str, Any]) -> DraSupply:
        kind = _str(obj.get("kind"))
        name = _name(obj)
        if kind == "DeviceClass":
            return self._put("classes", name, parse_class(obj))
        if kind == "ResourceSlice":
            return self._put("slices", name, parse_slice(obj))
        if kind in CLAIM_KINDS:
            claim = parse_claim(obj)
            return self._put("claims", (kind, claim.namespace, name), claim)
        if kind == "Namespace":
            labels = as_dict(as_dict(obj.get("metadata")).get("labels"))
            return self._put("namespaces", name, {str(k): str(v) for k, v in labels.items()})
        raise ValueError(f"not a DRA kind: {kind!r}")

    def without(self, kind: str, name: str, namespace: str = "") -> DraSupply:
        table, key = _table(kind, name, namespace)
        current: Mapping[Any, Any] = getattr(self, table)
        if key not in current:
            return self
        rest = {k: v for k, v in current.items() if k != key}
        return self._replace(table, rest)

    def _put(self, table: str, key: Any, value: Any) -> DraSupply:
        current: Mapping[Any, Any] = getattr(self, table)
        if current.get(key) == value:
            return self  # nothing a check reads changed: caches on this supply stay
        return self._replace(table, {**current, key: value})

    def _replace(self, table: str, value: Mapping[Any, Any]) -> DraSupply:
        return DraSupply(
            value if table == "classes" else self.classes,
            value if table == "slices" else self.slices,
            value if table == "claims" else self.claims,
            value if table == "namespaces" else self.namespaces,
            self.generation + 1,
            self.matches if table in ("claims", "namespaces") else Memo(8 << 20),
        )


def _table(kind: str, name: str, namespace: str) -> tuple[str, Any]:
    if kind == "DeviceClass":
        return "classes", name
    if kind == "ResourceSlice":
        return "slices", name
    if kind in CLAIM_KINDS:
        return "claims", (kind, namespace, name)
    if kind == "Namespace":
        return "namespaces", name
    raise ValueError(f"not a DRA kind: {kind!r}")


EMPTY = DraSupply()
