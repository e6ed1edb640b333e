"""Connections of `serve`: uvicorn's httptools protocol with the limits a webhook needs.

What uvicorn 0.54 does on httptools (read from its source), and what this adds:

- ``timeout_keep_alive`` is armed only after a response. A connection that never sends
  a request, or sends its head one byte at a time, is never closed (every byte cancels
  the timer). Here a head timer runs from the TLS handshake and from the first byte of
  each request to the end of its headers: 408 and close when it expires.
- httptools (llhttp) has no limit on the request head; ``h11_max_incomplete_event_size``
  is h11's alone. Here a head over ``MAX_HEAD_BYTES`` is answered 431 and closed.
- uvicorn passes no ``ssl_handshake_timeout`` or ``ssl_shutdown_timeout``: a TCP
  connection that never starts TLS is held for the loop's 60 s, one whose peer never
  answers our close_notify for 30 s. ``event_loop`` bounds both.
- ``limit_concurrency`` counts open connections with running requests, so idle
  connections alone make every request a 503. Here open connections have their own
  cap (``max_connections``: one over it is closed at once) and requests in flight
  theirs (``webhook.serve.capacity``).
- On shutdown uvicorn closes every idle keep-alive connection at once, and a request
  already on its way meets a closed socket; the apiserver does not retry a POST.
  Here an idle connection stays open for ``DRAIN_IDLE`` seconds, and every response
  from SIGTERM on says ``Connection: close``.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import httptools
import orjson
import uvicorn
import uvloop
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

log = logging.getLogger("gpu_admission.connections")

MAX_HEAD_BYTES = 16 * 1024  # the request line and headers; the apiserver sends < 1 KiB
DRAIN_IDLE = 1.0  # seconds an idle connection stays open after SIGTERM: for requests in transit
# Closing a TLS connection sends close_notify and waits for the peer's (uvloop: 30 s). A
# client that never reads (an idle pooled connection, a hostile one) would hold the
# connection, its memory and the exit that long.
TLS_SHUTDOWN_TIMEOUT = 2.0


@dataclass(frozen=True)
class Limits:
    header_timeout: float = 5.0
    # Longer than the apiserver's idle timeout (90 s: client-go takes net/http's
    # DefaultTransport value, k8s.io/apimachinery/pkg/util/net SetOldTransportDefaults),
    # so the apiserver closes an idle connection first, never races our close with a POST.
    keep_alive_timeout: float = 120.0
    max_connections: int = 1000  # per worker
    max_in_flight: int = 256  # per worker
    grace_period: float = 20.0  # terminationGracePeriodSeconds 30 - preStop 5, with room


@dataclass
class Shared:
    """What the connections of one worker share: the limits, and whether it drains."""

    limits: Limits
    draining: bool = False
    accepted: int = 0  # connections, counted before their TLS handshake
    refusal_logged_at: float = float("-inf")

    def note_refusal(self, open_connections: int) -> None:
        now = time.monotonic()
        if now - self.refusal_logged_at >= 10.0:  # one line per 10 s under a flood
            self.refusal_logged_at = now
            log.warning(
                "%d connections open (--max-connections): closing new ones", open_connections
            )


class HeadTooLarge(Exception):
    """The request line and headers passed MAX_HEAD_BYTES."""


class WebhookProtocol(HttpToolsProtocol):
    """One connection. Subclassed per worker by ``protocol_class`` to carry ``shared``."""

    shared: ClassVar[Shared]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # on accept, before the TLS handshake
        self.shared.accepted += 1
        self._head_timer: asyncio.TimerHandle | None = None
        self._in_head = False  # between the first byte of a request and its end of headers
        self._head_size = 0  # parsed bytes of the current head
        self._head_received = 0  # bytes received while the head is incomplete
        self._message_ended = False  # a request ended in the chunk being parsed

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.shared.limits.max_connections:
            self.shared.note_refusal(len(self.connections))
            transport.close()
            return
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        # uvicorn's, but a head over the limit gets 431, not 400.
        self._unset_keepalive_if_required()
        self._message_ended = False
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if isinstance(exc.__context__, HeadTooLarge):
                self._refuse(431, f"request line and headers over {MAX_HEAD_BYTES} bytes")
            else:
                self.logger.warning("Invalid HTTP request received.")
                self.send_400_response("Invalid HTTP request received.")
            return
        except httptools.HttpParserUpgrade:
            self._unsupported_upgrade_warning()  # no WebSockets: served as plain HTTP
        # httptools keeps a header it has not seen the end of to itself: bound it by the
        # bytes received. A chunk in which a request ended may hold the start of the next
        # head after a body; it is left uncounted (one read: at most 256 KiB).
        if self._in_head and not self._message_ended:
            self._head_received += len(data)
            if self._head_received > MAX_HEAD_BYTES:
                self._refuse(431, f"request line and headers over {MAX_HEAD_BYTES} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head, self._head_size, self._head_received = True, 0, 0
        if self._head_timer is None:
            self._arm_head_timer()

    def on_url(self, url: bytes) -> None:
        self._grow_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._grow_head(len(name) + len(value) + 4)  # ": " and CRLF
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._cancel_head_timer()
        super().on_headers_complete()
        if self.shared.draining:
            self.cycle.keep_alive = False  # the response says Connection: close

    def on_message_complete(self) -> None:
        self._message_ended = True
        super().on_message_complete()

    def shutdown(self) -> None:
        """Called by uvicorn on SIGTERM, once per open connection."""
        if self._in_head:
            return  # on_headers_complete ends the connection after this request
        busy = self.cycle is not None and not self.cycle.response_complete
        if busy:
            # The last request received gets Connection: close; any before it are answered.
            last = self.pipeline[0][0] if self.pipeline else self.cycle
            last.keep_alive = False
            return
        self._cancel_head_timer()
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_later(
            DRAIN_IDLE, self.timeout_keep_alive_handler
        )

    def _grow_head(self, size: int) -> None:
        self._head_size += size
        if self._head_size > MAX_HEAD_BYTES:
            raise HeadTooLarge  # httptools stops parsing and raises HttpParserCallbackError

    def _arm_head_timer(self) -> None:
        timeout = self.shared.limits.header_timeout
        self._head_timer = self.loop.call_later(timeout, self._head_expired)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_expired(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self._in_head:
            timeout = self.shared.limits.header_timeout
            self._refuse(408, f"request line and headers not received within {timeout:g}s")
        else:
            self.transport.close()  # connected and never sent a request

    def _refuse(self, status: int, message: str) -> None:
        """Answer a request the app never saw, and close: the rest of the stream is junk."""
        if self.cycle is None or self.cycle.response_complete:
            body = orjson.dumps({"error": message, "code": status})
            head = [STATUS_LINE[status]]
            head += [n + b": " + v + b"\r\n" for n, v in self.server_state.default_headers]
            head.append(b"content-type: application/json\r\ncontent-length: %d\r\n" % len(body))
            head.append(b"connection: close\r\n\r\n")
            self.transport.write(b"".join(head) + body)
        self.transport.close()


def protocol_class(shared: Shared) -> type[WebhookProtocol]:
    """A protocol class for one worker's connections, all sharing ``shared``."""
    return cast(
        type[WebhookProtocol], type("WebhookProtocol", (WebhookProtocol,), {"shared": shared})
    )


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
    ~90 MB behind after they closed. A fixed threshold keeps those buffers in mappings
    of their own (unmapped on free), and ``malloc_trim`` once a burst of new connections
    is over returns the rest. Without glibc both are skipped.
    """

    M_MMAP_THRESHOLD = -3  # glibc's <malloc.h>
    BURST = 100  # new connections within one check: the apiserver keeps its connections

    def __init__(self) -> None:
        self._trim: Callable[[int], int] | None = None
        self._seen = 0
        self._burst = False
        try:
            libc = ctypes.CDLL(None)
            libc.mallopt(self.M_MMAP_THRESHOLD, 128 * 1024)
            self._trim = libc.malloc_trim
        except (OSError, AttributeError):
            pass

    def check(self, accepted: int) -> None:
        """Every few seconds: ``accepted`` is the count of connections accepted so far."""
        new, self._seen = accepted - self._seen, accepted
        if new >= self.BURST:
            self._burst = True
        elif self._burst and self._trim is not None:
            self._burst = False
            self._trim(0)


class DrainingServer(uvicorn.Server):
    """uvicorn's server: drains its connections on SIGTERM, returns their memory after."""

    def __init__(self, config: uvicorn.Config, *, shared: Shared) -> None:
        super().__init__(config)
        self.shared = shared
        self.memory = MemoryReturn()

    async def on_tick(self, counter: int) -> bool:
        if counter % 50 == 0:  # uvicorn ticks every 0.1 s
            self.memory.check(self.shared.accepted)
        return await super().on_tick(counter)

    async def shutdown(self, sockets: list[Any] | None = None) -> None:
        # Before uvicorn stops accepting: a connection whose handshake ends after this
        # point is served with Connection: close like the rest.
        self.shared.draining = True
        await super().shutdown(sockets)
