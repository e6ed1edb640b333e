"""A live cluster as a diagnosis's source: Nodes, Pods and FailedScheduling Events,
and the DRA objects (resource.k8s.io/v1) where the API serves them, page by page.

Every Pod is listed, not only the Pending ones: the bound ones hold the capacity a
Pending Pod waits for. Terminal Pods hold nothing and are left on the server
(`status.phase!=Succeeded,status.phase!=Failed`), and of the Events only the
scheduler's FailedScheduling ones are listed (`reason=FailedScheduling`): both field
selectors are served for these types by every apiserver (pkg/registry/core/pod and
event strategy's field sets). A cluster that does not serve resource.k8s.io/v1 (before
Kubernetes 1.34, or with the API switched off) answers 404: a note, not an error, and
the claims are then not evaluated. Kueue's Workloads and queue objects
(kueue.x-k8s.io/v1beta2, its storage version since v0.16) come last: a cluster without
Kueue answers 404 for Workloads, one note, and the queue objects are not asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kubernetes import client as k8s

from webhook.kube.client import (
    DRA_RESOURCES,
    NODES,
    PODS,
    QUEUE_RESOURCES,
    KubeError,
    ResourceRef,
    list_objects,
)
from webhook.sources.dumps import Sourced, Stage, no_stage

EVENTS = ResourceRef("", "v1", "events", "Event")
_LISTS: tuple[tuple[ResourceRef, str], ...] = (
    (NODES, ""),
    (PODS, "status.phase!=Succeeded,status.phase!=Failed"),
    (EVENTS, "reason=FailedScheduling"),
)
DRA_LISTS: tuple[ResourceRef, ...] = DRA_RESOURCES
WORKLOADS = ResourceRef("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
# The queue objects a queued job is judged against (not ResourceQuotas: diagnose reads
# Kueue's own account of quota).
KUEUE_LISTS = (WORKLOADS, *(r for r in QUEUE_RESOURCES if r.group == WORKLOADS.group))


def diagnosis_objects(
    client: k8s.ApiClient,
    *,
    page_size: int,
    errors: list[str],
    notes: list[str],
    listed: Callable[[str], None],
    stage: Stage = no_stage,
) -> Iterator[Sourced]:
    """Nodes, non-terminal Pods and FailedScheduling Events of every namespace, then the
    DRA objects, then Kueue's; `listed(kind)` is told of each DRA kind the API served."""
    for resource, selector in (*_LISTS, *((r, "") for r in DRA_LISTS)):
        stage(str(resource))
        skipped = len(notes)
        try:
            for obj in list_objects(
                client,
                resource=resource,
                namespace=None,
                page_size=page_size,
                field_selector=selector,
                notes=notes,
            ):
                yield Sourced(obj, "")
        except KubeError as exc:
            errors.append(f"listing {resource}: {exc}")
            continue
        if resource in DRA_LISTS and len(notes) == skipped:
            listed(resource.kind)
    yield from _kueue(client, page_size=page_size, notes=notes, stage=stage)


def _kueue(
    client: k8s.ApiClient, *, page_size: int, notes: list[str], stage: Stage
) -> Iterator[Sourced]:
    for resource in KUEUE_LISTS:
        stage(str(resource))
        missing: list[str] = []
        try:
            for obj in list_objects(
                client, resource=resource, namespace=None, page_size=page_size, notes=missing
            ):
                yield Sourced(obj, "")
        except KubeError as exc:  # RBAC without Kueue's group, say: the Pods still count
            notes.append(f"jobs held by Kueue not diagnosed: listing {resource}: {exc}")
            return
        if missing and resource is WORKLOADS:
            notes.append(f"Kueue is not installed ({resource} is not served): no job is queued")
            return
        notes += missing
