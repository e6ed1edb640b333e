"""What a check judges: typed views the engine builds from one object.

- `pod`: a pod spec (a Pod's, a template's, a custom kind's), a `PodView`;
- `workload`: every pod template of the object with its role and replica count, a
  `WorkloadView` (webhook.core.workloads.kinds);
- `claim`: a DRA ResourceClaim or ResourceClaimTemplate, a `ClaimView`;
- `namespace`: a Namespace, a `NamespaceView`;
- `queue`: a Kueue queue object (ResourceFlavor, ClusterQueue, LocalQueue, Cohort) or a
  ResourceQuota, a `QueueView`.

Each check declares the kinds of target it judges (webhook.core.engine.check); the
engine hands it only those, so a check never sees a kind of object, nor an empty pod
view standing in for something that is not a pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple, get_args

from webhook.core.kit.dicts import api_group, as_dict, str_map
from webhook.core.workloads.kinds import Role as Role  # re-exported: a part of a target
from webhook.core.workloads.kinds import (
    WorkloadView,
    builtin,
    builtin_pods,
    configured,
    pod_view,
    template_paths,
)
from webhook.core.workloads.pods import PodView
from webhook.core.workloads.shapes import KindShape, PodShape

TargetKind = Literal["pod", "workload", "claim", "namespace", "queue"]
TARGET_KINDS: tuple[TargetKind, ...] = get_args(TargetKind)
# DRA claims (k8s.io/api resource/v1): what `claim` targets are made of.
CLAIM_GROUP = "resource.k8s.io"
CLAIM_KINDS = ("ResourceClaim", "ResourceClaimTemplate")
# What an object makes, one of these: pod specs and their workload, a claim, a Namespace.
POD_TARGETS: frozenset[TargetKind] = frozenset({"pod", "workload"})
CLAIM_TARGETS: frozenset[TargetKind] = frozenset({"claim"})
NAMESPACE_TARGETS: frozenset[TargetKind] = frozenset({"namespace"})
QUEUE_TARGETS: frozenset[TargetKind] = frozenset({"queue"})
NO_TARGETS: frozenset[TargetKind] = frozenset()
KIND_SETS = (POD_TARGETS, CLAIM_TARGETS, NAMESPACE_TARGETS, QUEUE_TARGETS)
# Kueue's queue objects (kubernetes-sigs/kueue apis/kueue) and core/v1 ResourceQuota:
# what `queue` targets are made of. Any version of Kueue's group makes one (one that
# Kueue does not serve is judged invalid, not skipped).
QUEUE_GROUP = "kueue.x-k8s.io"
QUEUE_KINDS = ("ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort")
_new = tuple.__new__


class ClaimView(NamedTuple):
    """A ResourceClaim, or a ResourceClaimTemplate (whose claim is at spec.spec)."""

    obj: Mapping[str, Any]
    kind: str
    labels: Mapping[str, str]


class NamespaceView(NamedTuple):
    obj: Mapping[str, Any]
    name: str
    labels: Mapping[str, str]


class QueueView(NamedTuple):
    obj: Mapping[str, Any]
    kind: str
    labels: Mapping[str, str]


Target = PodView | WorkloadView | ClaimView | NamespaceView | QueueView


class Targets(NamedTuple):
    """The targets of one object: pods and their workload, or a claim, or a Namespace.

    `kinds` are the kinds of target the object makes; the workload view of a Pod or a
    core controller is built only when asked for (no shipped check judges workloads,
    and every admission request would pay for it)."""

    kinds: frozenset[TargetKind]
    pods: list[PodView]
    workload: WorkloadView | None = None
    claim: ClaimView | None = None
    namespace: NamespaceView | None = None
    queue: QueueView | None = None
    unmatched: tuple[tuple[KindShape, PodShape], ...] = ()  # configured paths that found nothing

    def of(self, kind: TargetKind) -> Sequence[Target]:
        if kind == "pod":
            return self.pods
        found: Target | None = (
            self.workload
            if kind == "workload"
            else self.claim
            if kind == "claim"
            else self.namespace
            if kind == "namespace"
            else self.queue
        )
        return () if found is None else (found,)

    def among(self, kinds: Sequence[TargetKind]) -> list[Target]:
        """The targets of these kinds, in this order."""
        out: list[Target] = []
        for kind in kinds:
            out.extend(self.of(kind))
        return out


def target_kinds(
    obj: Mapping[str, Any], *, custom: Sequence[KindShape] = ()
) -> frozenset[TargetKind]:
    """The kinds of target `obj` makes, without building them (what a cache key or a
    filter needs to know of it)."""
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if kind == "Pod" and api_version == "v1":  # nearly every admission request
        return POD_TARGETS
    if template_paths(api_version, kind) is not None:
        return POD_TARGETS
    group = api_group(api_version)
    if group == "" and kind in ("Pod", "Namespace"):
        return POD_TARGETS if kind == "Pod" else NAMESPACE_TARGETS
    if group == CLAIM_GROUP and kind in CLAIM_KINDS:
        return CLAIM_TARGETS
    if (group == QUEUE_GROUP and kind in QUEUE_KINDS) or (group == "" and kind == "ResourceQuota"):
        return QUEUE_TARGETS
    for rule in custom:
        if rule.kind == kind and rule.group == group:
            return POD_TARGETS
    return NO_TARGETS


def targets_of(
    obj: Mapping[str, Any],
    *,
    custom: Sequence[KindShape] = (),
    tolerations_added: bool = False,
    workload: bool = True,
) -> Targets | None:
    """The targets of `obj`; None when its kind makes none (a Service, an unconfigured
    custom resource). `tolerations_added`: the cluster's ExtendedResourceToleration
    plugin will add tolerations to its pods (webhook.core.supply.profiles).
    `workload`: build the workload view of a Pod or a core controller too."""
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if kind == "Pod" and api_version == "v1":  # nearly every admission request: no parsing
        return _pod_targets(obj, tolerations_added, workload)
    patterns = template_paths(api_version, kind)
    key = (api_group(api_version), kind if type(kind) is str else "")
    if key == ("", "Pod"):
        return _pod_targets(obj, tolerations_added, workload)
    if patterns is not None:
        pods = builtin_pods(obj, patterns)
        if tolerations_added:
            for view in pods:
                view.tolerations_added = True
        whole = builtin(obj, key, pods) if workload else None
        return _new(Targets, (POD_TARGETS, pods, whole, None, None, None, ()))  # _pod_targets
    if key[0] == CLAIM_GROUP and key[1] in CLAIM_KINDS:
        labels = str_map(as_dict(obj.get("metadata")).get("labels"))
        return Targets(CLAIM_TARGETS, [], claim=ClaimView(obj, key[1], labels))
    if key == ("", "Namespace"):
        meta = as_dict(obj.get("metadata"))
        name = meta.get("name")
        labels = str_map(meta.get("labels"))
        view_ns = NamespaceView(obj, name if type(name) is str else "", labels)
        return Targets(NAMESPACE_TARGETS, [], namespace=view_ns)
    if (key[0] == QUEUE_GROUP and key[1] in QUEUE_KINDS) or key == ("", "ResourceQuota"):
        labels = str_map(as_dict(obj.get("metadata")).get("labels"))
        return Targets(QUEUE_TARGETS, [], queue=QueueView(obj, key[1], labels))
    for rule in custom:
        if rule.kind == key[1] and rule.group == key[0]:
            found = configured(obj, rule)
            if tolerations_added:
                for view in found.pods:
                    view.tolerations_added = True
            return Targets(POD_TARGETS, found.pods, found, unmatched=found.unmatched)
    return None


def _pod_targets(obj: Mapping[str, Any], tolerations_added: bool, workload: bool) -> Targets:
    view = pod_view(obj)
    view.tolerations_added = tolerations_added
    whole = WorkloadView(obj, "Pod", "", (Role("", view, 1, ()),), [view]) if workload else None
    # Targets(POD_TARGETS, [view], whole) at a tuple's cost: every admitted Pod makes one.
    return _new(Targets, (POD_TARGETS, [view], whole, None, None, None, ()))


def workload_of(obj: Mapping[str, Any], *, custom: Sequence[KindShape] = ()) -> WorkloadView | None:
    """The workload view of a core or configured kind; None for any other kind."""
    found = targets_of(obj, custom=custom)
    return None if found is None else found.workload


def pod_views(obj: Mapping[str, Any], *, custom: Sequence[KindShape] = ()) -> list[PodView] | None:
    """The pod specs of a workload object; None when the kind holds no pods."""
    found = targets_of(obj, custom=custom, workload=False)
    return None if found is None or "pod" not in found.kinds else found.pods
