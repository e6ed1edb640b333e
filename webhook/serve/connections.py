"""Connections of `serve`: uvicorn's httptools protocol with the limits a webhook needs.

What uvicorn 0.54 does on httptools (read from its source), and what this adds:

- ``timeout_keep_alive`` is armed only after a response. A connection that never sends
  a request, or sends its head one byte at a time, is never closed (every byte cancels
  the timer). Here a head deadline runs from the TLS handshake and from the first byte
  of each request to the end of its headers (408 and close when it passes), and the
  keep-alive deadline replaces uvicorn's timer.
- httptools (llhttp) has no limit on the request head; ``h11_max_incomplete_event_size``
  is h11's alone. Here a head over ``MAX_HEAD_BYTES`` is answered 431 and closed.
- uvicorn passes no ``ssl_handshake_timeout`` or ``ssl_shutdown_timeout``: a TCP
  connection that never starts TLS is held for the loop's 60 s, one whose peer never
  answers our close_notify for 30 s. ``lifecycle.event_loop`` bounds both.
- ``limit_concurrency`` counts open connections with running requests, so idle
  connections alone make every request a 503. Here open connections have their own
  cap (``max_connections``: one over it is closed at once) and requests in flight
  theirs (``webhook.serve.capacity``).
- On shutdown uvicorn closes every idle keep-alive connection at once, and a request
  already on its way meets a closed socket; the apiserver does not retry a POST.
  Here an idle connection stays open for ``DRAIN_IDLE`` seconds, and every response
  from SIGTERM on says ``Connection: close``.
- uvicorn writes each response in two calls (head, body): over TLS, two records and two
  send(2) calls. Here what one loop turn writes goes out in one (``OneWrite``; what it
  is worth under load: docs/performance.md).
- uvicorn runs every request as an asyncio task: the task, its ASGI receive and two
  sends cost ~20 us a request, as much as the whole bare endpoint's app. Here a POST
  /validate with a small body (Content-Length up to ``INLINE_BODY``, no Expect) that
  came whole in one read is answered in the loop's next turn (``call_soon``, no task),
  with the bytes uvicorn would have sent, when the app's ``inline`` takes it
  (``InFlight.inline``: not over capacity, judged on the loop). Any other request goes
  the ASGI way, and so does one whose body is still to come (it is in flight meanwhile:
  --max-in-flight counts it, the grace period's end answers it 503).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import httptools
import orjson
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from webhook.serve.server import INLINE_BODY

log = logging.getLogger("gpu_admission.connections")

MAX_HEAD_BYTES = 16 * 1024  # the request line and headers; the apiserver sends < 1 KiB
DRAIN_IDLE = 1.0  # seconds an idle connection stays open after SIGTERM: for requests in transit


@dataclass(frozen=True)
class Limits:
    header_timeout: float = 5.0
    body_timeout: float = 10.0  # from the end of the head to the end of the body
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


class Phase(enum.Enum):
    FIRST = "no request yet"
    HEAD = "receiving a request line and headers"
    BODY = "receiving a request body"
    BUSY = "a request is being answered"
    IDLE = "kept alive between requests"


class HeadTooLarge(Exception):
    """The request line and headers passed MAX_HEAD_BYTES."""


class WebhookProtocol(HttpToolsProtocol):
    """One connection. Subclassed per worker by ``protocol_class`` to carry ``shared``.

    Timeouts are deadlines that ``lifecycle.DrainingServer`` sweeps four times a second: a timer
    armed and cancelled per request costs 3-5 us (call_later, uvloop or asyncio), a
    deadline an attribute write.
    """

    shared: ClassVar[Shared]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # on accept, before the TLS handshake
        self.shared.accepted += 1
        self.phase = Phase.FIRST
        self.deadline = float("inf")  # loop.time() by which the phase must have ended
        self._chunk_size = 0  # of the chunk being parsed
        self._message_ended = False  # a request ended in the chunk being parsed
        self._head_received = 0  # bytes of whole chunks received inside the current head
        self._head_spilled = False  # the head began in a chunk after another request's end
        # The app's synchronous answer to a small POST /validate (``_answer_inline``).
        self._inline: Callable[[bytes], tuple[int, bytes] | None] | None = getattr(
            self.app, "inline", None
        )
        self._may_defer = False  # in on_headers_complete: the task may wait for the body
        self._deferred: Any = None  # the cycle whose task waits for its body: answered inline

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.transport = OneWrite(transport, self.loop)  # type: ignore[assignment]
        if len(self.connections) > self.shared.limits.max_connections:
            self.shared.note_refusal(len(self.connections))
            transport.close()
            return
        self.deadline = self.loop.time() + self.shared.limits.header_timeout

    def data_received(self, data: bytes) -> None:
        # uvicorn's (whose keep-alive timer is never armed here), but a head over the
        # limit gets 431, not 400.
        self._chunk_size, self._message_ended = len(data), False
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
        finally:
            if self._deferred is not None:  # its body is not all here: the app waits for it
                cycle, self._deferred = self._deferred, None
                super()._start_asgi_task(cycle, self.app)
        if self.phase is not Phase.HEAD:
            return
        # httptools keeps a header it has not seen the end of to itself: bound it by the
        # bytes received. A chunk in which a request ended may hold the start of the next
        # head after a body: not all head, so left uncounted (one read, <= 256 KiB).
        if self._message_ended:
            self._head_spilled = True
            return
        self._head_received += len(data)
        if self._head_received > MAX_HEAD_BYTES:
            self._refuse(431, f"request line and headers over {MAX_HEAD_BYTES} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # A first request keeps the deadline from the handshake; a later one (after an
        # idle spell, or pipelined behind a request being answered) gets its own.
        if self.phase is not Phase.FIRST:
            self.deadline = self.loop.time() + self.shared.limits.header_timeout
        self.phase = Phase.HEAD
        self._head_received, self._head_spilled = 0, False

    def on_headers_complete(self) -> None:
        # The head lies within the chunks it touched; count it only when they are large.
        if self._head_spilled or self._head_received + self._chunk_size > MAX_HEAD_BYTES:
            size = len(self.url) + sum(len(n) + len(v) + 4 for n, v in self.headers)
            if size > MAX_HEAD_BYTES:
                raise HeadTooLarge  # httptools stops and raises HttpParserCallbackError
        # The body's deadline, in place of a timer per request in the app (3-5 us armed
        # and cancelled); nearly always the body came with the head and it ends at once.
        self.phase = Phase.BODY
        self.deadline = self.loop.time() + self.shared.limits.body_timeout
        self._may_defer = self._inline is not None
        try:
            super().on_headers_complete()
        finally:
            self._may_defer = False
        if self.shared.draining:
            self.cycle.keep_alive = False  # the response says Connection: close

    def on_message_complete(self) -> None:
        self._message_ended = True
        if self.phase is Phase.BODY:
            self.phase, self.deadline = Phase.BUSY, float("inf")
        super().on_message_complete()
        cycle, self._deferred = self._deferred, None
        if cycle is not None and cycle is self.cycle and not cycle.response_complete:
            # In the loop's next turn, as a task's first step would run: judged in the
            # read callback, the turn's work ended sooner and the loop slept and woke
            # more often (server CPU a request 249-252 us against 196 us deferred, five
            # runs of wrk -c16; bench/serve_load.py shows the same in requests/s).
            self.loop.call_soon(self._answer_inline, cycle)

    def _start_asgi_task(self, cycle: Any, app: Any) -> None:
        # From on_headers_complete, a small POST /validate starts no task: its body is
        # answered when it is whole (on_message_complete).
        if self._may_defer and app is self.app and _inline_request(cycle):
            self._deferred = cycle
            return
        super()._start_asgi_task(cycle, app)

    def _answer_inline(self, cycle: Any) -> None:
        """Answer the request of ``cycle`` here, as uvicorn writes what the app sends (the
        default headers, then content-length and content-type); else start its task."""
        assert self._inline is not None
        if cycle.disconnected or cycle.response_complete:
            return  # the client went away (or was answered 408) meanwhile
        try:
            result = self._inline(bytes(cycle.body))
        except Exception:  # as uvicorn answers an app that raised before its response
            self.logger.exception("Exception in ASGI application")
            cycle.keep_alive = False
            self._write_inline(cycle, 500, _PLAIN_500, b"Internal Server Error")
            return
        if result is None:  # the app takes it: its receive() gets the body at once
            super()._start_asgi_task(cycle, self.app)
            return
        status, body = result
        self._write_inline(cycle, status, b"content-length: %d\r\n%s" % (len(body), _JSON), body)

    def _write_inline(self, cycle: Any, status: int, headers: bytes, body: bytes) -> None:
        head = [STATUS_LINE[status]]
        head += [n + b": " + v + b"\r\n" for n, v in self.server_state.default_headers]
        head.append(headers)
        head.append(b"\r\n" if cycle.keep_alive else b"connection: close\r\n\r\n")
        cycle.body = bytearray()
        cycle.response_started = cycle.response_complete = True
        # Held to the end of the loop's turn like every write (OneWrite): sent at once,
        # each answer woke the client for one response; a turn's answers together
        # cost wrk ~10 us a response less, and the server no more.
        self.transport.write(b"".join(head) + body)
        if not cycle.keep_alive:
            self.transport.close()
        self.on_response_complete()

    def on_response_complete(self) -> None:
        # uvicorn's, with a keep-alive deadline instead of its timer.
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        elif self.phase is Phase.BUSY or self.phase is Phase.BODY:  # BODY: answered early
            self.phase = Phase.IDLE
            self.deadline = self.loop.time() + self.shared.limits.keep_alive_timeout

    def check_deadline(self, now: float) -> None:
        if now < self.deadline or self.transport.is_closing():
            return
        if self.phase is Phase.HEAD:
            timeout = self.shared.limits.header_timeout
            self._refuse(408, f"request line and headers not received within {timeout:g}s")
        elif self.phase is Phase.BODY:
            timeout = self.shared.limits.body_timeout
            self._refuse(408, f"request body not received within {timeout:g}s")
        else:
            self.transport.close()  # idle: no request since the handshake or the last one

    def shutdown(self) -> None:
        """Called by uvicorn on SIGTERM, once per open connection."""
        if self.phase is Phase.HEAD:
            return  # on_headers_complete ends the connection after this request
        if self.phase is Phase.BUSY or self.phase is Phase.BODY:
            # The last request received gets Connection: close; any before it are answered.
            last = self.pipeline[0][0] if self.pipeline else self.cycle
            last.keep_alive = False
            return
        self.deadline = self.loop.time() + DRAIN_IDLE

    def _body_awaited(self) -> bool:
        # The request whose body is late is the one the app works on (none queued before
        # it), and the app has not begun to answer: the 408 is its answer.
        return self.phase is Phase.BODY and not self.pipeline and not self.cycle.response_started

    def _refuse(self, status: int, message: str) -> None:
        """Answer a request the app has not answered, and close: the rest of the stream
        is junk. An app waiting for the body then reads a disconnect."""
        if self.cycle is None or self.cycle.response_complete or self._body_awaited():
            body = orjson.dumps({"error": message, "code": status})
            head = [STATUS_LINE[status]]
            head += [n + b": " + v + b"\r\n" for n, v in self.server_state.default_headers]
            head.append(b"content-type: application/json\r\ncontent-length: %d\r\n" % len(body))
            head.append(b"connection: close\r\n\r\n")
            self.transport.write(b"".join(head) + body)
        self.transport.close()


_JSON = b"content-type: application/json\r\n"
_PLAIN_500 = b"content-type: text/plain; charset=utf-8\r\ncontent-length: 21\r\n"


def _inline_request(cycle: Any) -> bool:
    """A POST /validate whose body is declared (Content-Length) small, without Expect:
    100-continue or a Transfer-Encoding, answered without an ASGI task."""
    scope = cycle.scope
    if scope["method"] != "POST" or scope["path"] != "/validate":
        return False
    if cycle.waiting_for_100_continue:
        return False
    size = None
    for name, value in scope["headers"]:
        if name == b"content-length":
            if size is not None or not value.isdigit():
                return False
            size = int(value)
        elif name == b"transfer-encoding":
            return False
    return size is not None and size <= INLINE_BODY


class OneWrite:
    """A transport that sends what one turn of the event loop writes in one write.

    uvicorn writes a response in two calls, its head and then its body. Over TLS each
    write is a TLS record of its own and a send(2): two of each for every response.
    Held until the end of the loop's turn (or a close), they go out as one record in
    one send, with the same bytes in the same order.
    """

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._held:
            self._loop.call_soon(self.flush)
        self._held.append(bytes(data))

    def flush(self) -> None:
        if self._held:
            data = self._held[0] if len(self._held) == 1 else b"".join(self._held)
            self._held = []
            if not self._transport.is_closing():  # the peer went away meanwhile
                self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def is_closing(self) -> bool:  # on every response: not through __getattr__ (0.6 us)
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:  # is_closing, get_extra_info, abort, ...
        return getattr(self._transport, name)


def protocol_class(shared: Shared) -> type[WebhookProtocol]:
    """A protocol class for one worker's connections, all sharing ``shared``."""
    return cast(
        type[WebhookProtocol], type("WebhookProtocol", (WebhookProtocol,), {"shared": shared})
    )
