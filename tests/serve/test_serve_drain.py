"""SIGTERM under keep-alive load: a real `serve` over TLS stops without failing a request.

Each client thread keeps one connection alive and sends requests back to back, as the
apiserver does. A request counts as sent once it went out on a connection the server
had not closed: such a request must get a full response. A client that can no longer
connect (the listener is closed) sent nothing, which is the point of the drain.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest

from tests.support.reviews import pod, review
from tests.support.servers import Server

CLIENTS = 8


class Outcome(NamedTuple):
    started: float
    result: str  # "200", or the exception's name
    connection: str  # the response's Connection header ("" when none)
    finished: float = 0.0  # when the response had arrived


def _keep_alive_client(server: Server, outcomes: list[Outcome]) -> None:
    """Requests back to back on one kept-alive connection until the server is gone."""
    ctx = ssl.create_default_context(cafile=server.ca_file)
    with httpx.Client(verify=ctx, timeout=20) as client:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            started = time.monotonic()
            try:
                resp = server.validate(review(pod()), client)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                outcomes.append(Outcome(started, type(exc).__name__, ""))
                return  # the listener is closed: nothing was sent
            except httpx.HTTPError as exc:
                outcomes.append(Outcome(started, f"{type(exc).__name__}: {exc}", ""))
                return
            connection = resp.headers.get("connection", "")
            outcomes.append(Outcome(started, str(resp.status_code), connection, time.monotonic()))


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_under_keep_alive_load_fails_no_request(tmp_path: Path, workers: str) -> None:
    server = Server(tmp_path, "--workers", workers, "--grace-period", "10")
    try:
        per_client: list[list[Outcome]] = [[] for _ in range(CLIENTS)]
        threads = [
            threading.Thread(target=_keep_alive_client, args=(server, outcomes))
            for outcomes in per_client
        ]
        for t in threads:
            t.start()
        time.sleep(1.5)
        signalled = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        exit_code = server.proc.wait(30)
        exited = time.monotonic() - signalled
        for t in threads:
            t.join(60)
        assert exit_code in (0, -signal.SIGTERM)
        assert exited < 10, f"took {exited:.1f}s to exit (grace period 10s)"
        for outcomes in per_client:
            *answered, last = outcomes
            failed = [o.result for o in answered if o.result != "200"]
            assert not failed, failed
            # The connection ended because the server said so, then it refused new ones.
            assert last.result in ("ConnectError", "ConnectTimeout"), last
            assert answered[-1].connection == "close" and answered[-1].started > signalled
            # A request in flight at the signal may be answered with close (it is answered
            # after the drain began); one answered before the signal never is.
            assert all(o.connection != "close" for o in answered if o.finished < signalled)
        assert sum(len(o) for o in per_client) > 5 * CLIENTS
    finally:
        server.stop()


def test_a_request_that_never_completes_does_not_hold_the_exit(tmp_path: Path) -> None:
    server = Server(tmp_path, "--grace-period", "1", "--body-timeout", "60")
    try:
        ctx = ssl.create_default_context(cafile=str(server.ca_file))
        with (
            socket.create_connection(("127.0.0.1", server.port)) as raw,
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            tls.sendall(
                b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                b"\r\nContent-Length: 1000\r\n\r\n{"
            )
            time.sleep(0.3)  # the request is in flight, waiting for its body
            signalled = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            assert server.proc.wait(30) in (0, -signal.SIGTERM)
            # The grace period, then uvicorn cancels the request; the TLS close the rest.
            assert time.monotonic() - signalled < 1 + 5
            answer = b""
            with contextlib.suppress(ssl.SSLEOFError, ConnectionResetError):
                while chunk := tls.recv(4096):  # the server closes after the answer
                    answer += chunk
        assert answer.startswith(b"HTTP/1.1 503 "), answer
        assert answer.endswith(
            b'{"error":"shutting down: the grace period ended first","code":503}'
        )
        log = server.stderr_file.read_text()
        assert "a request was still running when the grace period ended" in log
        assert "Traceback" not in log, log
    finally:
        server.stop()
