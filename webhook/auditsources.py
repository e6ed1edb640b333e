"""Where an audit's objects come from: dump files, or a live cluster through paged lists.

Both yield plain dicts one at a time, so an audit holds one page (or one object of a
file) at once, however large the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from kubernetes import client as k8s

from webhook.dumps import display_name, read_dump
from webhook.errors import InventoryError, ManifestError
from webhook.inventory import Inventory
from webhook.kube import (
    BUILTIN_WORKLOADS,
    CUSTOM_WORKLOADS,
    NODES,
    KubeApiError,
    KubeError,
    ResourceRef,
    get,
    list_objects,
)
from webhook.sources import expand_paths
from webhook.workloads import TemplateRule


@dataclass(frozen=True, slots=True)
class Sourced:
    """An object to audit and where it came from ("file:line", or "" when live)."""

    obj: Any
    location: str


Stage = Callable[[str], None]


def _no_stage(what: str) -> None:
    pass


def from_files(
    paths: Sequence[str],
    *,
    errors: list[str],
    namespace: str | None = None,
    stage: Stage = _no_stage,
) -> Iterator[Sourced]:
    """Objects of dump files (directories walked). A file that breaks off is recorded in
    `errors` and the next file is read: one bad file must not hide the others."""
    for name in expand_paths(paths):
        source = display_name(name)
        stage(source)
        try:
            for item in read_dump(name):
                if namespace is None or _namespace(item.value) == namespace:
                    yield Sourced(item.value, f"{source}:{item.line}")
        except ManifestError as exc:
            errors.append(str(exc))


def _namespace(obj: Any) -> str | None:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return str(meta.get("namespace") or "") if isinstance(meta, Mapping) else None


def workload_resources(
    client: k8s.ApiClient, custom: Sequence[TemplateRule], notes: list[str]
) -> list[ResourceRef]:
    """Built-in workload kinds and the custom kinds the policies configure."""
    known = {(r.group, r.kind): r for r in CUSTOM_WORKLOADS}
    out = list(BUILTIN_WORKLOADS)
    for rule in custom:
        ref = known.get((rule.group, rule.kind)) or discover(client, rule, notes)
        if ref is not None and ref not in out:
            out.append(ref)
    return out


def discover(client: k8s.ApiClient, rule: TemplateRule, notes: list[str]) -> ResourceRef | None:
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
    stage: Stage = _no_stage,
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
