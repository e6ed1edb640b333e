"""What `serve` costs per request beside the bare endpoint, without TLS or sockets.

Feeds apiserver-like requests (the AdmissionReviews of bench/serve_load.py, every one a
different Pod: no evaluation-cache hits) to serve's connection protocol over a fake
transport, on uvloop, once with serve's app (the shipped policies, the example
inventory, a decision log to /dev/null) and once with the bare starlette endpoint of
bench/bare_endpoint.py. Runs alternate; prints the best and the median microseconds per
request of each and their difference, which is what serve's handler adds (the TLS and
socket work, the same for both, is left out). With --profile, a cProfile of serve's
runs instead, sorted by own time. Not a test: it prints numbers.

    python bench/serve_handler.py [--runs 15] [--requests 2000] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import uvicorn
import uvloop
from uvicorn.server import ServerState

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import bare_endpoint  # noqa: E402
import serve_load  # noqa: E402
from serve_protocol import Transport  # noqa: E402

from webhook.serve.capacity import InFlight  # noqa: E402
from webhook.serve.connections import Limits, Shared, protocol_class  # noqa: E402
from webhook.serve.decisionlog import DecisionLog  # noqa: E402
from webhook.serve.server import create_app  # noqa: E402
from webhook.serve.serving import tune_gc  # noqa: E402
from webhook.serve.state import Settings, State  # noqa: E402


class Recording(Transport):
    """The fake transport, keeping the last bytes written (to check the answers)."""

    def __init__(self) -> None:
        super().__init__()
        self.last = b""

    def write(self, data: Any) -> None:
        self.last = bytes(data)


def requests(count: int) -> list[bytes]:
    out = []
    for i in range(count):
        body = orjson.dumps(serve_load.review(i))
        head = (
            b"POST /validate?timeout=10s HTTP/1.1\r\n"
            b"Host: gpu-admission.gpu-admission-system.svc:443\r\n"
            b"User-Agent: kube-apiserver-admission\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, */*\r\nAccept-Encoding: gzip\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)
        )
        out.append(head + body)
    return out


def serve_app() -> Any:
    settings = Settings(
        str(ROOT / "policies"), inventory_file=str(ROOT / "examples/cluster/nodes.json")
    )
    state = State.start(settings)
    log = DecisionLog(open(os.devnull, "wb"))  # noqa: SIM115
    app = InFlight(create_app(state, decision_log=log), max_requests=256)
    app.state = state  # type: ignore[attr-defined]
    return app


async def per_request(app: Any, batch: list[bytes]) -> float:
    cls = protocol_class(Shared(Limits()))
    config = uvicorn.Config(
        app, http=cls, lifespan="off", proxy_headers=False, log_level="warning", access_log=False
    )
    config.load()
    state = ServerState()
    protocol = cls(
        config=config, server_state=state, app_state={}, _loop=asyncio.get_running_loop()
    )
    transport = Recording()
    protocol.connection_made(transport)
    started = time.process_time()
    for request in batch:
        protocol.data_received(request)
        await asyncio.sleep(0)  # a turn of the loop, as between reads (OneWrite's flush)
        while state.tasks:
            await asyncio.sleep(0)
    elapsed = (time.process_time() - started) / len(batch) * 1e6
    if b'"allowed":true' not in transport.last:
        raise SystemExit(f"not allowed: {transport.last[:300]!r}")
    protocol.connection_lost(None)
    return elapsed


async def compare(runs: int, n: int, profile: bool) -> None:
    ours, bare = serve_app(), bare_endpoint.app
    batches = requests(n * 2 + 200)
    tune_gc()
    await per_request(ours, batches[-200:])  # warm the memos a first request fills
    if profile:
        profiler = cProfile.Profile()
        profiler.enable()
        for r in range(runs):
            await per_request(ours, batches[(r % 2) * n : (r % 2 + 1) * n])
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(45)
        return
    times: dict[str, list[float]] = {"serve": [], "bare": []}
    for r in range(runs):
        batch = batches[(r % 2) * n : (r % 2 + 1) * n]  # the other half: cache misses again
        times["serve"].append(await per_request(ours, batch))
        times["bare"].append(await per_request(bare, batch))
    for name, values in times.items():
        print(f"{name}: best {min(values):.1f} us, median {statistics.median(values):.1f} us")
    cache = ours.state.cache
    print(f"serve's evaluation cache: {cache.hits} hits, {cache.misses} misses")
    extra = statistics.median(times["serve"]) - statistics.median(times["bare"])
    print(f"serve - bare: {extra:.1f} us a request (median), load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    uvloop.run(compare(args.runs, args.requests, args.profile))


if __name__ == "__main__":
    main()
