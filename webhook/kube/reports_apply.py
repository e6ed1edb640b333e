"""Writes OpenReports into the cluster: each report created or updated, the stale deleted.

`gpu-admission audit -o openreports --apply`. Each report goes out as one server-side
apply (field manager `gpu-admission`, forced, strict field validation): one request
creates the object or updates it in place, so a second run updates instead of
duplicating, and no read-modify-write can race another writer. The reports an earlier
run wrote (label `app.kubernetes.io/managed-by=gpu-admission`) are listed first, in
pages; within the namespaces this audit covered, those it no longer writes are deleted
(a namespace whose workloads are gone, a `gpu-admission-2` part no longer needed).

The official client's `CustomObjectsApi` does the requests: custom objects come back as
plain dicts, never as model objects, and there are only a few of them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from webhook.kube.client import KubeApiError, KubeError, ResourceRef, status_message

FIELD_MANAGER = "gpu-admission"
REPORTS = ResourceRef("openreports.io", "v1alpha1", "reports", "Report")
CLUSTER_REPORTS = ResourceRef(
    "openreports.io", "v1alpha1", "clusterreports", "ClusterReport", namespaced=False
)
_BY_KIND = {r.kind: r for r in (REPORTS, CLUSTER_REPORTS)}

Key = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name


@dataclass
class Applied:
    """What `apply_reports` did, each object as `Kind namespace/name`."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    def lines(self) -> Iterator[str]:
        for verb, names in (("created", self.created), ("updated", self.updated),
                            ("deleted", self.deleted)):  # fmt: skip
            for name in names:
                yield f"{name} {verb}"


def apply_reports(
    client: k8s.ApiClient,
    *,
    reports: Sequence[dict[str, Any]],
    selector: str,
    namespace: str | None,
    page_size: int,
    prune: bool,
) -> Applied:
    """Create or update `reports`; with `prune`, delete the earlier ones (those matching
    `selector`, in `namespace` or everywhere) that `reports` does not name."""
    api = k8s.CustomObjectsApi(client)
    existing = set(_existing(api, selector=selector, namespace=namespace, page_size=page_size))
    applied = Applied()
    written: set[Key] = set()
    for report in reports:
        key = _key(report)
        _apply(api, report, key)
        written.add(key)
        (applied.updated if key in existing else applied.created).append(_name(key))
    if prune:
        for key in sorted(existing - written):
            _delete(api, key)
            applied.deleted.append(_name(key))
    return applied


def _existing(
    api: k8s.CustomObjectsApi, *, selector: str, namespace: str | None, page_size: int
) -> Iterator[Key]:
    kinds = [REPORTS] if namespace is not None else [REPORTS, CLUSTER_REPORTS]
    for resource in kinds:
        for item in _list(api, resource, selector=selector, namespace=namespace, limit=page_size):
            meta = item.get("metadata") or {}
            yield resource.kind, str(meta.get("namespace") or ""), str(meta["name"])


def _list(
    api: k8s.CustomObjectsApi,
    resource: ResourceRef,
    *,
    selector: str,
    namespace: str | None,
    limit: int,
) -> Iterator[dict[str, Any]]:
    """Every object of a paged list, one page in memory at a time."""
    token = ""
    while True:
        query: dict[str, Any] = {"label_selector": selector, "limit": limit}
        if token:
            query["_continue"] = token
        page: Any  # the client types a custom object list as `object`: it is a dict
        with _errors(f"GET {resource.path(namespace)}", resource):
            if namespace is not None and resource.namespaced:
                page = api.list_namespaced_custom_object(
                    resource.group, resource.version, namespace, resource.plural, **query
                )
            else:
                page = api.list_cluster_custom_object(
                    resource.group, resource.version, resource.plural, **query
                )
        yield from page.get("items") or ()
        token = str((page.get("metadata") or {}).get("continue") or "")
        if not token:
            return


def _apply(api: k8s.CustomObjectsApi, report: dict[str, Any], key: Key) -> None:
    kind, namespace, name = key
    resource = _BY_KIND[kind]
    options: dict[str, Any] = {
        "field_manager": FIELD_MANAGER,
        "force": True,
        # An unknown field is an error, not silently dropped: the report is what we wrote.
        "field_validation": "Strict",
        "_content_type": "application/apply-patch+yaml",
    }
    with _errors(f"apply {_name(key)}", resource):
        if namespace:
            api.patch_namespaced_custom_object(
                resource.group, resource.version, namespace, resource.plural, name, report,
                **options,
            )  # fmt: skip
        else:
            api.patch_cluster_custom_object(
                resource.group, resource.version, resource.plural, name, report, **options
            )


def _delete(api: k8s.CustomObjectsApi, key: Key) -> None:
    kind, namespace, name = key
    resource = _BY_KIND[kind]
    try:
        with _errors(f"delete {_name(key)}", resource):
            if namespace:
                api.delete_namespaced_custom_object(
                    resource.group, resource.version, namespace, resource.plural, name
                )
            else:
                api.delete_cluster_custom_object(
                    resource.group, resource.version, resource.plural, name
                )
    except KubeApiError as exc:
        if exc.status != 404:  # deleted meanwhile: what we wanted
            raise


def _key(report: dict[str, Any]) -> Key:
    meta = report["metadata"]
    return str(report["kind"]), str(meta.get("namespace") or ""), str(meta["name"])


def _name(key: Key) -> str:
    kind, namespace, name = key
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


@contextlib.contextmanager
def _errors(action: str, resource: ResourceRef) -> Iterator[None]:
    """API and connection failures as one-line `KubeError`s that say what to do."""
    try:
        yield
    except ApiException as exc:
        if not exc.status:
            raise KubeError(f"cannot reach the Kubernetes API to {action}: {exc.reason}") from None
        if exc.status == 404 and _no_such_resource(exc.body):
            raise KubeApiError(
                f"{action}: the cluster does not serve {resource}: install the OpenReports "
                "CRDs first (see docs/deploy.md)",
                status=404,
            ) from None
        message = status_message(exc.body) or str(exc.reason)
        raise KubeApiError(f"{action}: HTTP {exc.status}: {message}", status=exc.status) from None
    except urllib3.exceptions.HTTPError as exc:
        raise KubeError(f"cannot reach the Kubernetes API to {action}: {exc}") from None


def _no_such_resource(body: bytes | str | None) -> bool:
    """A 404 for the resource type (no CRD), not for one object: its Status names no object."""
    try:
        status = orjson.loads(body or b"")
    except orjson.JSONDecodeError:
        return True  # the bare "404 page not found" of an unknown API path
    details = status.get("details") if isinstance(status, dict) else None
    return not (isinstance(details, dict) and details.get("name"))
