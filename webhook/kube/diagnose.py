"""A live cluster as a diagnosis's source: Nodes, Pods and FailedScheduling Events,
page by page.

Every Pod is listed, not only the Pending ones: the bound ones hold the capacity a
Pending Pod waits for. Terminal Pods hold nothing and are left on the server
(`status.phase!=Succeeded,status.phase!=Failed`), and of the Events only the
scheduler's FailedScheduling ones are listed (`reason=FailedScheduling`): both field
selectors are served for these types by every apiserver (pkg/registry/core/pod and
event strategy's field sets).
"""

from __future__ import annotations

from collections.abc import Iterator

from kubernetes import client as k8s

from webhook.kube.client import NODES, PODS, KubeError, ResourceRef, list_objects
from webhook.sources.dumps import Sourced, Stage, no_stage

EVENTS = ResourceRef("", "v1", "events", "Event")
_LISTS: tuple[tuple[ResourceRef, str], ...] = (
    (NODES, ""),
    (PODS, "status.phase!=Succeeded,status.phase!=Failed"),
    (EVENTS, "reason=FailedScheduling"),
)


def diagnosis_objects(
    client: k8s.ApiClient,
    *,
    page_size: int,
    errors: list[str],
    stage: Stage = no_stage,
) -> Iterator[Sourced]:
    """Nodes, non-terminal Pods and FailedScheduling Events of every namespace."""
    for resource, selector in _LISTS:
        stage(str(resource))
        try:
            for obj in list_objects(
                client,
                resource=resource,
                namespace=None,
                page_size=page_size,
                field_selector=selector,
            ):
                yield Sourced(obj, "")
        except KubeError as exc:
            errors.append(f"listing {resource}: {exc}")
