"""RSS of `gpu-admission serve` under the hostile loads of issue 9. Not a test.

Starts `serve --workers 1` with its default caches and sends, one load after another on
one keep-alive connection, the requests that grew the server before issue 9 (from 70 MB
to 613 MB, 1.26 GB and 2.2 GB against the Deployment's 512Mi limit):

- env: distinct GPU Pods, each with a 250 KB env value;
- tolerations: distinct GPU Pods, each with 1,000 tolerations (~60 KB);
- hostpath: distinct Pods, each with a 1 MB hostPath path (denied requests are kept too);
- kinds: AdmissionReviews of made-up kinds, each a new name (metric label values).

For each it prints the server's RSS (/proc/PID/status VmRSS, sampled every 20 ms)
before, at its peak and after, and checks every answer is a review (200).

    python bench/serve_memory.py [--scale 1.0]   (--scale 0.1 for a quick look)
"""

from __future__ import annotations

import argparse
import copy
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
from serve_connections import rss_mib, start_serve
from serve_load import review, wait_ready


def env_pod(i: int) -> dict[str, Any]:
    body = review(i)
    env = body["request"]["object"]["spec"]["containers"][0]["env"]
    env.append({"name": "BLOB", "value": f"{i:08d}" + "x" * 250_000})
    return body


def tolerations_pod(i: int) -> dict[str, Any]:
    body = review(i)
    body["request"]["object"]["spec"]["tolerations"] = [
        {"key": f"example.com/taint-{i}-{t}", "operator": "Exists", "effect": "NoSchedule"}
        for t in range(1000)
    ]
    return body


def hostpath_pod(i: int) -> dict[str, Any]:
    body = review(i)
    spec = body["request"]["object"]["spec"]
    path = f"/dev/nvidia0/{i:08d}/" + "p" * 1_000_000
    spec["volumes"].append({"name": "dev", "hostPath": {"path": path}})
    return body


def kind_review(i: int) -> dict[str, Any]:
    body = copy.deepcopy(review(i))
    for field in ("kind", "requestKind"):
        body["request"][field] = {"group": "example.com", "version": "v1", "kind": f"K{i}"}
    return body


LOADS: dict[str, tuple[Callable[[int], dict[str, Any]], int]] = {
    "env": (env_pod, 2100),
    "tolerations": (tolerations_pod, 4200),
    "hostpath": (hostpath_pod, 1100),
    "kinds": (kind_review, 5000),
}


class Peak:
    """The highest RSS of a process while running, sampled on a thread."""

    def __init__(self, pid: int) -> None:
        self.pid, self.value, self._stop = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.value = max(self.value, rss_mib(self.pid))


def bodies(make: Callable[[int], dict[str, Any]], count: int) -> Iterator[bytes]:
    for i in range(count):
        yield orjson.dumps(make(i))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of each load")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-mem-"))
    proc, port = start_serve(work, [])
    url = f"https://127.0.0.1:{port}"
    try:
        wait_ready(url, proc, work / "serve.err")
        print(f"serve --workers 1, default caches; {os.cpu_count()} cores; RSS in MiB\n")
        print("| load | requests | bytes sent | RSS before | RSS peak | RSS after | not 200 |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        with httpx.Client(verify=False, timeout=30) as client:
            for name, (make, count) in LOADS.items():
                count = max(1, int(count * args.scale))
                before, sent, bad = rss_mib(proc.pid), 0, 0
                with Peak(proc.pid) as peak:
                    for body in bodies(make, count):
                        sent += len(body)
                        answer = client.post(url + "/validate", content=body)
                        bad += answer.status_code != 200
                time.sleep(1)
                print(
                    f"| {name} | {count:,} | {sent / 2**20:,.0f} MiB | {before:.0f} "
                    f"| {max(peak.value, before):.0f} | {rss_mib(proc.pid):.0f} | {bad} |",
                    flush=True,
                )
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
