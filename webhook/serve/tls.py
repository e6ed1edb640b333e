"""Server-side TLS whose certificate can be replaced while the server runs.

A Kubernetes Secret mounted as a volume (without subPath) is updated in place: the
kubelet writes the new files into a fresh directory and swaps the ``..data`` symlink
atomically, with no file event one can rely on. uvicorn has no certificate reload,
but OpenSSL copies the certificate into each connection when it is accepted, so
calling ``load_cert_chain`` again on the *same* ``SSLContext`` serves the new
certificate on new handshakes, while open connections finish with the old one.

How the server wires it (the installed uvicorn, 0.54, has ``ssl_context_factory``)::

    tls = ReloadingTLS(cert_file=cert, key_file=key, client_ca_file=client_ca)
    config = uvicorn.Config(app, host="0.0.0.0", port=8443,
                            ssl_context_factory=tls.ssl_context_factory)
    # in the app's lifespan, on the event loop:
    task = asyncio.create_task(tls.poll(interval=10.0))   # cancel it on shutdown

With an older uvicorn, call ``config.load()`` and then set ``config.ssl =
tls.context`` before ``uvicorn.Server(config).serve()`` (serve does not load a
loaded config twice). Reload on the event loop (``poll`` does): handshakes read the
context on that thread, so the swap never races one. Without ``--tls-cert-file``,
``self_signed_for_localhost`` makes a throwaway CA and certificate for local runs.

A reload is all or nothing: the files are read once, the pair is loaded into a
scratch context first, and only a pair that loads there replaces the current one. A
half-written file or a key that does not match its certificate leaves the old pair
in place and is reported (``ReloadOutcome.FAILED``, ``last_error``, one log line per
distinct broken content). A client CA file is reloaded too, but OpenSSL can only add
trust: removing a client CA needs a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import hashlib
import logging
import os
import ssl
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from cryptography import x509

from webhook.serve import certs

log = logging.getLogger(__name__)


class CertificateError(Exception):
    """The certificate and key files could not be loaded as a matching pair."""

    def __init__(self, *, cert_file: Path, key_file: Path, reason: str) -> None:
        super().__init__(f"cannot load TLS certificate {cert_file} with key {key_file}: {reason}")
        self.cert_file = cert_file
        self.key_file = key_file
        self.reason = reason


class ReloadOutcome(enum.Enum):
    UNCHANGED = "unchanged"
    RELOADED = "reloaded"
    FAILED = "failed"


@dataclass(frozen=True)
class _Snapshot:
    """The bytes of the files at one moment, and a digest to compare moments."""

    cert: bytes
    key: bytes
    client_ca: bytes | None

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for part in (self.cert, self.key, self.client_ca or b""):
            # Length-prefixed, so moving bytes from one file to the next changes it.
            h.update(len(part).to_bytes(8, "big"))
            h.update(part)
        return h.hexdigest()


class ReloadingTLS:
    """An ``ssl.SSLContext`` for the server, reloadable from its files in place."""

    def __init__(
        self, *, cert_file: Path, key_file: Path, client_ca_file: Path | None = None
    ) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.client_ca_file = client_ca_file
        self.last_error: CertificateError | None = None
        snapshot = self._read()
        self.context = _server_context(require_client_cert=client_ca_file is not None)
        self._load(self.context, snapshot)
        self._digest = snapshot.digest
        self._failed_digest: str | None = None

    def maybe_reload(self) -> ReloadOutcome:
        """Load the files again if their content changed; keep the old pair on failure."""
        try:
            snapshot = self._read()
        except CertificateError as e:
            return self._failed(e, digest=f"unreadable: {e.reason}")
        digest = snapshot.digest
        if digest == self._digest:
            return ReloadOutcome.UNCHANGED
        if digest == self._failed_digest:
            return ReloadOutcome.FAILED  # the same broken content, already reported
        try:
            # OpenSSL installs the certificate before it checks the key, so a failed
            # load on the live context could leave it with a new certificate and no
            # usable key. Load into a scratch context first; the live one only
            # gets a pair that is known to load.
            self._load(_server_context(require_client_cert=False), snapshot)
            self._load(self.context, snapshot)
        except CertificateError as e:
            return self._failed(e, digest=digest)
        self._digest = digest
        self._failed_digest = None
        self.last_error = None
        log.info("TLS certificate reloaded: %s", describe(snapshot.cert))
        return ReloadOutcome.RELOADED

    async def poll(self, *, interval: float) -> None:
        """Check the files every ``interval`` seconds, forever; cancel to stop."""
        while True:
            await asyncio.sleep(interval)
            try:
                self.maybe_reload()
            except Exception:
                # A bug here must not end the polling and freeze the certificate.
                log.exception("TLS certificate reload check failed")

    def ssl_context_factory(
        self, config: object, default: Callable[[], ssl.SSLContext]
    ) -> ssl.SSLContext:
        """``uvicorn.Config(ssl_context_factory=...)``: hand uvicorn our context."""
        # uvicorn's own factory would offer the ALPN protocols of its HTTP
        # implementation (h2 with some); keep that, it is not ours to decide.
        protocol_class = getattr(config, "http_protocol_class", None)
        alpn: list[str] | None = getattr(protocol_class, "alpn_protocols", None)
        if alpn:
            self.context.set_alpn_protocols(alpn)
        return self.context

    def _read(self) -> _Snapshot:
        try:
            client_ca = self.client_ca_file.read_bytes() if self.client_ca_file else None
            return _Snapshot(
                cert=self.cert_file.read_bytes(),
                key=self.key_file.read_bytes(),
                client_ca=client_ca,
            )
        except OSError as e:
            raise self._error(f"{e.strerror}: {e.filename}") from e

    def _load(self, context: ssl.SSLContext, snapshot: _Snapshot) -> None:
        # ssl.SSLError and memfd failures are OSErrors; bad ASCII is a ValueError.
        try:
            with _pem_path(snapshot.cert) as cert, _pem_path(snapshot.key) as key:
                context.load_cert_chain(cert, key)
            if snapshot.client_ca is not None:
                context.load_verify_locations(cadata=snapshot.client_ca.decode("ascii"))
        except (OSError, ValueError) as e:
            raise self._error(str(e)) from e

    def _failed(self, error: CertificateError, *, digest: str) -> ReloadOutcome:
        self.last_error = error
        # Broken content stays broken until someone writes the files again:
        # say so once per content, not at every poll.
        if digest != self._failed_digest:
            log.error("%s; still serving the previous certificate", error)
        self._failed_digest = digest
        return ReloadOutcome.FAILED

    def _error(self, reason: str) -> CertificateError:
        return CertificateError(cert_file=self.cert_file, key_file=self.key_file, reason=reason)


class LocalhostCerts(NamedTuple):
    cert_file: Path
    key_file: Path
    ca_file: Path


def self_signed_for_localhost(
    *, directory: Path, extra_dns_names: tuple[str, ...] = (), days: int = 30
) -> LocalhostCerts:
    """A throwaway CA and a certificate for localhost, 127.0.0.1 and ::1 in ``directory``.

    For ``serve`` without ``--tls-cert-file``: clients trust ``ca_file``.
    """
    ca = certs.make_ca(common_name="gpu-admission local CA", days=days)
    leaf = certs.make_serving_cert(
        ca=ca,
        dns_names=["localhost", *extra_dns_names],
        ip_addresses=["127.0.0.1", "::1"],
        days=days,
    )
    directory.mkdir(parents=True, exist_ok=True)
    paths = LocalhostCerts(directory / "tls.crt", directory / "tls.key", directory / "ca.crt")
    certs.write_pem(path=paths.cert_file, data=leaf.cert_pem, private=False)
    certs.write_pem(path=paths.key_file, data=leaf.key_pem, private=True)
    certs.write_pem(path=paths.ca_file, data=ca.cert_pem, private=False)
    return paths


def describe(cert_pem: bytes) -> str:
    """One line about a certificate for logs: subject, serial, expiry."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        return "unparsable certificate"
    return (
        f"{cert.subject.rfc4514_string()} serial {cert.serial_number:x} "
        f"valid until {cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}"
    )


def _server_context(*, require_client_cert: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if require_client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
    return context


@contextlib.contextmanager
def _pem_path(data: bytes) -> Iterator[str]:
    """A path that holds ``data`` for as long as the block runs.

    ``load_cert_chain`` only takes paths. Loading from a copy of the bytes we
    already hashed means the pair checked is the pair loaded, even if the kubelet
    swaps the files in between. memfd needs no writable filesystem (the pod runs
    with a read-only root); elsewhere a private temporary file does.
    """
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("gpu-admission-tls", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.NamedTemporaryFile(prefix="gpu-admission-tls-") as f:
        f.write(data)
        f.flush()
        yield f.name
