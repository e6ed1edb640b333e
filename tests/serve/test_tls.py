"""TLS reload (webhook.serve.tls) through a real uvicorn server and real TLS clients.

The certificate directory is laid out as the kubelet lays out a mounted Secret:
`tls.crt -> ..data/tls.crt`, `..data -> ..<version>`, and an update is an atomic
rename of the `..data` symlink.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from cryptography.hazmat.primitives import serialization
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from webhook.serve import certs, tls
from webhook.serve.tls import CertificateError, ReloadingTLS, ReloadOutcome

POLL = 0.02


@pytest.fixture(scope="module")
def ca() -> certs.KeyPair:
    return certs.make_ca(common_name="test CA", days=2)


def serving(ca: certs.KeyPair) -> certs.KeyPair:
    return certs.make_serving_cert(
        ca=ca, dns_names=["localhost"], ip_addresses=["127.0.0.1"], days=1
    )


class SecretMount:
    """A directory updated the way the kubelet updates a mounted Secret."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.version = 0

    def publish(self, files: dict[str, bytes]) -> None:
        self.version += 1
        target = self.root / f"..2026_11_30_{self.version:04d}"
        target.mkdir()
        for name, data in files.items():
            (target / name).write_bytes(data)
        staging = self.root / "..data_tmp"
        staging.symlink_to(target.name)
        os.replace(staging, self.root / "..data")  # the atomic swap
        for name in files:
            link = self.root / name
            if not link.is_symlink():
                link.symlink_to(f"..data/{name}")

    def publish_pair(self, pair: certs.KeyPair) -> None:
        self.publish({"tls.crt": pair.cert_pem, "tls.key": pair.key_pem})

    def reloading_tls(self, *, client_ca: Path | None = None) -> ReloadingTLS:
        return ReloadingTLS(
            cert_file=self.root / "tls.crt",
            key_file=self.root / "tls.key",
            client_ca_file=client_ca,
        )


@pytest.fixture
def mount(tmp_path: Path) -> SecretMount:
    (tmp_path / "certs").mkdir()
    return SecretMount(tmp_path / "certs")


def der(pair: certs.KeyPair) -> bytes:
    return pair.cert.public_bytes(serialization.Encoding.DER)


def served_cert(port: int, ca: certs.KeyPair, *, client: certs.KeyPair | None = None) -> bytes:
    """DER of the certificate a fresh handshake gets."""
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    if client is not None:
        with _pem_files(client) as (cert, key):
            context.load_cert_chain(cert, key)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as conn,
    ):
        peer = conn.getpeercert(binary_form=True)
        assert peer is not None
        return peer


@contextlib.contextmanager
def _pem_files(pair: certs.KeyPair) -> Iterator[tuple[str, str]]:
    with tempfile.TemporaryDirectory() as d:
        cert, key = Path(d) / "c.pem", Path(d) / "k.pem"
        cert.write_bytes(pair.cert_pem)
        key.write_bytes(pair.key_pem)
        yield str(cert), str(key)


def app_for(context: ReloadingTLS) -> Starlette:
    """The wiring docs/deploy.md and the tls module docstring describe."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        task = asyncio.create_task(context.poll(interval=POLL))
        yield
        task.cancel()

    async def healthz(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/healthz", healthz)], lifespan=lifespan)


@contextlib.contextmanager
def running(context: ReloadingTLS) -> Iterator[int]:
    """A real uvicorn server in a thread, TLS via ssl_context_factory; yields its port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        app_for(context), ssl_context_factory=context.ssl_context_factory, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)


def wait_for(condition: Callable[[], bool], *, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(POLL)


# --- the context ------------------------------------------------------------------


def test_server_context_settings(ca: certs.KeyPair, mount: SecretMount, tmp_path: Path) -> None:
    mount.publish_pair(serving(ca))
    plain = mount.reloading_tls().context
    assert plain.minimum_version == ssl.TLSVersion.TLSv1_2
    assert plain.verify_mode == ssl.CERT_NONE
    (tmp_path / "client-ca.crt").write_bytes(ca.cert_pem)
    mutual = mount.reloading_tls(client_ca=tmp_path / "client-ca.crt").context
    assert mutual.verify_mode == ssl.CERT_REQUIRED


def test_missing_files_fail_at_start(tmp_path: Path) -> None:
    with pytest.raises(CertificateError, match=r"cannot load TLS certificate .*tls.crt .*"):
        ReloadingTLS(cert_file=tmp_path / "tls.crt", key_file=tmp_path / "tls.key")


def test_mismatched_pair_fails_at_start(ca: certs.KeyPair, mount: SecretMount) -> None:
    a, b = serving(ca), serving(ca)
    mount.publish({"tls.crt": a.cert_pem, "tls.key": b.key_pem})
    with pytest.raises(CertificateError, match="key values mismatch"):
        mount.reloading_tls()


def test_reload_outcomes(
    ca: certs.KeyPair, mount: SecretMount, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = serving(ca), serving(ca)
    mount.publish_pair(first)
    context = mount.reloading_tls()
    assert context.maybe_reload() is ReloadOutcome.UNCHANGED
    mount.publish_pair(first)  # same content, new directory and mtime
    assert context.maybe_reload() is ReloadOutcome.UNCHANGED
    mount.publish({"tls.crt": second.cert_pem, "tls.key": first.key_pem})
    with caplog.at_level(logging.ERROR, logger="webhook.serve.tls"):
        assert context.maybe_reload() is ReloadOutcome.FAILED
        assert context.maybe_reload() is ReloadOutcome.FAILED
    assert context.last_error is not None
    assert "key values mismatch" in context.last_error.reason
    assert len(caplog.records) == 1  # reported once, not at every poll
    assert caplog.records[0].getMessage().endswith("; still serving the previous certificate")
    mount.publish_pair(second)
    assert context.maybe_reload() is ReloadOutcome.RELOADED
    assert context.last_error is None


# --- through uvicorn ----------------------------------------------------------------


def test_rotation_under_load_fails_no_request(ca: certs.KeyPair, mount: SecretMount) -> None:
    """New handshakes get each new certificate; broken updates keep the old one; a
    loop of requests (each on a new connection) and a kept-alive connection never fail."""
    first, second, third = serving(ca), serving(ca), serving(ca)
    mount.publish_pair(first)
    context = mount.reloading_tls()
    verify = ssl.create_default_context(cadata=ca.cert_pem.decode())
    failures: list[BaseException] = []
    done = threading.Event()
    counts = {"fresh": 0, "kept": 0}

    def hammer(port: int) -> None:
        fresh = httpx.Client(verify=verify, limits=httpx.Limits(max_keepalive_connections=0))
        kept = httpx.Client(verify=verify)
        with fresh, kept:
            while not done.is_set():
                for name, client in (("fresh", fresh), ("kept", kept)):
                    try:
                        response = client.get(f"https://localhost:{port}/healthz")
                        assert response.text == "ok"
                        counts[name] += 1
                    except BaseException as e:  # any failure is the finding
                        failures.append(e)

    def hold() -> None:
        # Let both clients make requests in the current state before the next change.
        target = {name: n + 5 for name, n in counts.items()}
        wait_for(lambda: all(counts[k] >= v for k, v in target.items()) or bool(failures))

    with running(context) as port:
        loop = threading.Thread(target=hammer, args=(port,))
        loop.start()
        try:
            hold()
            assert served_cert(port, ca) == der(first)
            mount.publish_pair(second)
            wait_for(lambda: served_cert(port, ca) == der(second))
            hold()
            # A key that does not match, then a half-written certificate: both kept out.
            mount.publish({"tls.crt": third.cert_pem, "tls.key": second.key_pem})
            wait_for(lambda: context.last_error is not None)
            hold()
            assert served_cert(port, ca) == der(second)
            mount.publish({"tls.crt": third.cert_pem[:200], "tls.key": third.key_pem})
            wait_for(lambda: "PEM" in str(context.last_error))
            hold()
            assert served_cert(port, ca) == der(second)
            mount.publish_pair(third)
            wait_for(lambda: served_cert(port, ca) == der(third))
            hold()
        finally:
            done.set()
            loop.join(10)
    assert failures == []
    assert min(counts.values()) >= 25, counts


def test_client_certificate_required_with_a_client_ca(
    ca: certs.KeyPair, mount: SecretMount, tmp_path: Path
) -> None:
    client_ca = certs.make_ca(common_name="client CA", days=1)
    (tmp_path / "client-ca.crt").write_bytes(client_ca.cert_pem)
    mount.publish_pair(serving(ca))
    context = mount.reloading_tls(client_ca=tmp_path / "client-ca.crt")
    apiserver = certs.make_client_cert(ca=client_ca, common_name="kube-apiserver", days=1)
    stranger = certs.make_client_cert(ca=ca, common_name="stranger", days=1)
    with running(context) as port:
        assert _get(port, ca, client=apiserver).startswith(b"HTTP/1.1 200 OK")
        assert _get(port, ca, client=None) == b"refused"
        assert _get(port, ca, client=stranger) == b"refused"


def _get(port: int, ca: certs.KeyPair, *, client: certs.KeyPair | None) -> bytes:
    """The start of the response to GET /healthz, or b"refused".

    With TLS 1.3 the client's handshake completes before the server checks the client
    certificate; the refusal shows on the first read, as an alert or a closed stream.
    """
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    if client is not None:
        with _pem_files(client) as (cert, key):
            context.load_cert_chain(cert, key)
    request = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname="localhost") as conn,
        ):
            conn.sendall(request)
            return conn.recv(1024) or b"refused"
    except (ssl.SSLError, ConnectionError):
        return b"refused"


def test_self_signed_for_localhost(tmp_path: Path) -> None:
    paths = tls.self_signed_for_localhost(directory=tmp_path / "local")
    context = ReloadingTLS(cert_file=paths.cert_file, key_file=paths.key_file)
    trust = ssl.create_default_context(cafile=str(paths.ca_file))
    with running(context) as port:
        for host in ("localhost", "127.0.0.1"):
            response = httpx.get(f"https://{host}:{port}/healthz", verify=trust)
            assert response.text == "ok"
    assert oct(paths.key_file.stat().st_mode & 0o777) == "0o600"
