"""Connections to a real `serve` over TLS, the way a hostile or broken client makes them.

The server runs uvicorn's httptools protocol with the limits of
webhook/serve/connections.py; 408 on a slow head, 431 and the connection cap exist
only there, so these tests also show which stack serves.
"""

from __future__ import annotations

import socket
import ssl
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.support.reviews import pod, review
from tests.support.servers import Server

HEADER_TIMEOUT = 1.0
KEEP_ALIVE = 1.5


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(
        tmp_path_factory.mktemp("conn"),
        "--header-timeout", str(HEADER_TIMEOUT),
        "--keep-alive-timeout", str(KEEP_ALIVE),
        "--max-in-flight", "2",
        "--body-timeout", "30",
    )  # fmt: skip
    yield s
    s.stop()


def connect(server: Server) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(server.ca_file))
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=20)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def read_until_closed(tls: ssl.SSLSocket, timeout: float = 20) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and how long that took."""
    tls.settimeout(timeout)
    started, data = time.monotonic(), b""
    try:
        while chunk := tls.recv(65536):
            data += chunk
    except (ConnectionResetError, ssl.SSLEOFError):
        pass
    return data, time.monotonic() - started


def read_response(tls: ssl.SSLSocket) -> bytes:
    """One response with a Content-Length, on a connection that stays open."""
    tls.settimeout(20)
    data = b""
    while b"\r\n\r\n" not in data:
        data += tls.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.startswith(b"content-length")
    )
    while len(body) < length:
        body += tls.recv(65536)
    return head + b"\r\n\r\n" + body


def status_and_body(answer: bytes) -> tuple[int, bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_a_connection_that_sends_nothing_is_closed_after_the_header_timeout(
    server: Server,
) -> None:
    with connect(server) as tls:
        answer, waited = read_until_closed(tls)
    assert answer == b""
    assert HEADER_TIMEOUT * 0.9 < waited < HEADER_TIMEOUT + 5


def test_a_head_sent_a_line_at_a_time_gets_408(server: Server) -> None:
    with connect(server) as tls:
        tls.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\n")
        tls.settimeout(0.2)
        lines = 0
        started = time.monotonic()
        while time.monotonic() - started < HEADER_TIMEOUT + 5:
            try:
                tls.sendall(b"X-Slow: %d\r\n" % lines)
                lines += 1
                if answer := tls.recv(4096):
                    break
            except TimeoutError:
                continue
            except OSError:
                answer = b""
                break
        answer += read_until_closed(tls)[0]
    assert status_and_body(answer) == (
        408,
        b'{"error":"request line and headers not received within 1s","code":408}',
    )
    assert lines < (HEADER_TIMEOUT + 5) / 0.2


@pytest.mark.parametrize("pieces", [1, 64], ids=["one write", "64 writes"])
def test_a_64_kib_header_gets_431(server: Server, pieces: int) -> None:
    value = b"a" * (64 * 1024)
    with connect(server) as tls:
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ")
        step = len(value) // pieces
        try:
            for i in range(pieces):
                tls.sendall(value[i * step : (i + 1) * step])
            tls.sendall(b"\r\n\r\n")
        except OSError:
            pass  # closed after the 431: the rest was never wanted
        answer, _ = read_until_closed(tls)
    assert status_and_body(answer) == (
        431,
        b'{"error":"request line and headers over 16384 bytes","code":431}',
    )
    assert b"\r\nconnection: close\r\n" in answer


def test_an_idle_keep_alive_connection_is_closed(server: Server) -> None:
    with connect(server) as tls:
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer, waited = read_until_closed(tls)
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"\r\n\r\nok")
    assert KEEP_ALIVE * 0.9 < waited < KEEP_ALIVE + 5


def _partial_body(server: Server) -> ssl.SSLSocket:
    tls = connect(server)
    tls.sendall(
        b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n{"
    )
    return tls


def test_a_client_that_leaves_mid_body_leaves_no_traceback(server: Server) -> None:
    for _ in range(3):
        _partial_body(server).close()
    time.sleep(0.5)
    assert server.validate(review(pod())).status_code == 200
    log = server.stderr_file.read_text()
    assert "Traceback" not in log and "Exception in ASGI application" not in log, log


def test_requests_over_max_in_flight_get_503_and_probes_still_answer(server: Server) -> None:
    held = [_partial_body(server), _partial_body(server)]  # in flight: waiting for bodies
    try:
        time.sleep(0.3)
        refused = server.validate(review(pod()))
        assert refused.status_code == 503
        assert refused.json() == {
            "error": "over capacity: 2 requests in flight (--max-in-flight)",
            "code": 503,
        }
        assert refused.headers["connection"] == "close"
        assert server.client.get(server.url + "/healthz").status_code == 200
    finally:
        for tls in held:
            tls.close()
    deadline = time.monotonic() + 10
    while server.validate(review(pod())).status_code == 503:
        assert time.monotonic() < deadline, "capacity was never given back"
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("request_bytes", "status", "message"),
    [
        (b"NOT HTTP AT ALL\r\n\r\n", 400, b"Invalid HTTP request received."),
        (
            b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{nope",
            400,
            b'{"error":"body is not valid JSON: Expecting property name enclosed in double '
            b'quotes: line 1 column 2 (char 1)","code":400}',
        ),
        (
            b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: 4194304\r\n\r\n{",
            413,
            b'{"error":"request body over 3145728 bytes","code":413}',
        ),
    ],
    ids=["not HTTP", "not JSON", "over 3 MiB"],
)
def test_bad_requests_get_4xx(
    server: Server, request_bytes: bytes, status: int, message: bytes
) -> None:
    with connect(server) as tls:
        tls.sendall(request_bytes)
        answer = read_response(tls)
    assert status_and_body(answer) == (status, message)


def test_responses_on_a_kept_alive_connection_are_not_held_back(server: Server) -> None:
    """Nagle: with TCP_NODELAY off, the second TLS record of a response (uvicorn's head
    and body went out as two; a large response still does) waits for the client's
    delayed ACK, ~40 ms per request."""
    body = orjson.dumps(review(pod()))
    ctx = ssl.create_default_context(cafile=str(server.ca_file))
    with httpx.Client(verify=ctx, timeout=20) as client:
        times = []
        for _ in range(30):
            started = time.perf_counter()
            client.post(server.url + "/validate", content=body).raise_for_status()
            times.append(time.perf_counter() - started)
    assert statistics.median(times) < 0.02, times


@pytest.mark.parametrize("path", ["/validate", "/healthz"])
def test_a_response_comes_in_one_tls_record(server: Server, path: str) -> None:
    """Head and body in one write: one TLS record and one send(2) per response, not two.
    SSL_read returns the plaintext of one record at most, so one recv sees it all."""
    body = orjson.dumps(review(pod()))
    method = b"POST" if path == "/validate" else b"GET"
    request = b"%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (
        method,
        path.encode(),
        len(body) if method == b"POST" else 0,
    )
    with connect(server) as tls:
        for _ in range(3):  # kept alive: every response, not only the first
            tls.sendall(request + (body if method == b"POST" else b""))
            tls.settimeout(20)
            head, _, rest = tls.recv(65536).partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 OK"), head
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            assert len(rest) == length, (head, rest)


def test_connections_over_the_cap_are_closed_at_once(tmp_path: Path) -> None:
    server = Server(tmp_path, "--max-connections", "3", "--header-timeout", "30")
    server.client.close()  # its kept-alive connection would take a place
    try:
        time.sleep(0.5)
        held = [connect(server) for _ in range(3)]
        for tls in held:
            tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert tls.recv(4096).startswith(b"HTTP/1.1 200 ")
        with connect(server) as extra:
            answer, waited = read_until_closed(extra)
        assert answer == b"" and waited < 5  # not the 30 s head timeout
        held.pop().close()
        time.sleep(0.5)
        with connect(server) as again:
            again.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            again.settimeout(20)
            assert again.recv(4096).startswith(b"HTTP/1.1 200 ")
        for tls in held:
            tls.close()
        assert "connections open (--max-connections): closing new ones" in (
            server.stderr_file.read_text()
        )
    finally:
        server.stop()
