"""Requests in flight: how many a worker takes at once, and what their bodies may hold.

An ASGI wrapper around the app. A request with a body (every POST /validate) is taken
only while fewer than ``max_requests`` are in flight and the bodies they declared
(Content-Length; ``MAX_BODY`` when they declare none) fit ``max_body_bytes``; otherwise
it gets a 503 at once, before its body is read. So a flood of 3 MiB bodies cannot take
the worker's memory, while small requests still fit beside them. GET requests (the
probes, /metrics) are never refused: a busy replica must not be restarted for it.

A client that goes away in the middle of its body ends its request here, quietly:
there is no one left to answer, and nothing went wrong on our side. So does a request
still running when the grace period after SIGTERM ends (uvicorn cancels it): 503 and one
line in the log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import orjson
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from webhook.serve.server import MAX_BODY

log = logging.getLogger("gpu_admission.capacity")

MAX_BODY_BYTES_IN_FLIGHT = 64 * 1024 * 1024  # per worker: 21 bodies of 3 MiB, 2,000 of 32 KiB


class InFlight:
    def __init__(
        self, app: ASGIApp, *, max_requests: int, max_body_bytes: int = MAX_BODY_BYTES_IN_FLIGHT
    ) -> None:
        self.app = app
        self.max_requests = max_requests
        self.max_body_bytes = max_body_bytes
        self.requests = 0
        self.body_bytes = 0
        self._inline: Callable[[bytes], tuple[int, bytes] | None] | None = getattr(
            app, "inline", None
        )

    def inline(self, body: bytes) -> tuple[int, bytes] | None:
        """The app's answer to a POST /validate body, judged at once without an ASGI
        task; None when the app must take it the ASGI way (over capacity: the 503 is
        answered there; or judged on a thread). Answered before any other request runs,
        it is never in flight beside another."""
        if self._inline is None or self.requests >= self.max_requests:
            return None
        if self.body_bytes + len(body) > self.max_body_bytes:
            return None
        return self._inline(body)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        size = declared_size(scope["headers"])
        if self.requests >= self.max_requests or self.body_bytes + size > self.max_body_bytes:
            await _unavailable(send, self._why(size))
            return
        self.requests += 1
        self.body_bytes += size
        try:
            await self.app(scope, receive, send)
        except ClientDisconnect:
            log.debug("client went away before its request body was complete")
        except asyncio.CancelledError:
            # Only uvicorn cancels a request: when the grace period after SIGTERM ends
            # with it still running. Say so in one line, not a traceback of the await.
            log.warning("a request was still running when the grace period ended")
            await _unavailable(send, "shutting down: the grace period ended first")
        finally:
            self.requests -= 1
            self.body_bytes -= size

    def _why(self, size: int) -> str:
        if self.requests >= self.max_requests:
            return f"over capacity: {self.requests} requests in flight (--max-in-flight)"
        return (
            f"over capacity: {self.body_bytes} bytes of request bodies in flight, "
            f"this one declares {size} (limit {self.max_body_bytes})"
        )


def declared_size(headers: list[tuple[bytes, bytes]]) -> int:
    """What the body may hold: its Content-Length up to MAX_BODY (the app refuses more),
    MAX_BODY when there is none (chunked)."""
    for name, value in headers:
        if name == b"content-length":
            return min(int(value), MAX_BODY) if value.isdigit() else MAX_BODY
    return MAX_BODY


async def _unavailable(send: Send, message: str) -> None:
    body = orjson.dumps({"error": message, "code": 503})
    headers: list[Any] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        # A new connection may land on another replica (kube-proxy picks per connection).
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})
