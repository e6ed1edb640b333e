"""A live view of the cluster's Nodes (or another resource: DeviceClasses,
ResourceSlices, claim templates): one paged list, then a watch, in a daemon thread.

Admission requests never call the API: the server reads the inventory that the
callbacks last built. The watcher lists the Nodes, watches from the list's
resourceVersion (with bookmarks) and applies each event to a name -> Node map. After a
list it calls `on_change` with every Node; after each batch of events that arrived
together (the apiserver flushes events that are queued together as one chunk) it calls
`on_update` with just the Nodes the batch changed (name -> object, None if deleted),
so the cost of an event is one node's, not the cluster's; without an `on_update`,
`on_change` gets every Node then too. A 410 Gone (HTTP or ERROR event: the
resourceVersion is older than the server's history) means re-list.
A broken connection or an HTTP error keeps the last Nodes and reconnects from the last
resourceVersion, with jittered exponential backoff.

The watch request has a long read timeout, not a short one: urllib3 cannot resume a
chunked body after a read timeout (the stream is over and its unread events are lost),
so a short timeout would reconnect every few seconds on a quiet cluster. `stop()`
instead shuts the socket down under the blocked read, which returns at once.

A resource the cluster does not serve (404 on the list: resource.k8s.io/v1 before
Kubernetes 1.34, or with the API group off) is no error: the watcher delivers an empty
list, counts as synced, and lists again after the longest backoff, so DRA turned on
later is picked up. Objects of a namespaced resource are keyed `namespace/name`.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
import urllib3
from kubernetes import client as k8s

from webhook.kube.client import (
    NODES,
    KubeApiError,
    KubeError,
    ResourceRef,
    get,
    list_pages,
    status_message,
)

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 10.0


class _Gone(Exception):
    """The watch's resourceVersion is too old: only a new list can resume."""


class _Stopped(Exception):
    """stop() was called while a request was being opened."""


class NodeWatcher:
    """Keeps every object of one resource (Nodes unless told) current through list +
    watch."""

    def __init__(
        self,
        client: k8s.ApiClient,
        *,
        on_change: Callable[[list[dict[str, Any]]], None],
        on_update: Callable[[dict[str, dict[str, Any] | None]], None] | None = None,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        watch_timeout: int = 300,
        page_size: int = 500,
        resource: ResourceRef = NODES,
    ) -> None:
        self._client = client
        self._resource = resource
        self._served = True  # False after a 404 on the list: the cluster has no such API
        self._on_change = on_change
        self._on_update = on_update
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._clock = clock
        self._watch_timeout = watch_timeout
        self._page_size = page_size
        self._nodes: dict[str, dict[str, Any]] = {}
        self._rv: str | None = None  # None: the next step is a (re-)list
        self._synced = False
        self._last_sync: float | None = None
        self._errors = 0
        self._relists = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # guards _active against stop()
        self._active: urllib3.BaseHTTPResponse | None = None
        self._random = random.Random()
        self._thread = threading.Thread(
            target=self._run, name=f"watch-{resource.plural}", daemon=True
        )

    @property
    def synced(self) -> bool:
        """True once the first full list has been delivered to `on_change`."""
        return self._synced

    @property
    def last_sync(self) -> float | None:
        """`clock()` time of the last successful list, watch event or bookmark."""
        return self._last_sync

    @property
    def node_count(self) -> int:
        """Objects held (Nodes, or whatever resource this watcher watches)."""
        return len(self._nodes)

    @property
    def served(self) -> bool:
        """False while the cluster answers 404 for the resource (it has no such API)."""
        return self._served

    @property
    def errors(self) -> int:
        """Failed lists and watches (broken streams, HTTP errors): each one a reconnect."""
        return self._errors

    @property
    def relists(self) -> int:
        """Full lists after the first one (after a 410 Gone)."""
        return self._relists

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread: interrupts a blocked watch read, waits up to `timeout`."""
        self._stopping.set()
        with self._lock:
            if self._active is not None:
                _interrupt(self._active)
        if self._thread.is_alive():
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning(
                    "%s watch thread still running %.1fs after stop()", self._resource, timeout
                )

    # -- the thread -----------------------------------------------------------------

    def _run(self) -> None:
        failures = 0  # consecutive sessions that made no progress
        while not self._stopping.is_set():
            try:
                progressed = self._session()
            except _Stopped:
                break
            except Exception as exc:
                if self._stopping.is_set():
                    break
                self._errors += 1
                progressed = False
                log.warning(
                    "%s watch failed (%s); keeping %d, reconnecting",
                    self._resource,
                    exc,
                    len(self._nodes),
                )
            failures = 0 if progressed else failures + 1
            if failures:
                self._stopping.wait(self._backoff(failures))
        log.debug("%s watch stopped", self._resource)

    def _backoff(self, failures: int) -> float:
        delay = min(self._backoff_max, self._backoff_initial * 2.0 ** (failures - 1))
        return delay / 2 + self._random.uniform(0, delay / 2)

    def _session(self) -> bool:
        """(Re-)list if needed, then watch until the stream ends; False if it made no
        progress (no event, and ended within a second), which calls for a backoff."""
        if self._rv is None:
            try:
                self._list()
            except KubeApiError as exc:
                if exc.status != 404 or self._resource == NODES:  # Nodes are always served
                    raise
                self._not_served(exc)
                return False
        try:
            return self._watch()
        except _Gone as exc:
            log.info("%s watch expired (%s); listing again", self._resource, exc)
            self._rv = None
            return False

    def _not_served(self, exc: KubeApiError) -> None:
        """No such resource here: an empty, synced view; the backoff retries the list."""
        if self._served or not self._synced:
            log.info("%s is not served by this cluster (%s): none", self._resource, exc)
        self._served = False
        self._nodes = {}
        self._last_sync = self._clock()
        self._synced = True
        self._notify()

    def _list(self) -> None:
        nodes: dict[str, dict[str, Any]] = {}
        rv = ""
        pages = list_pages(
            self._client, resource=self._resource, namespace=None, page_size=self._page_size
        )
        for page in pages:
            for node in page["items"]:
                nodes[self._key(node["metadata"])] = node
            rv = str((page.get("metadata") or {}).get("resourceVersion") or "")
        self._check_stopping()
        if self._synced and self._served:
            self._relists += 1
        self._served = True
        self._nodes, self._rv = nodes, rv
        self._last_sync = self._clock()
        self._synced = True
        log.info("listed %d %s at resourceVersion %s", len(nodes), self._resource, rv)
        self._notify()

    def _watch(self) -> bool:
        query = [
            ("watch", "true"),
            ("resourceVersion", self._rv or ""),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(self._watch_timeout)),
        ]
        # The read timeout only catches a dead peer: the server ends the watch itself
        # after timeoutSeconds, and bookmarks come about once a minute.
        timeout = (CONNECT_TIMEOUT, self._watch_timeout + 30.0)
        try:
            resp = get(self._client, self._resource.path(), query, timeout=timeout)
        except KubeApiError as exc:
            if exc.status == 410:
                raise _Gone(str(exc)) from None
            raise
        started = time.monotonic()
        self._set_active(resp)
        try:
            progressed = self._read_stream(resp)
        finally:
            self._set_active(None)
            resp.close()
            resp.release_conn()
        # A quiet watch that ran its course is no failure; one that ends at once would spin.
        return progressed or time.monotonic() - started >= 1.0

    def _read_stream(self, resp: urllib3.BaseHTTPResponse) -> bool:
        progressed = False
        buffer = b""
        for chunk in resp.stream(amt=None):
            lines = (buffer + chunk).split(b"\n")
            buffer = lines.pop()  # an incomplete last line waits for the next chunk
            changed: dict[str, dict[str, Any] | None] = {}
            try:
                for line in lines:
                    if line.strip():
                        self._apply(orjson.loads(line), changed)
                        progressed = True
            finally:  # events before a bad one in the same batch still count
                if changed:
                    self._notify(changed)
        if self._stopping.is_set():
            raise _Stopped
        log.debug("%s watch ended by the server; resuming at %s", self._resource, self._rv)
        return progressed

    def _apply(self, event: dict[str, Any], changed: dict[str, dict[str, Any] | None]) -> None:
        """Apply one watch event; a Node it adds, changes or deletes goes into `changed`."""
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise _Gone(status_message(obj) or "410 Gone")
            raise KubeError(f"watch error event {code}: {status_message(obj) or obj}")
        meta = obj.get("metadata") or {}
        self._rv = str(meta.get("resourceVersion") or self._rv)
        self._last_sync = self._clock()
        res = self._resource
        if kind in ("ADDED", "MODIFIED"):
            name = self._key(meta)
            node = self._nodes[name] = {"apiVersion": res.api_version, "kind": res.kind, **obj}
            changed[name] = node
        elif kind == "DELETED":
            name = self._key(meta)
            if self._nodes.pop(name, None) is not None:
                changed[name] = None
        elif kind != "BOOKMARK":
            log.warning("ignoring %s watch event of unknown type %r", res, kind)

    def _key(self, meta: dict[str, Any]) -> str:
        name = str(meta.get("name") or "")
        if self._resource.namespaced:
            return f"{meta.get('namespace') or ''}/{name}"
        return name

    def _notify(self, changed: dict[str, dict[str, Any] | None] | None = None) -> None:
        try:
            if changed is not None and self._on_update is not None:
                self._on_update(changed)
            else:
                self._on_change(list(self._nodes.values()))
        except Exception:
            log.exception("%s watch callback failed; the watch goes on", self._resource)

    def _set_active(self, resp: urllib3.BaseHTTPResponse | None) -> None:
        with self._lock:
            self._active = resp
            if resp is not None and self._stopping.is_set():
                _interrupt(resp)

    def _check_stopping(self) -> None:
        if self._stopping.is_set():
            raise _Stopped


def _interrupt(resp: urllib3.BaseHTTPResponse) -> None:
    """Make a read blocked on `resp` in another thread return now."""
    try:
        resp.shutdown()  # urllib3 >= 2.3: shuts the socket down for reading
    except Exception:  # already released or closed: nothing is blocked on it
        log.debug("could not shut down the watch response", exc_info=True)
