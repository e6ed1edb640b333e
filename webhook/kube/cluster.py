"""A live cluster as an audit's source: workload kinds to list, paged lists, Nodes.

Objects come one at a time, so an audit holds one page at once, however large the
cluster. (Dump files are read by `webhook.sources.dumps`.)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import orjson
from kubernetes import client as k8s

from webhook.core.inventory import Inventory
from webhook.core.shapes import KindShape
from webhook.errors import InventoryError
from webhook.kube.client import (
    BUILTIN_WORKLOADS,
    CUSTOM_WORKLOADS,
    NODES,
    KubeApiError,
    KubeError,
    ResourceRef,
    get,
    list_objects,
)
from webhook.sources.dumps import Sourced, Stage, no_stage


def workload_resources(
    client: k8s.ApiClient, custom: Sequence[KindShape], notes: list[str]
) -> list[ResourceRef]:
    """Built-in workload kinds and the custom kinds the policies configure."""
    known = {(r.group, r.kind): r for r in CUSTOM_WORKLOADS}
    out = list(BUILTIN_WORKLOADS)
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
        try:
            for obj in list_objects(
                client, resource=resource, namespace=namespace, page_size=page_size, notes=notes
            ):
                yield Sourced(obj, "")
        except KubeError as exc:
            errors.append(f"listing {resource}: {exc}")


def cluster_inventory(client: k8s.ApiClient, *, page_size: int) -> Inventory:
    nodes = list(list_objects(client, resource=NODES, namespace=None, page_size=page_size))
    try:
        return Inventory.from_nodes(nodes)
    except InventoryError as exc:
        raise InventoryError(f"the cluster's Nodes: {exc}") from None
