"""`gpu-admission serve` as a real process, spoken to over real TLS."""

from __future__ import annotations

import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.support.ports import free_port
from tests.support.reviews import VIOLATIONS, pod, review
from tests.support.servers import Server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = Server(tmp_path)
    yield s
    s.stop()


def test_every_rule_over_https(server: Server) -> None:
    for rule, obj in VIOLATIONS:
        r = review(obj)
        resp = server.validate(r)
        assert resp.status_code == 200, rule
        out = resp.json()["response"]
        assert out["uid"] == r["request"]["uid"]
        assert out["allowed"] is False and f"[{rule}]" in out["status"]["message"], rule
    assert (
        server.validate(review(pod(limits={"nvidia.com/mig-3g.40gb": 1}))).json()["response"][
            "allowed"
        ]
        is True
    )


def _serial_seen(port: int, ca_file: Path) -> int:
    from cryptography import x509

    ctx = ssl.create_default_context(cafile=str(ca_file))
    with (
        socket.create_connection(("127.0.0.1", port)) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


def _load(server: Server, stop: threading.Event, results: list[tuple[float, str]]) -> None:
    with httpx.Client(
        verify=ssl.create_default_context(cafile=server.ca_file), timeout=10
    ) as client:
        while not stop.is_set():
            started = time.monotonic()
            try:
                resp = server.validate(review(pod()), client)
                results.append((started, str(resp.status_code)))
            except httpx.HTTPError as exc:
                results.append((started, f"{type(exc).__name__}: {exc}"))


def test_certificate_rotation_while_requests_run(server: Server) -> None:
    stop, results = threading.Event(), []  # type: ignore[var-annotated]
    threads = [threading.Thread(target=_load, args=(server, stop, results)) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    new_serial = server.secret.rotate()
    deadline = time.monotonic() + 10
    while _serial_seen(server.port, server.ca_file) != new_serial:
        assert time.monotonic() < deadline, "the new certificate was never served"
        time.sleep(0.1)
    time.sleep(0.3)
    stop.set()
    for t in threads:
        t.join()
    assert results and all(code == "200" for _, code in results), set(c for _, c in results)


def test_broken_policy_keeps_the_last_good_set_then_a_good_one_takes_effect(server: Server):
    privileged = review(pod(container={"securityContext": {"privileged": True}}))
    assert server.validate(privileged).json()["response"]["allowed"] is False
    target = server.policies / "gpu-device-injection.yaml"
    original = target.read_text()
    target.write_text(original.replace("check: device-injection", "check: no-such-check"))
    deadline = time.monotonic() + 10
    while server.client.get(server.url + "/readyz").json()["policyReloadError"] is None:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert (
        "unknown check 'no-such-check'"
        in server.client.get(server.url + "/readyz").json()["policyReloadError"]
    )
    assert server.validate(privileged).json()["response"]["allowed"] is False  # old set serves
    target.write_text(original.replace("enforcementAction: deny", "enforcementAction: warn"))
    while server.client.get(server.url + "/readyz").json()["policyReloadError"] is not None:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    out = server.validate(privileged).json()["response"]
    assert out["allowed"] is True and out["warnings"][0].startswith("[gpu-device-injection/")
    metrics = server.client.get(server.url + "/metrics").text
    assert 'gpu_admission_policy_reloads_total{result="error"} 1.0' in metrics


def _wait_for(what: str, condition: Callable[[], object]) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.1)


def test_an_emptied_policy_file_is_a_reload_error_and_its_policy_keeps_serving(server: Server):
    """A policy file caught half-written: the file exists, its content does not yet."""
    device = review(
        pod(
            spec={"volumes": [{"name": "dev", "hostPath": {"path": "/dev/nvidia0"}}]},
            container={"volumeMounts": [{"name": "dev", "mountPath": "/dev/nvidia0"}]},
        )
    )
    assert server.validate(device).json()["response"]["allowed"] is False
    target = server.policies / "gpu-device-injection.yaml"
    original = target.read_bytes()

    def readyz() -> dict[str, Any]:
        return dict(server.client.get(server.url + "/readyz").json())

    def metrics() -> str:
        return server.client.get(server.url + "/metrics").text

    for reloads, content in enumerate([b"", b"# being rewritten\n---\n"], start=1):
        target.write_bytes(content)
        _wait_for(
            "a reload error",
            lambda n=reloads: f'reloads_total{{result="error"}} {n}.0' in metrics(),
        )
        assert readyz()["policyReloadError"] == (
            f"{target}: holds no GPUPolicy or WorkloadKinds document (empty, or only "
            "whitespace, comments and ---): a half-written file? To drop its policies, "
            "delete the file"
        )
        assert "gpu-device-injection" in readyz()["policies"]
        assert "gpu_admission_policy_reload_error 1.0" in metrics()
        out = server.validate(device).json()["response"]
        assert out["allowed"] is False
        assert "[gpu-device-injection/hostpath-device]" in out["status"]["message"]
    target.write_bytes(original)
    _wait_for("the error cleared", lambda: readyz()["policyReloadError"] is None)
    assert "gpu_admission_policy_reload_error 0.0" in metrics()


def test_sigterm_during_load_fails_no_request(server: Server) -> None:
    stop, results = threading.Event(), []  # type: ignore[var-annotated]
    threads = [threading.Thread(target=_load, args=(server, stop, results)) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    signalled = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(20) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal
    stop.set()
    for t in threads:
        t.join()
    before = [code for started, code in results if started < signalled - 0.05]
    assert len(before) > 20
    assert all(code == "200" for code in before), [c for c in before if c != "200"][:3]


def test_bad_startup_policies_stop_serve_with_the_error(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "apiVersion: gpu-admission.io/v1alpha1\nkind: GPUPolicy\n"
        "metadata: {name: x}\nspec: {check: nope}\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "serve",
            "--policies",
            str(tmp_path),
            "--port",
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert "field spec.enforcementAction: Field required" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_slow_client_gets_408_and_holds_nothing(tmp_path: Path) -> None:
    server = Server(tmp_path, "--body-timeout", "0.5")
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
            tls.settimeout(5)
            started = time.monotonic()
            answer = tls.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:60]
        assert time.monotonic() - started < 3
        ok = server.validate(review(pod()))  # the server is free for everybody else
        assert ok.status_code == 200
    finally:
        server.stop()


def test_a_body_in_pieces_is_judged_and_a_late_one_gets_408_and_a_close(tmp_path: Path) -> None:
    # The body deadline is the connection layer's (swept, no timer per request): a body
    # that arrives in several reads in time is read whole; one that stops is answered
    # 408 and its connection closed (the rest of the stream would be a stale body).
    server = Server(tmp_path, "--body-timeout", "1")
    body = orjson.dumps(review(pod(container={"securityContext": {"privileged": True}})))
    head = b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
    try:
        ctx = ssl.create_default_context(cafile=str(server.ca_file))
        with (
            socket.create_connection(("127.0.0.1", server.port)) as raw,
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            tls.settimeout(5)
            for _ in range(2):  # twice on one connection: it stays open after a 200
                tls.sendall(head + body[:100])
                time.sleep(0.2)
                tls.sendall(body[100:-50])
                time.sleep(0.2)
                tls.sendall(body[-50:])
                answer = tls.recv(65536)
                assert answer.startswith(b"HTTP/1.1 200"), answer[:60]
                assert b'"allowed":false' in answer and b"privileged" in answer
            tls.sendall(head + body[:100])
            started = time.monotonic()
            answer = b""
            try:
                while chunk := tls.recv(65536):  # until the server closes
                    answer += chunk
            except (ConnectionResetError, ssl.SSLEOFError):
                pass
        assert 0.9 <= time.monotonic() - started < 3  # the deadline, swept 4 times a second
        status, _, rest = answer.partition(b"\r\n")
        assert status == b"HTTP/1.1 408 Request Timeout"
        assert rest.endswith(b'\r\n\r\n{"error":"request body not received within 1s","code":408}')
    finally:
        server.stop()


def test_two_workers_share_the_port_and_stop_together(tmp_path: Path) -> None:
    server = Server(tmp_path, "--workers", "2")
    try:
        answers = {server.validate(review(pod())).status_code for _ in range(20)}
        assert answers == {200}
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(20) == 0
        lines = (tmp_path / "decisions.log").read_bytes().splitlines()
        assert len(lines) >= 20  # every decision reached the shared stdout
    finally:
        server.stop()
