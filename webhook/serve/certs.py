"""Certificates for the webhook: a self-signed CA and a serving certificate it signs.

The kube-apiserver dials ``<service>.<namespace>.svc`` and checks the serving
certificate's SANs against that name (a CN alone is rejected since 1.19), then
verifies the chain against the ``caBundle`` of the webhook configuration. Keys are
ECDSA P-256: small, fast to generate, and accepted by Go's TLS stack.

Everything here is pure (no I/O, the clock only as a default) except ``write_pem``.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_DAYS = 365
# Certificates start a little in the past: nodes and the apiserver rarely agree on the
# second, and a certificate "not yet valid" fails every call until the clocks agree.
CLOCK_SKEW = datetime.timedelta(minutes=5)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class KeyPair:
    """A private key and the certificate for its public key."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


def service_dns_names(*, service: str, namespace: str) -> list[str]:
    """The names a Service answers to in-cluster, shortest first."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def make_ca(
    *,
    common_name: str,
    days: int = DEFAULT_DAYS,
    now: datetime.datetime | None = None,
) -> KeyPair:
    """A self-signed CA that may sign leaf certificates only (pathLen 0)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    not_before, not_after = _validity(days=days, now=now)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(key=key, cert=cert)


def make_serving_cert(
    *,
    ca: KeyPair,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str | IPAddress] = (),
    days: int = DEFAULT_DAYS,
    now: datetime.datetime | None = None,
) -> KeyPair:
    """A TLS server certificate (serverAuth) for the given SANs, signed by ``ca``.

    The validity is clipped to the CA's, since a chain is only as valid as its root.
    """
    if not dns_names and not ip_addresses:
        raise ValueError("a serving certificate needs at least one DNS name or IP address")
    key = ec.generate_private_key(ec.SECP256R1())
    sans = _subject_alt_names(dns_names=dns_names, ip_addresses=ip_addresses)
    # The CN is informational only (clients match SANs), but humans read it.
    common_name = dns_names[0] if dns_names else str(ip_addresses[0])
    not_before, not_after = _validity(days=days, now=now)
    cert = (
        _leaf_builder(ca=ca, key=key, common_name=common_name)
        .not_valid_before(not_before)
        .not_valid_after(min(not_after, ca.cert.not_valid_after_utc))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(sans, critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    return KeyPair(key=key, cert=cert)


def make_client_cert(
    *,
    ca: KeyPair,
    common_name: str,
    days: int = DEFAULT_DAYS,
    now: datetime.datetime | None = None,
) -> KeyPair:
    """A TLS client certificate (clientAuth), for a server that requires mutual TLS."""
    key = ec.generate_private_key(ec.SECP256R1())
    not_before, not_after = _validity(days=days, now=now)
    cert = (
        _leaf_builder(ca=ca, key=key, common_name=common_name)
        .not_valid_before(not_before)
        .not_valid_after(min(not_after, ca.cert.not_valid_after_utc))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    return KeyPair(key=key, cert=cert)


def serving_pair_problem(
    *,
    ca_pem: bytes,
    cert_pem: bytes,
    key_pem: bytes,
    dns_names: Sequence[str],
    min_remaining: datetime.timedelta,
    now: datetime.datetime | None = None,
) -> str | None:
    """Why an existing CA + serving pair should not be reused, or None if it may be.

    Used to keep a certificate that is still good instead of rotating it on every
    install: each rotation is a window in which the apiserver and the pods disagree.
    """
    try:
        ca = x509.load_pem_x509_certificate(ca_pem)
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as e:
        return f"cannot parse the existing certificate or key ({e})"
    if _public_der(key.public_key()) != _public_der(cert.public_key()):
        return "the key does not belong to the certificate"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "the certificate was not issued by the CA next to it"
    missing = sorted(set(dns_names) - set(san_dns_names(cert)))
    if missing:
        return f"the certificate does not cover {', '.join(missing)}"
    deadline = (now or datetime.datetime.now(datetime.UTC)) + min_remaining
    expires = min(cert.not_valid_after_utc, ca.not_valid_after_utc)
    if expires < deadline:
        return f"the certificate expires on {expires:%Y-%m-%d}"
    return None


def san_dns_names(cert: x509.Certificate) -> list[str]:
    """The DNS names in a certificate's subjectAltName extension (empty if none)."""
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return sans.get_values_for_type(x509.DNSName)


def write_pem(*, path: Path, data: bytes, private: bool) -> None:
    """Write ``data`` to ``path`` atomically; private files get mode 0600.

    A temporary file in the same directory is renamed over the target, so a reader
    (the server polling its certificate) never sees a half-written file.
    """
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        # mkstemp creates 0600; public files are meant to be readable by others.
        os.fchmod(fd, 0o600 if private else 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _validity(
    *, days: int, now: datetime.datetime | None
) -> tuple[datetime.datetime, datetime.datetime]:
    if days < 1:
        raise ValueError(f"validity must be at least 1 day, got {days}")
    start = now or datetime.datetime.now(datetime.UTC)
    return start - CLOCK_SKEW, start + datetime.timedelta(days=days)


def _leaf_builder(
    *, ca: KeyPair, key: ec.EllipticCurvePrivateKey, common_name: str
) -> x509.CertificateBuilder:
    """What every leaf shares: subject, issuer, key ids, not a CA."""
    ca_ski = ca.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
    )


def _public_der(key: PublicKeyTypes) -> bytes:
    return key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,  # ECDSA keys sign; they never encipher a session key.
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _subject_alt_names(
    *, dns_names: Sequence[str], ip_addresses: Sequence[str | IPAddress]
) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
    entries += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    return x509.SubjectAlternativeName(entries)
