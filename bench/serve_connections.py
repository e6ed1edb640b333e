"""Memory of `gpu-admission serve` under many half-open connections. Not a test.

Starts `serve --workers 1`, opens N connections of one kind at a time, and reads the
server's RSS (/proc/PID/status VmRSS) before, with the connections open, and after they
are gone (closed by the client, or by the server's timeouts):

- tcp: TCP connected, TLS never started (held until the handshake timeout);
- tls: TLS handshake done, nothing sent (held until the head timeout);
- head: a request line and one header, the rest never sent (408 at the head timeout);
- body: headers and 1 KB of a 100 KB body (408 at the body timeout).

    python bench/serve_connections.py [--connections 2000] [--serve-args '--max-connections 5000']
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from serve_load import ROOT, free_port, wait_ready

KINDS = {
    "tcp": None,
    "tls": b"",
    "head": b"POST /validate HTTP/1.1\r\nHost: x\r\n",
    "body": b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b"x" * 1000,
}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def open_connections(port: int, ctx: ssl.SSLContext, kind: str, n: int) -> list[socket.socket]:
    """The connections whose TLS handshake completed (all of them for "tcp")."""
    conns: list[socket.socket] = []
    for _ in range(n):
        raw = socket.create_connection(("127.0.0.1", port))
        if KINDS[kind] is None:
            conns.append(raw)
            continue
        try:
            tls = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
            tls.sendall(KINDS[kind] or b"")
        except OSError:  # closed at once: over --max-connections
            raw.close()
            continue
        conns.append(tls)
    return conns


def still_open(conns: list[socket.socket]) -> int:
    """Connections the server has neither answered nor closed."""
    alive = 0
    for c in conns:
        c.setblocking(False)
        with contextlib.suppress(OSError):
            try:
                c.recv(1)
            except (BlockingIOError, ssl.SSLWantReadError):
                alive += 1
    return alive


def measure(pid: int, port: int, ctx: ssl.SSLContext, kind: str, n: int, hold: float) -> str:
    before = rss_mib(pid)
    conns = open_connections(port, ctx, kind, n)
    time.sleep(1)
    peak = rss_mib(pid)
    time.sleep(hold)
    held = still_open(conns)
    for c in conns:
        c.close()
    time.sleep(12)  # the server notices, closes, and trims once the burst is over
    after = rss_mib(pid)
    return (
        f"| {kind} | {n} | {len(conns)} | {held} | {before:.0f} | {peak:.0f} "
        f"| {(peak - before) * 1024 / max(len(conns), 1):.0f} | {after:.0f} |"
    )


def start_serve(work: Path, extra: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    """`serve --workers 1` on a free port with certificates made in `work` (ca.crt,
    tls.crt, tls.key) and the example inventory; its stderr in work/serve.err."""
    subprocess.run(
        [sys.executable, "-m", "webhook", "certs", "--service", "gpu-admission",
         "--namespace", "gpu-admission-system", "--out", str(work)],
        check=True, stdout=subprocess.DEVNULL, cwd=ROOT,
    )  # fmt: skip
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhook", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--inventory", str(ROOT / "examples/cluster/nodes.json"),
         "--tls-cert-file", str(work / "tls.crt"), "--tls-key-file", str(work / "tls.key"),
         *extra],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=(work / "serve.err").open("wb"),
    )  # fmt: skip
    return proc, port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--hold", type=float, default=7.0, help="seconds before checking")
    parser.add_argument("--serve-args", default="", help="extra arguments for serve")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-conn-"))
    proc, port = start_serve(work, shlex.split(args.serve_args))
    try:
        wait_ready(f"https://127.0.0.1:{port}", proc, work / "serve.err")
        ctx = ssl.create_default_context(cafile=str(work / "ca.crt"))
        ctx.check_hostname = False
        print(f"serve --workers 1 {args.serve_args}; {os.cpu_count()} cores; RSS in MiB\n")
        print("| kind | opened | handshakes | open after hold | RSS before | RSS open "
              "| KiB/conn | RSS after |")  # fmt: skip
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for kind in KINDS:
            print(measure(proc.pid, port, ctx, kind, args.connections, args.hold), flush=True)
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
