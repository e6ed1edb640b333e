"""What serve's connection layer costs per request, beside uvicorn's own httptools protocol.

Feeds an apiserver-like request (head and a 2.6 KB body in one chunk) to a protocol
instance over a fake transport, with a trivial ASGI app, on uvloop: once through
uvicorn's HttpToolsProtocol, once through webhook.serve.connections.WebhookProtocol.
Runs alternate; prints the best and the median microseconds per request of each, and
what a timer armed and cancelled per request (call_later + cancel) costs on uvloop and
on asyncio. Not a test: it prints numbers.

    python bench/serve_protocol.py [--runs 40] [--requests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import uvicorn
import uvloop
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from webhook.serve.connections import Limits, Shared, protocol_class

REQUEST = (
    b"POST /validate?timeout=3s HTTP/1.1\r\nHost: gpu-admission.gpu-admission-system.svc:443\r\n"
    b"User-Agent: kube-apiserver-admission\r\nContent-Length: 2658\r\n"
    b"Accept: application/json, */*\r\nContent-Type: application/json\r\n"
    b"Accept-Encoding: gzip\r\n\r\n" + b"x" * 2658
)


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1), "sockname": ("127.0.0.1", 2)}.get(name, default)

    def write(self, data: Any) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def app(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
    )
    await send({"type": "http.response.body", "body": b"ok"})


async def per_request(cls: type[HttpToolsProtocol], n: int) -> float:
    config = uvicorn.Config(
        app, http=cls, lifespan="off", proxy_headers=False, log_level="warning", access_log=False
    )
    config.load()
    state = ServerState()
    protocol = cls(
        config=config, server_state=state, app_state={}, _loop=asyncio.get_running_loop()
    )
    protocol.connection_made(Transport())
    started = time.perf_counter()
    for _ in range(n):
        protocol.data_received(REQUEST)
        while state.tasks:
            await asyncio.sleep(0)
    return (time.perf_counter() - started) / n * 1e6


async def timer_cost(n: int = 100_000) -> float:
    loop = asyncio.get_running_loop()
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(n):
            loop.call_later(5.0, print).cancel()
        best = min(best, (time.perf_counter() - started) / n * 1e6)
        await asyncio.sleep(0)
    return best


async def compare(runs: int, n: int) -> None:
    webhook = protocol_class(Shared(Limits()))
    plain: list[float] = []
    ours: list[float] = []
    for _ in range(runs):
        plain.append(await per_request(HttpToolsProtocol, n))
        ours.append(await per_request(webhook, n))
    for name, times in (("uvicorn HttpToolsProtocol", plain), ("WebhookProtocol", ours)):
        print(f"{name}: best {min(times):.2f} us, median {statistics.median(times):.2f} us")
    print(f"call_later + cancel, uvloop: {await timer_cost():.2f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    uvloop.run(compare(args.runs, args.requests))
    print(f"call_later + cancel, asyncio: {asyncio.run(timer_cost()):.2f} us")


if __name__ == "__main__":
    main()
