"""What a check judges: typed views the engine builds from one object.

- `pod`: a pod spec (a Pod's, a template's, a custom kind's), a `PodView`;
- `workload`: every pod template of the object with its role and replica count, a
  `WorkloadView` (webhook.core.workloads.kinds);
- `claim`: a DRA ResourceClaim or ResourceClaimTemplate, a `ClaimView`;
- `namespace`: a Namespace, a `NamespaceView`.

Each check declares the kinds of target it judges (webhook.core.engine.check); the
engine hands it only those, so a check never sees a kind of object, nor an empty pod
view standing in for something that is not a pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple, get_args

from webhook.core.kit.dicts import api_group, as_dict, str_map
from webhook.core.workloads.kinds import (
    BUILTIN_TEMPLATES,
    WorkloadView,
    builtin,
    configured,
    pod_view,
)
from webhook.core.workloads.kinds import Role as Role  # re-exported: a part of a target
from webhook.core.workloads.pods import PodView
from webhook.core.workloads.shapes import KindShape

TargetKind = Literal["pod", "workload", "claim", "namespace"]
TARGET_KINDS: tuple[TargetKind, ...] = get_args(TargetKind)
# DRA claims (k8s.io/api resource/v1): what `claim` targets are made of.
CLAIM_GROUP = "resource.k8s.io"
CLAIM_KINDS = ("ResourceClaim", "ResourceClaimTemplate")
_POD_KINDS: frozenset[TargetKind] = frozenset({"pod", "workload"})
_CLAIM: frozenset[TargetKind] = frozenset({"claim"})
_NAMESPACE: frozenset[TargetKind] = frozenset({"namespace"})
_NONE: frozenset[TargetKind] = frozenset()


class ClaimView(NamedTuple):
    """A ResourceClaim, or a ResourceClaimTemplate (whose claim is at spec.spec)."""

    obj: Mapping[str, Any]
    kind: str
    labels: Mapping[str, str]


class NamespaceView(NamedTuple):
    obj: Mapping[str, Any]
    name: str
    labels: Mapping[str, str]


Target = PodView | WorkloadView | ClaimView | NamespaceView


class Targets(NamedTuple):
    """The targets of one object: pods and their workload, or a claim, or a Namespace."""

    pods: list[PodView]
    workload: WorkloadView | None = None
    claim: ClaimView | None = None
    namespace: NamespaceView | None = None

    def of(self, kind: TargetKind) -> Sequence[Target]:
        if kind == "pod":
            return self.pods
        found = {"workload": self.workload, "claim": self.claim, "namespace": self.namespace}[kind]
        return () if found is None else (found,)


def target_kinds(
    obj: Mapping[str, Any], *, custom: Sequence[KindShape] = ()
) -> frozenset[TargetKind]:
    """The kinds of target `obj` makes, without building them (what a cache key or a
    filter needs to know of it)."""
    kind = obj.get("kind")
    group = api_group(obj.get("apiVersion"))
    if group == "" and kind in ("Pod", "Namespace"):
        return _POD_KINDS if kind == "Pod" else _NAMESPACE
    if group == CLAIM_GROUP and kind in CLAIM_KINDS:
        return _CLAIM
    if (group, kind) in BUILTIN_TEMPLATES:
        return _POD_KINDS
    for rule in custom:
        if rule.kind == kind and rule.group == group:
            return _POD_KINDS
    return _NONE


def targets_of(
    obj: Mapping[str, Any],
    *,
    custom: Sequence[KindShape] = (),
    tolerations_added: bool = False,
) -> Targets | None:
    """The targets of `obj`; None when its kind makes none (a Service, an unconfigured
    custom resource). `tolerations_added`: the cluster's ExtendedResourceToleration
    plugin will add tolerations to its pods (webhook.core.supply.profiles)."""
    kind = obj.get("kind")
    group = api_group(obj.get("apiVersion"))
    if group == CLAIM_GROUP and kind in CLAIM_KINDS:
        labels = str_map(as_dict(obj.get("metadata")).get("labels"))
        return Targets([], claim=ClaimView(obj, str(kind), labels))
    if kind == "Namespace" and group == "":
        meta = as_dict(obj.get("metadata"))
        name = meta.get("name")
        labels = str_map(meta.get("labels"))
        return Targets([], namespace=NamespaceView(obj, name if type(name) is str else "", labels))
    workload = workload_of(obj, custom=custom)
    if workload is None:
        return None
    if tolerations_added:
        for view in workload.pods:
            view.tolerations_added = True
    return Targets(workload.pods, workload)


def workload_of(obj: Mapping[str, Any], *, custom: Sequence[KindShape] = ()) -> WorkloadView | None:
    """The workload view of a core or configured kind; None for any other kind."""
    kind = obj.get("kind")
    key = (api_group(obj.get("apiVersion")), kind if type(kind) is str else "")
    if key == ("", "Pod"):
        view = pod_view(obj)
        return WorkloadView(obj, "Pod", "", (Role("", view, 1, ()),), [view])
    found = builtin(obj, key)
    if found is not None:
        return found
    for rule in custom:
        if rule.kind == key[1] and rule.group == key[0]:
            return configured(obj, rule)
    return None


def pod_views(obj: Mapping[str, Any], *, custom: Sequence[KindShape] = ()) -> list[PodView] | None:
    """The pod specs of a workload object; None when the kind holds no pods."""
    found = workload_of(obj, custom=custom)
    return None if found is None else found.pods
