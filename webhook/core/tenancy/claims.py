"""The DeviceClasses a workload asks for through DRA.

A Pod names its claims in `spec.resourceClaims` (a ResourceClaimTemplate or a
ResourceClaim, resolved in its namespace from the DRA supply, as the scheduler's
DynamicResources plugin does), and each request of a claim names a class: every
alternative of a `firstAvailable` request may be the one allocated, so each counts.
KEP-5004 lets a container ask for a class as an extended resource too: its implicit
name `deviceclass.resource.kubernetes.io/<class>`, or the class's extendedResourceName.
A ResourceClaim or ResourceClaimTemplate object is judged by the classes it names.
"""

from __future__ import annotations

from typing import NamedTuple

from webhook.core.dra.match import extended_classes
from webhook.core.dra.model import IMPLICIT_PREFIX, ClaimSpec, DraSupply
from webhook.core.kit.dicts import as_dict
from webhook.core.kit.paths import Path, format_path
from webhook.core.kit.text import shown
from webhook.core.workloads.pods import PodView

_REFERENCES = (
    ("resourceClaimTemplateName", "ResourceClaimTemplate"),
    ("resourceClaimName", "ResourceClaim"),
)


class ClassAsk(NamedTuple):
    what: str  # 'ResourceClaimTemplate "gpu" request "gpu" names DeviceClass gpu.nvidia.com'
    device_class: str
    path: Path


class Unresolved(NamedTuple):
    """A claim the Pod references that the supply does not hold: its classes are unknown."""

    what: str
    path: Path


def claim_classes(claim: ClaimSpec, *, base: Path, where: str = "") -> list[ClassAsk]:
    """Every class the claim's requests (and their alternatives) name. `base`: the path
    of the claim's `devices` in its object, or of the Pod's reference to it (then every
    request is reported there)."""
    label = f'{where}{claim.kind} "{shown(claim.name)}"'
    return [
        ClassAsk(
            f'{label} request "{shown(alt.name)}" names DeviceClass {shown(alt.device_class, 253)}',
            alt.device_class,
            base if where else (*base, *alt.path),
        )
        for request in claim.requests
        for alt in request.alternatives
    ]


def pod_classes(
    pod: PodView, *, supply: DraSupply, namespace: str
) -> tuple[list[ClassAsk], list[Unresolved]]:
    found: list[ClassAsk] = []
    unresolved: list[Unresolved] = []
    items = pod.spec.get("resourceClaims")
    for index, item in enumerate(items if type(items) is list else ()):
        item = as_dict(item)
        path = pod.where("resourceClaims", index)
        for field, kind in _REFERENCES:
            name = item.get(field)
            if not isinstance(name, str):
                continue
            claim = supply.claims.get((kind, namespace, name))
            where = f'pod claim "{shown(item.get("name"))}" ({format_path(path)}): '
            if claim is None:
                unresolved.append(Unresolved(f'{where}{kind} "{shown(name)}"', (*path, field)))
            else:
                found.extend(claim_classes(claim, base=(*path, field), where=where))
    for a in pod.amounts:
        for name in _extended(a.resource, supply):
            what = f"{a.container.label} asks {a.resource}, a device of DeviceClass {name}"
            found.append(ClassAsk(what, name, a.path))
    return found, unresolved


def asks_classes(pod: PodView, *, supply: DraSupply) -> bool:
    """The Pod names a claim, or asks for a DeviceClass as an extended resource."""
    if pod.spec.get("resourceClaims"):
        return True
    return any(_extended(a.resource, supply) for a in pod.amounts)


def _extended(resource: str, supply: DraSupply) -> tuple[str, ...]:
    if resource.startswith(IMPLICIT_PREFIX):
        return (resource.removeprefix(IMPLICIT_PREFIX),)
    return tuple(c.name for c in extended_classes(supply, resource))
