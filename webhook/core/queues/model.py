"""Kueue's queues and Kubernetes' ResourceQuotas, as the checks read them.

Parsed from `kueue.x-k8s.io` objects (ResourceFlavor, ClusterQueue, LocalQueue,
Cohort; the versions Kueue serves, `SERVED`) and core/v1 ResourceQuotas into frozen
records that keep only what the queue rules read: an update that changes only status
parses to an equal record.

A field that cannot be read is an InventoryError naming the object and the field: a
quota that cannot be read is never taken as no quota.

Sources (kubernetes-sigs/kueue v0.19, apis/kueue/v1beta2 and v1beta1): a ClusterQueue's
`resourceGroups` (coveredResources; flavors in order, each resource's nominalQuota,
borrowingLimit, lendingLimit), `namespaceSelector`, its cohort (`cohort` in v1beta1,
`cohortName` in v1beta2); a Cohort's `parentName` and resourceGroups;
a LocalQueue's `clusterQueue`; a ResourceFlavor's nodeLabels, nodeTaints, tolerations.
tests/data/kueue/FACTS.md cites each field and rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from webhook.core.kit.dicts import as_dict, as_list, str_map
from webhook.core.workloads.targets import QUEUE_GROUP, QUEUE_KINDS
from webhook.core.workloads.units import amount
from webhook.errors import InventoryError

KUEUE_GROUP = QUEUE_GROUP
# The versions Kueue v0.19 serves of each kind (its CRDs, kubernetes-sigs/kueue v0.19.2
# 8eab6877 config/components/crd/bases): v1beta2 is the storage version, v1beta1 is
# served and deprecated.
SERVED: Mapping[str, tuple[str, ...]] = {kind: ("v1beta2", "v1beta1") for kind in QUEUE_KINDS}
QUOTA_KIND = "ResourceQuota"  # core/v1
DEPRECATED_VERSION = "v1beta1"


@dataclass(frozen=True, slots=True)
class Quota:
    """One resource's quota in one flavor of a ClusterQueue or a Cohort, in the units
    the requests are counted in (webhook.core.workloads.units: millicores of cpu)."""

    nominal: int
    borrowing_limit: int | None  # None: may borrow whatever its cohort has
    lending_limit: int | None  # None: lends all of its nominal quota


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    flavor: str
    resources: Mapping[str, Quota]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]  # in order: Kueue tries them so


@dataclass(frozen=True, slots=True)
class FlavorTaint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: str
    node_labels: Mapping[str, str]
    node_taints: tuple[FlavorTaint, ...]
    tolerations: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: str
    version: str
    cohort: str  # "" when in none
    # The namespaceSelector as written; None when absent (then it selects nothing).
    namespace_selector: Mapping[str, Any] | None
    groups: tuple[ResourceGroup, ...]


@dataclass(frozen=True, slots=True)
class Cohort:
    name: str
    version: str
    parent: str
    groups: tuple[ResourceGroup, ...]


@dataclass(frozen=True, slots=True)
class LocalQueue:
    namespace: str
    name: str
    version: str
    cluster_queue: str


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    namespace: str
    name: str
    hard: Mapping[str, int]  # spec.hard's names as written (requests.nvidia.com/gpu), in units
    scoped: bool  # scopes or a scopeSelector: it counts only some Pods


QueueObject = ResourceFlavor | ClusterQueue | Cohort | LocalQueue | ResourceQuota


def ref(obj: Mapping[str, Any]) -> str:
    """`Kind namespace/name` or `Kind name`, as messages name an object."""
    meta = as_dict(obj.get("metadata"))
    name, ns = meta.get("name"), meta.get("namespace")
    shown = f"{ns}/{name}" if isinstance(ns, str) and ns else str(name or "(unnamed)")
    return f"{obj.get('kind')} {shown}"


def parse(obj: Mapping[str, Any]) -> QueueObject:
    """The record of a Kueue object or a ResourceQuota; InventoryError when a field the
    rules read cannot be read (naming the object and the field)."""
    kind = obj.get("kind")
    if kind == QUOTA_KIND:
        return _quota(obj)
    version = _version(obj)
    spec = as_dict(obj.get("spec"))
    name = _text(as_dict(obj.get("metadata")).get("name"))
    if kind == "ResourceFlavor":
        return _flavor(obj, name, spec)
    if kind == "ClusterQueue":
        cohort = spec.get("cohortName" if version == "v1beta2" else "cohort")
        selector = spec.get("namespaceSelector")
        if selector is not None and not isinstance(selector, Mapping):
            raise _error(obj, "spec.namespaceSelector", "must be a label selector")
        groups = _groups(obj, spec)
        return ClusterQueue(name, version, _text(cohort), selector, groups)
    if kind == "Cohort":  # parentName in both versions
        return Cohort(name, version, _text(spec.get("parentName")), _groups(obj, spec))
    if kind == "LocalQueue":
        namespace = _text(as_dict(obj.get("metadata")).get("namespace"))
        cluster_queue = _text(spec.get("clusterQueue"))
        return LocalQueue(namespace, name, version, cluster_queue)
    raise _error(obj, "kind", f"is not one of {', '.join(sorted(QUEUE_KINDS))}")


def is_queue_object(obj: Mapping[str, Any]) -> bool:
    """A Kueue object (of any version: an unknown one is an error, not another kind) or
    a core/v1 ResourceQuota."""
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if kind == QUOTA_KIND:
        return api_version == "v1"
    return kind in QUEUE_KINDS and str(api_version).startswith(KUEUE_GROUP + "/")


def _version(obj: Mapping[str, Any]) -> str:
    kind = str(obj.get("kind"))
    version = str(obj.get("apiVersion", "")).removeprefix(KUEUE_GROUP + "/")
    served = SERVED.get(kind, ())
    if version not in served:
        raise _error(
            obj,
            "apiVersion",
            f"{KUEUE_GROUP}/{version} is not a version Kueue serves for {kind} "
            f"(it serves {', '.join(KUEUE_GROUP + '/' + v for v in served)})",
        )
    return version


def _flavor(obj: Mapping[str, Any], name: str, spec: Mapping[str, Any]) -> ResourceFlavor:
    taints = []
    for i, t in enumerate(as_list(spec.get("nodeTaints"))):
        taint = as_dict(t)
        if not isinstance(taint.get("key"), str) or not isinstance(taint.get("effect"), str):
            raise _error(obj, f"spec.nodeTaints[{i}]", "needs a key and an effect")
        taints.append(FlavorTaint(taint["key"], _text(taint.get("value")), taint["effect"]))
    tolerations = tuple(as_dict(t) for t in as_list(spec.get("tolerations")))
    labels = MappingProxyType(str_map(spec.get("nodeLabels")))
    return ResourceFlavor(name, labels, tuple(taints), tolerations)


def _groups(obj: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[ResourceGroup, ...]:
    out = []
    for g, raw in enumerate(as_list(spec.get("resourceGroups"))):
        group = as_dict(raw)
        covered = tuple(_text(r) for r in as_list(group.get("coveredResources")))
        flavors = []
        for f, fraw in enumerate(as_list(group.get("flavors"))):
            flavor = as_dict(fraw)
            where = f"spec.resourceGroups[{g}].flavors[{f}]"
            resources = {}
            for r, rraw in enumerate(as_list(flavor.get("resources"))):
                resource = as_dict(rraw)
                at = f"{where}.resources[{r}]"
                named = _text(resource.get("name"))
                resources[named] = Quota(
                    _amount(obj, named, resource.get("nominalQuota"), f"{at}.nominalQuota"),
                    _limit(obj, named, resource.get("borrowingLimit"), f"{at}.borrowingLimit"),
                    _limit(obj, named, resource.get("lendingLimit"), f"{at}.lendingLimit"),
                )
            flavors.append(FlavorQuotas(_text(flavor.get("name")), MappingProxyType(resources)))
        out.append(ResourceGroup(covered, tuple(flavors)))
    return tuple(out)


def _quota(obj: Mapping[str, Any]) -> ResourceQuota:
    meta = as_dict(obj.get("metadata"))
    spec = as_dict(obj.get("spec"))
    hard = {
        str(k): _amount(obj, _quota_resource(str(k)), v, f"spec.hard[{k!r}]")
        for k, v in as_dict(spec.get("hard")).items()
    }
    scoped = bool(spec.get("scopes")) or bool(spec.get("scopeSelector"))
    return ResourceQuota(
        _text(meta.get("namespace")), _text(meta.get("name")), MappingProxyType(hard), scoped
    )


def _amount(obj: Mapping[str, Any], resource: str, value: object, field: str) -> int:
    if value is None:
        return 0  # Kueue's CRD requires nominalQuota; absent reads as none
    found = amount(resource, value)
    if found is None:
        raise _error(obj, field, f"{value!r} is not a Kubernetes quantity")
    return found


def _limit(obj: Mapping[str, Any], resource: str, value: object, field: str) -> int | None:
    return None if value is None else _amount(obj, resource, value, field)


def _quota_resource(name: str) -> str:
    """The resource a ResourceQuota item counts: `requests.cpu` and `limits.cpu` count cpu."""
    return name.split(".", 1)[1] if name.startswith(("requests.", "limits.")) else name


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _error(obj: Mapping[str, Any], field: str, why: str) -> InventoryError:
    return InventoryError(f"{ref(obj)}: {field}: {why}")
