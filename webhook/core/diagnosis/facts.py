"""The facts a diagnosis reads, parsed from Node, Pod and Event objects.

Only what a finding can cite is kept: a Node's labels, taints, allocatable, whether it
is cordoned and Ready; a bound Pod's requests (summed per node, so 100,000 Pods cost a
few numbers per node) and, for GPU resources, who holds them; the Pods of the NVIDIA
device plugin and MIG manager per node; a Pending Pod whole; the latest
FailedScheduling event per Pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from webhook.core.access.model import AccessRules, PodAccess, pod_access
from webhook.core.kit.dicts import as_dict, as_list, str_map
from webhook.core.supply.inventory import Node, parse_node
from webhook.core.workloads.podrequests import Want, pod_requests
from webhook.core.workloads.pods import PodView
from webhook.core.workloads.units import amount

TERMINAL_PHASES = ("Succeeded", "Failed")

# Pods of the node daemons a finding can name, by label (the GPU Operator's DaemonSets,
# the device plugin's Helm chart and static manifest, GKE's plugin).
_DAEMON_LABELS: tuple[tuple[str, str, str], ...] = (
    ("app", "nvidia-device-plugin-daemonset", "device-plugin"),
    ("app.kubernetes.io/name", "nvidia-device-plugin", "device-plugin"),
    ("name", "nvidia-device-plugin-ds", "device-plugin"),
    ("k8s-app", "nvidia-gpu-device-plugin", "device-plugin"),
    ("app", "nvidia-mig-manager", "mig-manager"),
)


@dataclass(frozen=True, slots=True)
class NodeFacts:
    node: Node  # the core's view: labels, taints, extended resources with a count
    allocatable: Mapping[str, int]  # every resource, zeros too, in units.amount's units
    unschedulable: bool
    ready: str | None  # the Ready condition's status; None when the Node has none
    ready_reason: str

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def labels(self) -> Mapping[str, str]:
        return self.node.labels


@dataclass(frozen=True, slots=True)
class Holder:
    """A bound Pod that holds GPU resources on a node."""

    pod: str  # namespace/name
    owner: str
    priority: int
    amounts: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class DaemonPod:
    """A device plugin or MIG manager Pod on a node, and whether it runs."""

    role: str  # device-plugin | mig-manager
    pod: str  # namespace/name
    phase: str
    ready: bool
    reason: str  # why a container waits (CrashLoopBackOff, ...), "" if none

    @property
    def running(self) -> bool:
        return self.phase == "Running" and self.ready

    def state(self) -> str:
        text = self.phase or "no phase"
        if self.phase == "Running" and not self.ready:
            text += ", not ready"
        return f"{text} ({self.reason})" if self.reason else text


@dataclass(frozen=True, slots=True)
class PendingPod:
    ref: str  # namespace/name
    uid: str
    owner: str  # "Kind/name" of the controller, "" if none
    created: datetime | None
    priority: int
    preempts: bool  # preemptionPolicy is not Never
    gates: tuple[str, ...]
    want: Want
    spec: Mapping[str, Any]
    access: PodAccess
    nominated: str = ""  # status.nominatedNodeName: preemption under way for it there
    view: PodView | None = None  # the pod spec with its labels, as the checks read it

    @property
    def asks_for_gpus(self) -> bool:
        return bool(self.access.requests or self.access.grants)


@dataclass(frozen=True, slots=True)
class SchedulerEvent:
    message: str
    time: datetime | None
    count: int


def node_facts(obj: Mapping[str, Any], *, index: int = 0) -> NodeFacts:
    node = parse_node(obj, index=index)
    status = as_dict(obj.get("status"))
    allocatable = {}
    for resource, raw in as_dict(status.get("allocatable")).items():
        value = amount(str(resource), raw)
        if value is not None:
            allocatable[str(resource)] = value
    ready, reason = None, ""
    for condition in as_list(status.get("conditions")):
        condition = as_dict(condition)
        if condition.get("type") == "Ready":
            ready = str(condition.get("status") or "Unknown")
            reason = str(condition.get("reason") or "")
    unschedulable = as_dict(obj.get("spec")).get("unschedulable") is True
    return NodeFacts(node, allocatable, unschedulable, ready, reason)


def pod_ref(obj: Mapping[str, Any]) -> str:
    meta = as_dict(obj.get("metadata"))
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def owner_of(meta: Mapping[str, Any]) -> str:
    for ref in as_list(meta.get("ownerReferences")):
        ref = as_dict(ref)
        if ref.get("controller") is True:
            return f"{ref.get('kind', '')}/{ref.get('name', '')}"
    return ""


def priority_of(spec: Mapping[str, Any]) -> int:
    value = spec.get("priority")
    return value if type(value) is int else 0


def daemon_pod(obj: Mapping[str, Any]) -> DaemonPod | None:
    """The Pod as a device plugin or MIG manager on its node, or None if it is neither."""
    meta = as_dict(obj.get("metadata"))
    labels = as_dict(meta.get("labels"))
    if not labels:
        return None
    role = next((r for k, v, r in _DAEMON_LABELS if labels.get(k) == v), None)
    if role is None:
        return None
    status = as_dict(obj.get("status"))
    ready = any(
        as_dict(c).get("type") == "Ready" and as_dict(c).get("status") == "True"
        for c in as_list(status.get("conditions"))
    )
    reason = ""
    for c in as_list(status.get("containerStatuses")):
        waiting = as_dict(as_dict(as_dict(c).get("state")).get("waiting"))
        if waiting.get("reason"):
            reason = str(waiting["reason"])
            break
    return DaemonPod(role, pod_ref(obj), str(status.get("phase") or ""), ready, reason)


def pending_pod(obj: Mapping[str, Any], *, rules: AccessRules) -> PendingPod:
    meta = as_dict(obj.get("metadata"))
    spec = as_dict(obj.get("spec"))
    view = PodView(
        spec,
        ("spec",),
        str_map(meta.get("labels")),
        str_map(meta.get("annotations")),
        ("metadata",),
    )
    gates = tuple(str(as_dict(g).get("name", "")) for g in as_list(spec.get("schedulingGates")))
    return PendingPod(
        ref=pod_ref(obj),
        uid=str(meta.get("uid") or ""),
        owner=owner_of(meta),
        created=parse_time(meta.get("creationTimestamp")),
        priority=priority_of(spec),
        preempts=spec.get("preemptionPolicy") != "Never",
        gates=gates,
        want=pod_requests(spec),
        spec=spec,
        access=pod_access(view, rules=rules),
        nominated=str(as_dict(obj.get("status")).get("nominatedNodeName") or ""),
        view=view,
    )


def scheduler_event(obj: Mapping[str, Any]) -> tuple[str, str, SchedulerEvent] | None:
    """(Pod ref, Pod uid, event) of a FailedScheduling Event, core/v1 or events.k8s.io/v1;
    None for any other event."""
    if obj.get("reason") != "FailedScheduling":
        return None
    target = as_dict(obj.get("involvedObject") or obj.get("regarding"))
    if target.get("kind", "Pod") != "Pod":
        return None
    meta = as_dict(obj.get("metadata"))
    namespace = target.get("namespace") or meta.get("namespace") or "default"
    ref = f"{namespace}/{target.get('name', '')}"
    message = obj.get("message") if "message" in obj else obj.get("note")
    series = as_dict(obj.get("series"))
    times = [
        parse_time(obj.get(field))
        for field in ("lastTimestamp", "deprecatedLastTimestamp", "eventTime", "firstTimestamp")
    ]
    times.append(parse_time(series.get("lastObservedTime")))
    known = [t for t in times if t is not None]
    count = series.get("count") or obj.get("count") or 1
    event = SchedulerEvent(
        str(message or ""), max(known) if known else None, count if type(count) is int else 1
    )
    return ref, str(target.get("uid") or ""), event


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 timestamp as the API writes it (`2026-12-01T12:42:15.137143Z`)."""
    if type(value) is not str or not value:
        return None
    try:
        found = datetime.fromisoformat(value)
    except ValueError:
        return None
    # The API writes UTC; a hand-made dump without an offset means it too.
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)
