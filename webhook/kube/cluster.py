"""A live cluster as an audit's source: workload kinds to list, paged lists, Nodes.

Objects come one at a time, so an audit holds one page at once, however large the
cluster. (Dump files are read by `webhook.sources.dumps`.)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import orjson
from kubernetes import client as k8s

from webhook.core.supply.inventory import Inventory
from webhook.core.workloads.shapes import KindShape
from webhook.errors import InventoryError
from webhook.kube.client import (
    BUILTIN_WORKLOADS,
    CUSTOM_WORKLOADS,
    DRA_RESOURCES,
    NAMESPACES,
    NODES,
    QUEUE_RESOURCES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    KubeApiError,
    KubeError,
    ResourceRef,
    get,
    list_objects,
)
from webhook.sources.dumps import Sourced, Stage, no_stage
from webhook.sources.files import dra_supply, queue_supply, unreadable_notes

# Judged as themselves besides the workloads: DRA claims and templates (gpu-dra-claims,
# gpu-dra-guardrails), Namespaces (the admin-access label), Kueue's queue objects and
# ResourceQuotas (gpu-queues). A cluster that does not serve resource.k8s.io or Kueue
# answers 404: a note.
SUBJECTS_BESIDE_WORKLOADS = (
    RESOURCE_CLAIMS,
    RESOURCE_CLAIM_TEMPLATES,
    NAMESPACES,
    *QUEUE_RESOURCES,
)


def workload_resources(
    client: k8s.ApiClient, custom: Sequence[KindShape], notes: list[str]
) -> list[ResourceRef]:
    """Built-in workload kinds, DRA claims, Namespaces and the custom kinds the policies
    configure."""
    known = {(r.group, r.kind): r for r in CUSTOM_WORKLOADS}
    out = [*BUILTIN_WORKLOADS, *SUBJECTS_BESIDE_WORKLOADS]
    for rule in custom:
        ref = known.get((rule.group, rule.kind)) or discover(client, rule, notes)
        if ref is not None and ref not in out:
            out.append(ref)
    return out


def discover(client: k8s.ApiClient, rule: KindShape, notes: list[str]) -> ResourceRef | None:
    """The plural and version of a custom kind from API discovery; None (with a note)
    when the cluster does not serve it."""
    try:
        group = _get_json(client, f"/apis/{rule.group}")
        version = str(group.get("preferredVersion", {}).get("version") or "")
        listing = _get_json(client, f"/apis/{rule.group}/{version}")
    except KubeApiError as exc:
        if exc.status != 404:
            raise
        notes.append(f"skipped {rule.kind}.{rule.group}: the cluster does not serve that group")
        return None
    for res in listing.get("resources") or ():
        if res.get("kind") == rule.kind and "/" not in str(res.get("name")):
            namespaced = bool(res.get("namespaced", True))
            return ResourceRef(rule.group, version, res["name"], rule.kind, namespaced)
    notes.append(f"skipped {rule.kind}.{rule.group}/{version}: no such kind in the group")
    return None


def _get_json(client: k8s.ApiClient, path: str) -> dict[str, Any]:
    resp = get(client, path)
    try:
        body = orjson.loads(resp.data)
    except orjson.JSONDecodeError:
        raise KubeError(f"GET {path}: the answer is not JSON") from None
    return body if isinstance(body, dict) else {}


def from_cluster(
    client: k8s.ApiClient,
    *,
    resources: Sequence[ResourceRef],
    namespace: str | None,
    page_size: int,
    notes: list[str],
    errors: list[str],
    stage: Stage = no_stage,
) -> Iterator[Sourced]:
    """Every object of `resources`, page by page; a failing resource type is recorded
    in `errors` and the audit goes on with the next one."""
    for resource in resources:
        stage(str(resource))
        # An audit of one namespace judges that Namespace, not every one (a
        # cluster-scoped list ignores the namespace it is asked for).
        only = namespace if resource == NAMESPACES else None
        try:
            for obj in list_objects(
                client, resource=resource, namespace=namespace, page_size=page_size, notes=notes
            ):
                if only is None or _name(obj) == only:
                    yield Sourced(obj, "")
        except KubeError as exc:
            errors.append(f"listing {resource}: {exc}")


def _name(obj: Any) -> object:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta.get("name") if isinstance(meta, dict) else None


def cluster_inventory(
    client: k8s.ApiClient, *, page_size: int, notes: list[str] | None = None
) -> Inventory:
    """The cluster's Nodes, and its DRA supply (classes, slices, claims, templates and
    the Namespaces' admin-access labels) where the API serves resource.k8s.io. The
    supply's lists are best effort: one that fails is a note (the claims listed as
    subjects say, as errors, what the audit could not read)."""
    nodes = list(list_objects(client, resource=NODES, namespace=None, page_size=page_size))
    try:
        inventory = Inventory.from_nodes(nodes)
    except InventoryError as exc:
        raise InventoryError(f"the cluster's Nodes: {exc}") from None
    dra: list[dict[str, Any]] = []
    for resource in (*DRA_RESOURCES, NAMESPACES):
        try:
            # 404 (no resource.k8s.io) yields nothing: the subjects' listing notes it.
            dra.extend(list_objects(client, resource=resource, namespace=None, page_size=page_size))
        except KubeError as exc:
            if notes is not None:
                notes.append(f"DRA supply without {resource}: {exc}")
    inventory = inventory.with_queues(queue_supply(_queue_objects(client, page_size, notes)))
    if notes is not None:
        notes += unreadable_notes(inventory)
    try:
        # Namespaces' labels join even without DRA: tenants and queues select by them.
        return inventory.with_dra(dra_supply(dra))
    except InventoryError as exc:
        raise InventoryError(f"the cluster's DRA objects: {exc}") from None


def _queue_objects(
    client: k8s.ApiClient, page_size: int, notes: list[str] | None
) -> Iterator[dict[str, Any]]:
    """Kueue's queue objects and the ResourceQuotas; a cluster without Kueue lists none
    (404), and a list that fails is a note: the jobs it would judge are not judged."""
    for resource in QUEUE_RESOURCES:
        try:
            yield from list_objects(client, resource=resource, namespace=None, page_size=page_size)
        except KubeError as exc:
            if notes is not None:
                notes.append(f"queue supply without {resource}: {exc}")
