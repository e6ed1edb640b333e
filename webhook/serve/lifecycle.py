"""The uvicorn server around `serve`'s connections (webhook.serve.connections): its event
loop, which bounds the TLS handshake and the TLS close; the sweep of the connections'
deadlines; the drain on SIGTERM; and the memory a burst of connections leaves behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import itertools
from collections.abc import Callable
from typing import Any

import uvicorn
import uvloop

from webhook.serve.connections import Shared, WebhookProtocol

# Closing a TLS connection sends close_notify and waits for the peer's (uvloop: 30 s). A
# client that never reads (an idle pooled connection, a hostile one) would hold the
# connection, its memory and the exit that long.
TLS_SHUTDOWN_TIMEOUT = 2.0
SWEEP_INTERVAL = 0.25  # seconds between checks of the connections' deadlines


def event_loop(*, handshake_timeout: float) -> Callable[[], asyncio.AbstractEventLoop]:
    """A uvloop loop factory whose servers bound the TLS handshake and the TLS close."""

    class Loop(uvloop.Loop):
        async def create_server(self, *args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault("ssl_handshake_timeout", handshake_timeout)
            kwargs.setdefault("ssl_shutdown_timeout", TLS_SHUTDOWN_TIMEOUT)
            return await super().create_server(*args, **kwargs)

    return Loop


class MemoryReturn:
    """Give the memory of a burst of connections back to the system once it is over.

    uvloop gives each TLS connection a 256 KiB read buffer from malloc. glibc raises its
    mmap threshold whenever such a block is freed, so later buffers come from the heap,
    which fragments; and freed heap is not returned by itself: 2,000 connections left
    ~90 MB behind after they closed. ``malloc_trim`` once a burst of new connections is
    over returns it (the free pages anywhere in the heap, not only at its top). The mmap
    threshold is left to glibc: fixed at 128 KiB it kept those buffers in mappings of
    their own, but also every request's 256 KiB TLS read (uvloop reads a record into a
    new bytes of that size), which then cost an mmap, an mremap, a munmap and a page
    fault a request: ~25 us, a sixth of serve's CPU a request under load. Without glibc
    nothing is trimmed.
    """

    BURST = 100  # new connections within one check: the apiserver keeps its connections

    def __init__(self) -> None:
        self._trim: Callable[[int], int] | None = None
        self._seen = 0
        self._burst = False
        with contextlib.suppress(OSError, AttributeError):  # not glibc
            self._trim = ctypes.CDLL(None).malloc_trim

    def check(self, accepted: int) -> None:
        """Every few seconds: ``accepted`` is the count of connections accepted so far."""
        new, self._seen = accepted - self._seen, accepted
        if new >= self.BURST:
            self._burst = True
        elif self._burst and self._trim is not None:
            self._burst = False
            self._trim(0)


class DrainingServer(uvicorn.Server):
    """uvicorn's server: sweeps the deadlines of its connections, drains them on SIGTERM,
    and returns their memory after a burst."""

    def __init__(self, config: uvicorn.Config, *, shared: Shared) -> None:
        super().__init__(config)
        self.shared = shared
        self.memory = MemoryReturn()
        self._sweeper: asyncio.Task[None] | None = None

    async def startup(self, sockets: list[Any] | None = None) -> None:
        await super().startup(sockets)
        self._sweeper = asyncio.create_task(self._sweep())

    async def shutdown(self, sockets: list[Any] | None = None) -> None:
        # Before uvicorn stops accepting: a connection whose handshake ends after this
        # point is served with Connection: close like the rest.
        self.shared.draining = True
        try:
            await super().shutdown(sockets)
        finally:
            if self._sweeper is not None:
                self._sweeper.cancel()

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        for sweep in itertools.count(1):
            await asyncio.sleep(SWEEP_INTERVAL)
            now = loop.time()
            for connection in list(self.server_state.connections):
                if isinstance(connection, WebhookProtocol):
                    connection.check_deadline(now)
            if sweep % 20 == 0:
                self.memory.check(self.shared.accepted)
