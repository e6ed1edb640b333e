"""A fake kube-apiserver for tests: the real kubernetes client talks to it over HTTP.

A real kube-apiserver (with etcd) cannot run on this machine, so this stands in for one,
answering only what `webhook.kube.client` and `webhook.kube.node_watch` use, the way the real one
answers it:

- GET list endpoints (`/api/v1/...`, `/apis/<group>/<version>/...`, namespaced or not)
  with `limit`/`continue` paging: items sorted by namespace/name, without apiVersion
  and kind (as the real server sends built-in items), `metadata.resourceVersion` and
  `metadata.continue`; an expired continue token answers 410 with a Status body.
- 404 with a Status body for resources it does not serve (an uninstalled CRD).
- `?watch=true&resourceVersion=N` streams JSON lines (`{"type": ..., "object": ...}`)
  with chunked transfer encoding, replaying the retained history after N first. A
  resourceVersion older than the retained history gets an ERROR event with a 410
  Status (or HTTP 410, see `gone_as_http`), as the real server does.
- Bearer-token authentication (401 otherwise), so the client's auth settings are used.

Tests control it: `put`/`delete` change objects and push events to open watches,
`bookmark()`, `error_event()`, `break_watches()` (drop the TCP connections mid-stream),
`end_watches()` (a clean end, like `timeoutSeconds` expiring), `compact()` (forget
history, so resuming gives 410 Gone), `expire_continue_tokens()`, `fail_next()`, and
`requests` records every request.
"""

from __future__ import annotations

import contextlib
import queue
import select
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

TOKEN = "fake-token"

# (group, version, plural) identifies a resource, as in the URL.
ResourceKey = tuple[str, str, str]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]

    @property
    def is_watch(self) -> bool:
        return self.query.get("watch") in ("true", "1")


@dataclass
class _Resource:
    kind: str
    namespaced: bool
    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    # (resourceVersion, encoded event line) of every change, oldest first.
    history: list[tuple[int, bytes]] = field(default_factory=list)
    compacted_rv: int = 0


@dataclass
class _Watch:
    key: ResourceKey
    bookmarks: bool
    messages: queue.Queue[bytes | str] = field(default_factory=queue.Queue)


def status_body(code: int, reason: str, message: str) -> bytes:
    """A `Status` object as the apiserver sends with every error."""
    return orjson.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
    )


class FakeApiServer:
    """The fake apiserver: `with FakeApiServer() as api: api.url ...`."""

    def __init__(self, *, token: str | None = TOKEN) -> None:
        self.token = token
        self.requests: list[RecordedRequest] = []
        self.gone_as_http = False  # True: answer a too-old watch with HTTP 410, not an event
        self._lock = threading.Lock()
        self._rv = 1000
        self._resources: dict[ResourceKey, _Resource] = {}
        self._watches: list[_Watch] = []
        self._failures: list[tuple[str, int, int]] = []  # (path part, status, count)
        self._token_epoch = 0
        self._batched: dict[int, tuple[_Watch, list[bytes]]] | None = None
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.break_watches()
        self._server.shutdown()
        self._server.server_close()

    def configuration(self) -> Any:
        """A client Configuration pointing here with the bearer token."""
        from kubernetes import client

        config = client.Configuration(host=self.url)
        if self.token:  # "authorization" for kubernetes < 37, "BearerToken" since
            bearer = f"Bearer {self.token}"
            config.api_key = {"BearerToken": bearer, "authorization": bearer}
        return config

    # -- objects ------------------------------------------------------------------

    def serve(self, group: str, version: str, plural: str, kind: str, *, namespaced: bool) -> None:
        """Start serving a resource (e.g. install a CRD) with no objects."""
        with self._lock:
            self._resources.setdefault((group, version, plural), _Resource(kind, namespaced))

    def put(self, key: ResourceKey, obj: dict[str, Any], *, quiet: bool = False) -> int:
        """Create or replace an object, push ADDED/MODIFIED to watches; returns its RV.

        `quiet`: tell no open watch, as if the change happened while they were away.
        """
        meta = obj.setdefault("metadata", {})
        with self._lock:
            res = self._resources[key]
            ident = (meta.get("namespace", "") if res.namespaced else "", meta["name"])
            kind = "MODIFIED" if ident in res.objects else "ADDED"
            rv = self._bump(meta)
            stored = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
            res.objects[ident] = stored
            self._emit(key, res, rv, kind, stored, quiet)
        return rv

    def put_many(self, key: ResourceKey, objs: list[dict[str, Any]]) -> None:
        for obj in objs:
            self.put(key, obj)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Changes made inside reach each watch as one chunk, as the real server sends
        events that are queued together."""
        self._batched = {}
        try:
            yield
        finally:
            with self._lock:
                batched, self._batched = self._batched, None
                for watch, lines in batched.values():
                    watch.messages.put(b"".join(lines))

    def delete(
        self, key: ResourceKey, name: str, namespace: str = "", *, quiet: bool = False
    ) -> int:
        """Delete an object and push DELETED to watches; returns the deletion's RV."""
        with self._lock:
            res = self._resources[key]
            stored = res.objects.pop((namespace if res.namespaced else "", name))
            rv = self._bump(stored["metadata"])
            self._emit(key, res, rv, "DELETED", stored, quiet)
        return rv

    def _bump(self, meta: dict[str, Any]) -> int:
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        return self._rv

    def _emit(
        self,
        key: ResourceKey,
        res: _Resource,
        rv: int,
        kind: str,
        obj: dict[str, Any],
        quiet: bool,
    ) -> None:
        line = _event_line(kind, _typed(key, res.kind, obj))
        res.history.append((rv, line))
        for watch in [] if quiet else self._watches:
            if watch.key != key:
                continue
            if self._batched is None:
                watch.messages.put(line)
            else:
                self._batched.setdefault(id(watch), (watch, []))[1].append(line)

    # -- watch control ------------------------------------------------------------

    def bookmark(self, key: ResourceKey) -> int:
        """Send a BOOKMARK at the current resourceVersion to watches that allow them."""
        with self._lock:
            res = self._resources[key]
            self._rv += 1
            obj = {"metadata": {"resourceVersion": str(self._rv)}}
            line = _event_line("BOOKMARK", _typed(key, res.kind, obj))
            for watch in self._watches:
                if watch.key == key and watch.bookmarks:
                    watch.messages.put(line)
            return self._rv

    def error_event(self, key: ResourceKey, code: int = 410) -> None:
        """Send an ERROR event carrying a Status (410: 'too old resource version').

        Like the real server, the watch ends after it.
        """
        line = _error_line(code)
        with self._lock:
            for watch in self._watches:
                if watch.key == key:
                    watch.messages.put(line)
                    watch.messages.put("end")

    def compact(self) -> None:
        """Forget the event history: resuming a watch from any earlier RV gets 410."""
        with self._lock:
            for res in self._resources.values():
                res.history.clear()
                res.compacted_rv = self._rv

    def break_watches(self) -> None:
        """Drop every open watch connection mid-stream (no terminating chunk)."""
        self._signal_watches("break")

    def end_watches(self) -> None:
        """End every open watch cleanly, as when `timeoutSeconds` expires."""
        self._signal_watches("end")

    def _signal_watches(self, signal: str) -> None:
        with self._lock:
            for watch in self._watches:
                watch.messages.put(signal)

    def watch_count(self) -> int:
        with self._lock:
            return len(self._watches)

    def wait_for_watches(self, count: int, timeout: float = 5.0) -> None:
        """Block until `count` watches are open (raise AssertionError on timeout)."""
        wait_until(lambda: self.watch_count() == count, timeout, f"{count} open watches")

    # -- failure injection --------------------------------------------------------

    def fail_next(self, path_part: str, status: int, count: int = 1) -> None:
        """Answer the next `count` requests whose path contains `path_part` with `status`."""
        with self._lock:
            self._failures.append((path_part, status, count))

    def expire_continue_tokens(self) -> None:
        """Make every continue token handed out so far answer 410 Expired."""
        with self._lock:
            self._token_epoch += 1

    def list_requests(self, path: str) -> list[RecordedRequest]:
        return [r for r in list(self.requests) if r.path == path and not r.is_watch]

    def watch_requests(self, path: str) -> list[RecordedRequest]:
        return [r for r in list(self.requests) if r.path == path and r.is_watch]

    # -- request handling (called from handler threads) ---------------------------

    def _injected_failure(self, path: str) -> int | None:
        with self._lock:
            for i, (part, status, count) in enumerate(self._failures):
                if part in path:
                    if count <= 1:
                        del self._failures[i]
                    else:
                        self._failures[i] = (part, status, count - 1)
                    return status
        return None

    def _list(
        self, key: ResourceKey, namespace: str | None, query: dict[str, str]
    ) -> tuple[int, bytes]:
        with self._lock:
            res = self._resources[key]
            start = ""
            if token := query.get("continue"):
                epoch, _, start = token.partition(":")
                if int(epoch) != self._token_epoch:
                    msg = "The provided continue parameter is too old to display a consistent list."
                    return 410, status_body(410, "Expired", msg)
            idents = sorted(i for i in res.objects if namespace is None or i[0] == namespace)
            idents = [i for i in idents if "/".join(i) > start]
            limit = int(query.get("limit") or 0) or len(idents)
            page, rest = idents[:limit], idents[limit:]
            meta: dict[str, Any] = {"resourceVersion": str(self._rv)}
            if rest:
                meta["continue"] = f"{self._token_epoch}:{'/'.join(page[-1])}"
                meta["remainingItemCount"] = len(rest)
            items = [res.objects[i] for i in page]
            group, version, _ = key
            body = {
                "kind": f"{res.kind}List",
                "apiVersion": f"{group}/{version}" if group else version,
                "metadata": meta,
                "items": items,
            }
            return 200, orjson.dumps(body)

    def _open_watch(self, key: ResourceKey, query: dict[str, str]) -> _Watch | bytes:
        """Register a watch and queue the history after its RV; or a 410 answer."""
        rv = int(query.get("resourceVersion") or 0)
        with self._lock:
            res = self._resources[key]
            if rv and rv < res.compacted_rv:
                if self.gone_as_http:
                    return status_body(410, "Expired", f"too old resource version: {rv}")
                watch = _Watch(key, False)
                watch.messages.put(_error_line(410, rv))
                watch.messages.put("end")
                return watch
            watch = _Watch(key, query.get("allowWatchBookmarks") == "true")
            if not rv:  # no RV: start with ADDED for every current object
                for obj in res.objects.values():
                    watch.messages.put(_event_line("ADDED", _typed(key, res.kind, obj)))
            for event_rv, line in res.history:
                if rv and event_rv > rv:
                    watch.messages.put(line)
            self._watches.append(watch)
            return watch

    def _close_watch(self, watch: _Watch) -> None:
        with self._lock:
            if watch in self._watches:
                self._watches.remove(watch)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients hanging up mid-stream is what the tests do on purpose


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # chunked encoding and keep-alive, like the real server
    server: ThreadingHTTPServer

    @property
    def fake(self) -> FakeApiServer:
        return self.server.fake  # type: ignore[attr-defined, no-any-return]

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        fake = self.fake
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake.requests.append(RecordedRequest("GET", url.path, query, headers))
        if fake.token and self.headers.get("Authorization") != f"Bearer {fake.token}":
            return self._send(401, status_body(401, "Unauthorized", "Unauthorized"))
        if status := fake._injected_failure(url.path):
            return self._send(status, status_body(status, "InternalError", f"injected {status}"))
        route = _route(url.path)
        with fake._lock:
            res = fake._resources.get(route[0]) if route else None
        if route is None or res is None or (route[1] is not None and not res.namespaced):
            return self._send(
                404,
                status_body(404, "NotFound", "the server could not find the requested resource"),
            )
        key, namespace = route
        if query.get("watch") in ("true", "1"):
            return self._watch(key, query)
        self._send(*fake._list(key, namespace, query))

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _watch(self, key: ResourceKey, query: dict[str, str]) -> None:
        opened = self.fake._open_watch(key, query)
        if isinstance(opened, bytes):
            return self._send(410, opened)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 1800)
        try:
            self._stream(opened, deadline)
        except OSError:
            pass  # the client went away
        finally:
            self.fake._close_watch(opened)
            self.close_connection = True

    def _stream(self, watch: _Watch, deadline: float) -> None:
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = watch.messages.get(timeout=min(left, 0.05))
            except queue.Empty:
                if self._client_gone():
                    return
                continue
            if message == "break":
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if message == "end":
                break
            assert isinstance(message, bytes)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(message), message))
        self.wfile.write(b"0\r\n\r\n")

    def _client_gone(self) -> bool:
        """True if the client closed the connection (as the real server notices at once)."""
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            peeked: bytes = self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return True
        return peeked == b""


def _route(path: str) -> tuple[ResourceKey, str | None] | None:
    """`/api/v1/namespaces/ns/pods` -> (("", "v1", "pods"), "ns")."""
    parts = path.strip("/").split("/")
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if len(rest) == 3 and rest[0] == "namespaces":
        return (group, version, rest[2]), rest[1]
    if len(rest) == 1:
        return (group, version, rest[0]), None
    return None


def _typed(key: ResourceKey, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    group, version, _ = key
    return {"apiVersion": f"{group}/{version}" if group else version, "kind": kind, **obj}


def _event_line(kind: str, obj: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": kind, "object": obj}) + b"\n"


def _error_line(code: int, rv: int | None = None) -> bytes:
    message = f"too old resource version: {rv}" if rv else "injected error"
    reason = "Expired" if code == 410 else "InternalError"
    status = orjson.loads(status_body(code, reason, message))
    return _event_line("ERROR", status)


def wait_until(predicate: Any, timeout: float = 5.0, what: str = "condition") -> None:
    """Poll `predicate` every few milliseconds until it is true or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.005)


def make_objects(kind: str, count: int, *, namespaces: int = 1) -> Iterator[dict[str, Any]]:
    """`count` minimal objects named `<kind>-0000`..., spread over `namespaces`."""
    for i in range(count):
        yield {"metadata": {"name": f"{kind.lower()}-{i:04d}", "namespace": f"ns-{i % namespaces}"}}
