"""Running the webhook: background refreshers, uvicorn, workers, graceful stop.

Each worker process owns its own State, refreshers and Node watch: workers share
nothing but the listening socket, which the parent binds before it starts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import multiprocessing
import multiprocessing.connection
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import uvicorn

from webhook.kube.node_watch import NodeWatcher
from webhook.serve.capacity import InFlight
from webhook.serve.connections import Limits, Shared, protocol_class
from webhook.serve.lifecycle import DrainingServer, event_loop
from webhook.serve.server import create_app
from webhook.serve.state import Settings, State
from webhook.serve.tls import ReloadingTLS

log = logging.getLogger("gpu_admission.serve")


@dataclass
class ServeOptions:
    settings: Settings
    host: str
    port: int
    workers: int
    cert_file: Path
    key_file: Path
    client_ca_file: Path | None
    tls_reload_interval: float = 10.0
    limits: Limits = field(default_factory=Limits)


def refreshers(
    options: ServeOptions, tls: ReloadingTLS
) -> Callable[[State], contextlib.AbstractAsyncContextManager[None]]:
    """The lifespan part of the app: keep policies, inventory and certificate current."""

    @contextlib.asynccontextmanager
    async def run(state: State) -> AsyncIterator[None]:
        tasks = [
            asyncio.create_task(_every(options.settings.reload_interval, state.reload_policies)),
            asyncio.create_task(tls.poll(interval=options.tls_reload_interval)),
        ]
        watchers: list[NodeWatcher] = []
        if options.settings.inventory_file:
            tasks.append(
                asyncio.create_task(
                    _every(options.settings.reload_interval, state.reload_inventory_file)
                )
            )
        else:
            watchers = _start_watches(state)
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            for watcher in watchers:
                await asyncio.to_thread(watcher.stop, 2.0)

    return run


async def _every(interval: float, action: Callable[[], object]) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            await asyncio.to_thread(action)
        except Exception:  # a refresher must outlive any one bad read
            log.exception("background refresh failed")


def _start_watches(state: State) -> list[NodeWatcher]:
    """The Node watch (its last sync is the inventory's age), one watch per DRA resource,
    the Namespaces, and one per queue resource (Kueue's, ResourceQuotas); a cluster
    without resource.k8s.io/v1 or Kueue gives an empty supply of it."""
    from webhook.kube.client import DRA_RESOURCES, NAMESPACES, QUEUE_RESOURCES, api_client

    client = api_client(context=state.settings.context, kubeconfig=state.settings.kubeconfig)
    nodes = NodeWatcher(client, on_change=state.set_nodes, on_update=state.update_nodes)
    state.last_sync = lambda: nodes.last_sync
    watchers = [nodes]
    # Ready once the supply a verdict reads is listed (a 404 counts: no DRA, no Kueue).
    state.dra_pending = {"DeviceClass", "ResourceSlice"}
    if state.policy_set.reads_queue_supply:
        state.dra_pending |= {r.kind for r in QUEUE_RESOURCES}
    # Namespaces' labels: DRA's admin-access label, the tenants and queues they select.
    for resource in (*DRA_RESOURCES, NAMESPACES):
        kind = resource.kind
        watchers.append(
            NodeWatcher(
                client,
                resource=resource,
                on_change=functools.partial(state.set_dra, kind),
                on_update=functools.partial(state.update_dra, kind),
            )
        )
    for resource in QUEUE_RESOURCES:
        kind = resource.kind
        watchers.append(
            NodeWatcher(
                client,
                resource=resource,
                on_change=functools.partial(state.set_queues, kind),
                on_update=functools.partial(state.update_queues, kind),
            )
        )
    for watcher in watchers:
        watcher.start()
    return watchers


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # With Nagle on, a TLS response split into two records waits ~40 ms for an ACK. uvloop
    # turns it off on every TCP connection; asyncio only on sockets created with
    # IPPROTO_TCP, so say it (tests/serve/test_serve_connections.py measures the latency).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def tune_gc() -> None:
    """Fewer, cheaper collections: a request allocates a few hundred short-lived objects,
    and with the default threshold (700) the collector runs every couple of requests.
    Freezing what startup built keeps it out of every later collection."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 50, 50)


def run_worker(options: ServeOptions, sock: socket.socket, state: State | None = None) -> None:
    """One worker: its own State and refreshers, serving on the shared socket."""
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    state = state or State.start(options.settings)
    tune_gc()
    tls = ReloadingTLS(
        cert_file=options.cert_file,
        key_file=options.key_file,
        client_ca_file=options.client_ca_file,
    )
    app = create_app(state, background=refreshers(options, tls))
    limits = options.limits
    shared = Shared(limits)
    config = uvicorn.Config(
        InFlight(app, max_requests=limits.max_in_flight),
        # httptools, with the limits uvicorn lacks (webhook.serve.connections), on uvloop.
        http=protocol_class(shared),
        ws="none",
        ssl_context_factory=tls.ssl_context_factory,
        log_level="warning",
        access_log=False,
        proxy_headers=False,  # nothing proxies the apiserver's calls: no X-Forwarded-For
        # What is left after SIGTERM for requests in flight; then they are cancelled.
        timeout_graceful_shutdown=limits.grace_period,  # type: ignore[arg-type]
        lifespan="on",
    )
    server = DrainingServer(config, shared=shared)
    with asyncio.Runner(loop_factory=event_loop(handshake_timeout=limits.header_timeout)) as run:
        run.run(server.serve(sockets=[sock]))


def serve(options: ServeOptions, state: State) -> None:
    sock = bind(options.host, options.port)
    if options.workers <= 1:
        run_worker(options, sock, state)
        return
    ctx = multiprocessing.get_context("spawn")
    children = [
        ctx.Process(target=run_worker, args=(options, sock), daemon=False)
        for _ in range(options.workers)
    ]
    for child in children:
        child.start()

    def forward(sig: int, frame: FrameType | None) -> None:
        # The workers stop accepting; without this copy open, connections that arrive
        # after that are refused at once instead of waiting in the backlog for nobody.
        sock.close()
        for child in children:
            if child.pid is not None and child.is_alive():
                child.terminate() if sig == signal.SIGTERM else child.kill()

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, lambda s, f: forward(signal.SIGTERM, f))
    # A worker that dies on its own takes the rest down: Kubernetes restarts the
    # container, which beats serving on with a fraction of the capacity unnoticed.
    multiprocessing.connection.wait([c.sentinel for c in children])
    forward(signal.SIGTERM, None)
    for child in children:
        child.join()
    sock.close()
    if any(c.exitcode not in (0, -signal.SIGTERM) for c in children):
        sys.exit(1)
