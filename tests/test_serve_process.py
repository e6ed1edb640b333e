"""`gpu-admission serve` as a real process, spoken to over real TLS."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from conftest import free_port
from reviews import VIOLATIONS, pod, review

from webhook import certs

ROOT = Path(__file__).resolve().parents[1]


class SecretDir:
    """A directory laid out like a mounted Kubernetes Secret: files behind a ..data link."""

    def __init__(self, base: Path, ca: Any) -> None:
        self.base, self.ca, self.version = base, ca, 0
        base.mkdir()
        for name in ("tls.crt", "tls.key"):
            (base / name).symlink_to(Path("..data") / name)
        self.rotate()

    def rotate(self) -> int:
        leaf = certs.make_serving_cert(
            ca=self.ca, dns_names=["localhost"], ip_addresses=["127.0.0.1"], days=1
        )
        self.version += 1
        target = self.base / f"..v{self.version}"
        target.mkdir()
        (target / "tls.crt").write_bytes(leaf.cert_pem)
        (target / "tls.key").write_bytes(leaf.key_pem)
        tmp = self.base / "..data_tmp"
        tmp.symlink_to(target.name)
        os.replace(tmp, self.base / "..data")  # the kubelet's atomic swap
        return int(leaf.cert.serial_number)


class Server:
    def __init__(self, tmp: Path, *extra: str) -> None:
        self.ca = certs.make_ca(common_name="test CA", days=1)
        (tmp / "ca.crt").write_bytes(self.ca.cert_pem)
        self.ca_file = tmp / "ca.crt"
        self.secret = SecretDir(tmp / "secret", self.ca)
        self.policies = tmp / "policies"
        shutil.copytree(ROOT / "policies", self.policies)
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "webhook",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--policies",
                str(self.policies),
                "--inventory",
                str(ROOT / "examples/cluster/nodes.json"),
                "--tls-cert-file",
                str(self.secret.base / "tls.crt"),
                "--tls-key-file",
                str(self.secret.base / "tls.key"),
                "--reload-interval",
                "0.2",
                *extra,
            ],
            # Files, not pipes: nobody reads a pipe here, and a full one would stall the
            # server on its decision log.
            stdout=(tmp / "decisions.log").open("wb"),
            stderr=(tmp / "serve.err").open("wb"),
        )
        self.stderr_file = tmp / "serve.err"
        self.client = httpx.Client(verify=str(self.ca_file), timeout=10)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if self.client.get(self.url + "/readyz").status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server did not get ready: {self.stderr_file.read_text()}")

    def validate(self, body: Any, client: httpx.Client | None = None) -> httpx.Response:
        return (client or self.client).post(
            self.url + "/validate",
            content=orjson.dumps(body),
            headers={"content-type": "application/json"},
        )

    def stop(self) -> None:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()


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
    with httpx.Client(verify=str(server.ca_file), timeout=10) as client:
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
