"""The project's contact with a live Kubernetes API: credentials, GET requests, paged lists.

Requests go through the official client's real HTTP path (`ApiClient`: auth settings,
token refresh hooks, TLS, proxies, urllib3 pool), but responses are never deserialized
into model objects, which cost milliseconds each: the raw JSON bytes are parsed with
orjson into plain dicts, the form every other module works with. We call
`ApiClient.call_api` with hand-built paths rather than `DynamicClient`: the dynamic
client needs API discovery round trips first and wraps every answer in
`ResourceInstance` objects, and the paths of the few endpoints we need are fixed by the
Kubernetes API conventions anyway.

`list_objects` serves audits; `webhook.kube.node_watch` keeps the Node inventory live.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from kubernetes.config import ConfigException, incluster_config, kube_config

from webhook import __version__
from webhook.errors import GpuAdmissionError

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_KUBECONFIG = "~/.kube/config"
LIST_TIMEOUT = (10.0, 60.0)  # (connect, read) seconds for one page


class KubeError(GpuAdmissionError):
    """The Kubernetes API could not be reached, or answered with an error."""


class KubeConfigError(KubeError):
    """No usable cluster credentials: names the file, context or what is missing."""


class KubeApiError(KubeError):
    """The API server answered with an error status (carried as `status`)."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class ListExpiredError(KubeApiError):
    """A paged list outlived its continue token (HTTP 410 Expired)."""


@dataclass(frozen=True, slots=True)
class ResourceRef:
    """A resource type as the API addresses it: group, version, plural name."""

    group: str  # "" for the core API
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None) -> str:
        """The collection URL path; `namespace` is ignored for cluster-scoped resources."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is not None and self.namespaced:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}/{self.version}" if self.group else self.plural


PODS = ResourceRef("", "v1", "pods", "Pod")
REPLICATION_CONTROLLERS = ResourceRef("", "v1", "replicationcontrollers", "ReplicationController")
POD_TEMPLATES = ResourceRef("", "v1", "podtemplates", "PodTemplate")
DEPLOYMENTS = ResourceRef("apps", "v1", "deployments", "Deployment")
REPLICA_SETS = ResourceRef("apps", "v1", "replicasets", "ReplicaSet")
STATEFUL_SETS = ResourceRef("apps", "v1", "statefulsets", "StatefulSet")
DAEMON_SETS = ResourceRef("apps", "v1", "daemonsets", "DaemonSet")
JOBS = ResourceRef("batch", "v1", "jobs", "Job")
CRON_JOBS = ResourceRef("batch", "v1", "cronjobs", "CronJob")
NODES = ResourceRef("", "v1", "nodes", "Node", namespaced=False)
# DRA supply (resource.k8s.io/v1, GA since Kubernetes 1.34), watched by `serve`.
DEVICE_CLASSES = ResourceRef(
    "resource.k8s.io", "v1", "deviceclasses", "DeviceClass", namespaced=False
)
RESOURCE_SLICES = ResourceRef(
    "resource.k8s.io", "v1", "resourceslices", "ResourceSlice", namespaced=False
)
RESOURCE_CLAIMS = ResourceRef("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim")
RESOURCE_CLAIM_TEMPLATES = ResourceRef(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate"
)
DRA_RESOURCES = (DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS)
# Judged by gpu-dra-guardrails (the admin-access label) and read into the DRA supply.
NAMESPACES = ResourceRef("", "v1", "namespaces", "Namespace", namespaced=False)
# Queues and quotas (gpu-queues): Kueue's objects in its storage version (v0.19: v1beta2),
# and ResourceQuotas. A cluster without Kueue answers 404: an empty list, no error.
RESOURCE_QUOTAS = ResourceRef("", "v1", "resourcequotas", "ResourceQuota")
QUEUE_RESOURCES = (
    ResourceRef("kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor", namespaced=False),
    ResourceRef("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False),
    ResourceRef("kueue.x-k8s.io", "v1beta2", "cohorts", "Cohort", namespaced=False),
    ResourceRef("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue"),
    RESOURCE_QUOTAS,
)

BUILTIN_WORKLOADS: tuple[ResourceRef, ...] = (
    PODS,
    REPLICATION_CONTROLLERS,
    POD_TEMPLATES,
    DEPLOYMENTS,
    REPLICA_SETS,
    STATEFUL_SETS,
    DAEMON_SETS,
    JOBS,
    CRON_JOBS,
)
CUSTOM_WORKLOADS: tuple[ResourceRef, ...] = (
    ResourceRef("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob"),
    ResourceRef("kubeflow.org", "v2beta1", "mpijobs", "MPIJob"),
    ResourceRef("ray.io", "v1", "rayclusters", "RayCluster"),
    ResourceRef("ray.io", "v1", "rayjobs", "RayJob"),
    ResourceRef("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet"),
    ResourceRef("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet"),
)
WORKLOADS = BUILTIN_WORKLOADS + CUSTOM_WORKLOADS
# Groups every conformant cluster serves: a 404 there is an error, not a missing CRD.
_BUILTIN_GROUPS = frozenset({"", "apps", "batch"})


# -- credentials ----------------------------------------------------------------------


POOL_SIZE = 32


def api_client(*, context: str | None = None, kubeconfig: str | None = None) -> k8s.ApiClient:
    """An `ApiClient` for the Pod's service account, or from a kubeconfig.

    In-cluster credentials are used when neither argument is given and the process
    runs in a Pod (KUBERNETES_SERVICE_HOST set, service account token mounted);
    otherwise `kubeconfig`, else $KUBECONFIG, else ~/.kube/config.
    """
    config = k8s.Configuration()
    token = os.path.join(SERVICE_ACCOUNT_DIR, "token")
    if context is None and kubeconfig is None and _in_cluster(token):
        _load_in_cluster(config, token)
    else:
        _load_kubeconfig(config, kubeconfig, context)
    # One connection per watch (serve holds a dozen open: Nodes, DRA, Namespaces, queues)
    # and room for lists beside them; the default is cpu_count * 5.
    config.connection_pool_maxsize = max(config.connection_pool_maxsize or 0, POOL_SIZE)
    api = k8s.ApiClient(configuration=config)
    api.user_agent = f"gpu-admission/{__version__}"
    return api


def _in_cluster(token: str) -> bool:
    return bool(os.environ.get(incluster_config.SERVICE_HOST_ENV_NAME)) and os.path.isfile(token)


def _load_in_cluster(config: k8s.Configuration, token: str) -> None:
    loader = incluster_config.InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=token, cert_filename=os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt")
    )
    try:
        loader.load_and_set(config)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError) as exc:
        msg = f"in-cluster config (service account in {SERVICE_ACCOUNT_DIR}) is unusable: {exc}"
        raise KubeConfigError(msg) from None


def _load_kubeconfig(config: k8s.Configuration, path: str | None, context: str | None) -> None:
    source = "given" if path else "from $KUBECONFIG" if os.environ.get("KUBECONFIG") else "default"
    paths = path or os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
    files = [os.path.expanduser(p) for p in paths.split(os.pathsep) if p]
    if not any(os.path.isfile(f) for f in files):
        raise KubeConfigError(
            f"kubeconfig {paths} ({source}) does not exist; pass a kubeconfig file, set "
            "KUBECONFIG, or run inside a Pod with a service account"
        )
    try:
        # persist_config=False: never write refreshed tokens back into the user's file.
        kube_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=paths, context=context, client_configuration=config, persist_config=False
        )
    except Exception as exc:  # the loader raises anything from KeyError to YAMLError
        raise _kubeconfig_error(paths, context, exc) from None
    if not config.host:
        raise KubeConfigError(f"kubeconfig {paths}: the selected cluster has no server URL")


def _kubeconfig_error(paths: str, context: str | None, exc: Exception) -> KubeConfigError:
    where = f"kubeconfig {paths}"
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return KubeConfigError(
            f"{where} is not valid YAML: {exc.problem} at line {mark.line + 1}, "
            f"column {mark.column + 1}"
        )
    names = _context_names(paths)
    if context is not None and names is not None and context not in names:
        return KubeConfigError(f"{where} has no context {context!r}; it has: {_listing(names)}")
    if isinstance(exc, ConfigException) and "current-context" in str(exc):
        return KubeConfigError(f"{where} sets no current-context; choose one of {_listing(names)}")
    if isinstance(exc, ConfigException):
        return KubeConfigError(f"{where}: {str(exc).removeprefix('Invalid kube-config file. ')}")
    return KubeConfigError(f"{where} is not a usable kubeconfig ({type(exc).__name__}: {exc})")


def _context_names(paths: str) -> list[str] | None:
    """The context names in the kubeconfig file(s), or None if they cannot be read."""
    names: list[str] = []
    try:
        for path in paths.split(os.pathsep):
            if path and os.path.isfile(os.path.expanduser(path)):
                with open(os.path.expanduser(path), encoding="utf-8") as f:
                    doc = yaml.safe_load(f) or {}
                names += [str(c["name"]) for c in doc.get("contexts") or ()]
    except (OSError, yaml.YAMLError, AttributeError, TypeError, KeyError):
        return None
    return names


def _listing(names: Sequence[str] | None) -> str:
    return ", ".join(names) if names else "(none)"


# -- requests -------------------------------------------------------------------------


def get(
    client: k8s.ApiClient,
    path: str,
    query: Sequence[tuple[str, str]] = (),
    *,
    timeout: tuple[float, float] = LIST_TIMEOUT,
) -> urllib3.BaseHTTPResponse:
    """GET `path` through the client; the unread response, or `KubeApiError`.

    The caller reads (or streams) the body and must `close()` a response it abandons.
    """
    try:
        resp = _call(client, path, list(query), timeout)
    except ApiException as exc:  # kubernetes < 37 raises it for non-2xx; all for TLS errors
        if not exc.status:
            raise KubeError(f"cannot reach the Kubernetes API for {path}: {exc.reason}") from None
        raise api_error(exc.status, exc.body, path) from None
    except urllib3.exceptions.HTTPError as exc:
        raise KubeError(f"cannot reach the Kubernetes API for {path}: {exc}") from None
    if not 200 <= resp.status < 300:
        body = resp.data
        resp.release_conn()
        raise api_error(resp.status, body, path)
    return resp


def _call(
    client: k8s.ApiClient,
    path: str,
    query: list[tuple[str, str]],
    timeout: tuple[float, float],
) -> urllib3.BaseHTTPResponse:
    headers = {"Accept": "application/json"}
    if not hasattr(client, "param_serialize"):  # kubernetes 30-36, the older generator
        legacy: Any = client
        resp: urllib3.BaseHTTPResponse = legacy.call_api(
            path,
            "GET",
            query_params=query,
            header_params=headers,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
            _request_timeout=timeout,
        )
        return resp
    # kubernetes >= 37: call_api never deserializes; the REST layer leaves the body unread.
    request = client.param_serialize(
        method="GET",
        resource_path=path,
        query_params=query,
        header_params=headers,
        auth_settings=["BearerToken"],
    )
    resp = client.call_api(*request, _request_timeout=timeout).response
    return resp


def api_error(status: int, body: bytes | str | None, path: str) -> KubeApiError:
    """The error for an HTTP error answer, with the message of its `Status` body."""
    message = status_message(body) or (body[:200] if isinstance(body, str) else "")
    if not message and isinstance(body, bytes):
        message = body[:200].decode("utf-8", "replace")
    cls = ListExpiredError if status == 410 else KubeApiError
    return cls(f"GET {path}: HTTP {status}: {message or 'no message'}", status=status)


def status_message(body: bytes | str | dict[str, Any] | None) -> str:
    """The `message` of a `Status` object (raw or parsed), or "" if it is not one."""
    try:
        status = body if isinstance(body, dict) else orjson.loads(body or b"")
    except orjson.JSONDecodeError:
        return ""
    if not isinstance(status, dict):
        return ""
    return str(status.get("message") or status.get("reason") or "")


# -- lists ----------------------------------------------------------------------------


def list_pages(
    client: k8s.ApiClient,
    *,
    resource: ResourceRef,
    namespace: str | None,
    page_size: int = 500,
    field_selector: str = "",
) -> Iterator[dict[str, Any]]:
    """Each page (a `<Kind>List` dict) of a paged list, items typed as `typed_items` does.

    A 410 on a continue token (the server keeps them for ~5 minutes) raises
    `ListExpiredError` instead of restarting: pages already handed out would come again.
    """
    path = resource.path(namespace)
    token = ""
    while True:
        query = [("limit", str(page_size))] + ([("continue", token)] if token else [])
        if field_selector:
            query.append(("fieldSelector", field_selector))
        try:
            page = _get_list(client, path, query)
        except ListExpiredError:
            if not token:
                raise
            raise ListExpiredError(
                f"the list of {resource} expired between pages: the server keeps a continue "
                "token for about 5 minutes and the next page was asked for later; list again",
                status=410,
            ) from None
        typed_items(page, resource)
        token = str((page.get("metadata") or {}).get("continue") or "")
        yield page
        del page  # hold one page at a time, not two, while the next one loads
        if not token:
            return


def _get_list(client: k8s.ApiClient, path: str, query: Sequence[tuple[str, str]]) -> dict[str, Any]:
    try:
        page = orjson.loads(get(client, path, query).data)
    except orjson.JSONDecodeError as exc:
        raise KubeError(f"GET {path}: the answer is not JSON ({exc})") from None
    if not isinstance(page, dict):
        raise KubeError(f"GET {path}: expected a List object, got {type(page).__name__}")
    return page


def typed_items(page: dict[str, Any], resource: ResourceRef) -> None:
    """Put apiVersion and kind first in each item: list items from the API lack them."""
    api_version = str(page.get("apiVersion") or resource.api_version)
    list_kind = str(page.get("kind") or "")
    kind = list_kind.removesuffix("List") if list_kind.endswith("List") else resource.kind
    page["items"] = [
        {"apiVersion": api_version, "kind": kind, **item} for item in page.get("items") or ()
    ]


def list_objects(
    client: k8s.ApiClient,
    *,
    resource: ResourceRef,
    namespace: str | None,
    page_size: int = 500,
    notes: list[str] | None = None,
    field_selector: str = "",
) -> Iterator[dict[str, Any]]:
    """Every object of `resource` (all namespaces if `namespace` is None), one by one.

    A custom resource the cluster does not serve (404: its CRD is not installed) yields
    nothing and appends a human-readable note to `notes`; a 404 on a built-in API group
    is an error. Memory holds one page of `page_size` objects at a time. A consumer
    that dawdles over one page for more than ~5 minutes gets `ListExpiredError`.
    """
    pages = list_pages(
        client,
        resource=resource,
        namespace=namespace,
        page_size=page_size,
        field_selector=field_selector,
    )
    try:
        first = next(pages)
    except KubeApiError as exc:
        if exc.status != 404 or resource.group in _BUILTIN_GROUPS:
            raise
        why = (
            "resource.k8s.io/v1 is served from Kubernetes 1.34 on, unless the API is off"
            if resource.group == "resource.k8s.io"
            else f"is the {resource.kind} CRD installed?"
        )
        note = f"skipped {resource}: not served by this cluster ({why})"
        log.info("%s", note)
        if notes is not None:
            notes.append(note)
        return
    except StopIteration:  # pragma: no cover - list_pages yields at least one page
        return
    items = first.pop("items")
    del first
    yield from items
    for page in pages:
        items = page.pop("items")
        del page
        yield from items
