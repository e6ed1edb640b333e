"""Certificates (webhook.serve.certs) and the `certs` command (webhook.cli.certs).

The command runs as a real subprocess. Its cluster options talk to `FakeApiserver`,
a small HTTP server that answers the four calls the command makes (read and apply a
Secret, read and JSON-patch a ValidatingWebhookConfiguration) the way the
kube-apiserver does, and records every request; the kubernetes client goes through
its real HTTP code path to reach it.
"""

from __future__ import annotations

import base64
import datetime
import json
import socket
import ssl
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509 import DNSName
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError
from kubernetes import client as k8s

from webhook.cli.certs import CertsError, install, merge_ca_bundle
from webhook.serve import certs

SVC = "gpu-admission.gpu-admission-system.svc"
NOW = datetime.datetime.now(datetime.UTC)
RUN_CERTS = [sys.executable, "-m", "webhook", "certs"]


@pytest.fixture(scope="module")
def ca() -> certs.KeyPair:
    return certs.make_ca(common_name="test CA", days=30)


@pytest.fixture(scope="module")
def leaf(ca: certs.KeyPair) -> certs.KeyPair:
    names = certs.service_dns_names(service="gpu-admission", namespace="gpu-admission-system")
    return certs.make_serving_cert(ca=ca, dns_names=names, ip_addresses=["127.0.0.1"], days=10)


def verify(*, leaf: x509.Certificate, ca: x509.Certificate, name: str) -> None:
    verifier = PolicyBuilder().store(Store([ca])).build_server_verifier(DNSName(name))
    verifier.verify(leaf, [])


# --- certs.py -------------------------------------------------------------------------


def test_service_dns_names() -> None:
    assert certs.service_dns_names(service="s", namespace="n") == [
        "s",
        "s.n",
        "s.n.svc",
        "s.n.svc.cluster.local",
    ]


def test_ca_is_a_ca(ca: certs.KeyPair) -> None:
    constraints = ca.cert.extensions.get_extension_for_class(x509.BasicConstraints)
    usage = ca.cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert constraints.critical and constraints.value.ca and constraints.value.path_length == 0
    assert usage.key_cert_sign and usage.crl_sign
    assert ca.cert.issuer == ca.cert.subject


def test_serving_cert_extensions(leaf: certs.KeyPair) -> None:
    sans = leaf.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    eku = leaf.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    constraints = leaf.cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert sans.get_values_for_type(x509.DNSName) == [
        "gpu-admission",
        "gpu-admission.gpu-admission-system",
        SVC,
        f"{SVC}.cluster.local",
    ]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not constraints.ca


@pytest.mark.parametrize("name", [SVC, "gpu-admission", f"{SVC}.cluster.local"])
def test_leaf_verifies_against_ca_for_its_names(
    ca: certs.KeyPair, leaf: certs.KeyPair, name: str
) -> None:
    verify(leaf=leaf.cert, ca=ca.cert, name=name)


def test_leaf_does_not_verify_for_other_names_or_cas(
    ca: certs.KeyPair, leaf: certs.KeyPair
) -> None:
    with pytest.raises(VerificationError):
        verify(leaf=leaf.cert, ca=ca.cert, name="gpu-admission.default.svc")
    other = certs.make_ca(common_name="other CA", days=30)
    with pytest.raises(VerificationError):
        verify(leaf=leaf.cert, ca=other.cert, name=SVC)


def test_tls_handshake_with_python_ssl(
    ca: certs.KeyPair, leaf: certs.KeyPair, tmp_path: Path
) -> None:
    """The same check the apiserver makes: verify against the CA, ServerName the svc."""
    certs.write_pem(path=tmp_path / "tls.crt", data=leaf.cert_pem, private=False)
    certs.write_pem(path=tmp_path / "tls.key", data=leaf.key_pem, private=True)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    client_ctx = ssl.create_default_context(cadata=ca.cert_pem.decode())
    a, b = socket.socketpair()
    server = threading.Thread(target=lambda: server_ctx.wrap_socket(a, server_side=True).close())
    server.start()
    with client_ctx.wrap_socket(b, server_hostname=SVC) as tls:
        assert tls.getpeercert(binary_form=True) == leaf.cert.public_bytes(
            serialization.Encoding.DER
        )
    server.join()


def test_validity_is_days_and_clipped_to_the_ca() -> None:
    now = NOW.replace(microsecond=0)  # certificates keep whole seconds
    ca = certs.make_ca(common_name="short", days=5, now=now)
    leaf = certs.make_serving_cert(ca=ca, dns_names=["x"], days=365, now=now)
    assert ca.cert.not_valid_after_utc - now == datetime.timedelta(days=5)
    assert leaf.cert.not_valid_after_utc == ca.cert.not_valid_after_utc
    assert now - leaf.cert.not_valid_before_utc == certs.CLOCK_SKEW
    with pytest.raises(ValueError, match="at least 1 day"):
        certs.make_ca(common_name="x", days=0)


def test_write_pem_modes_and_no_leftovers(tmp_path: Path) -> None:
    certs.write_pem(path=tmp_path / "a.key", data=b"secret", private=True)
    certs.write_pem(path=tmp_path / "a.crt", data=b"public", private=False)
    certs.write_pem(path=tmp_path / "a.crt", data=b"public 2", private=False)
    assert stat.S_IMODE((tmp_path / "a.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "a.crt").stat().st_mode) == 0o644
    assert (tmp_path / "a.crt").read_bytes() == b"public 2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.crt", "a.key"]


def _pair_problem(ca: certs.KeyPair, leaf: certs.KeyPair, **overrides: Any) -> str | None:
    args: dict[str, Any] = {
        "ca_pem": ca.cert_pem,
        "cert_pem": leaf.cert_pem,
        "key_pem": leaf.key_pem,
        "dns_names": [SVC],
        "min_remaining": datetime.timedelta(days=1),
    }
    return certs.serving_pair_problem(**(args | overrides))


def test_serving_pair_problem(ca: certs.KeyPair, leaf: certs.KeyPair) -> None:
    other_ca = certs.make_ca(common_name="other", days=30)
    other_leaf = certs.make_serving_cert(ca=ca, dns_names=[SVC], days=10)
    assert _pair_problem(ca, leaf) is None
    assert _pair_problem(ca, leaf, key_pem=other_leaf.key_pem) == (
        "the key does not belong to the certificate"
    )
    assert _pair_problem(ca, leaf, ca_pem=other_ca.cert_pem) == (
        "the certificate was not issued by the CA next to it"
    )
    assert _pair_problem(ca, leaf, dns_names=[SVC, "x.y.svc"]) == (
        "the certificate does not cover x.y.svc"
    )
    expires = leaf.cert.not_valid_after_utc
    assert _pair_problem(ca, leaf, min_remaining=datetime.timedelta(days=20)) == (
        f"the certificate expires on {expires:%Y-%m-%d}"
    )
    assert (_pair_problem(ca, leaf, cert_pem=b"junk") or "").startswith("cannot parse")


def test_merge_ca_bundle_keeps_valid_cas_once_and_drops_expired() -> None:
    new, old = (certs.make_ca(common_name=n, days=30) for n in ("new", "old"))
    expired = certs.make_ca(common_name="expired", days=1, now=NOW - datetime.timedelta(days=3))
    bundle = merge_ca_bundle(
        ca=new.cert_pem, trusted=[old.cert_pem + expired.cert_pem, new.cert_pem, b"", b"junk"]
    )
    subjects = [c.subject.rfc4514_string() for c in x509.load_pem_x509_certificates(bundle)]
    assert subjects == ["CN=new", "CN=old"]


# --- the command, as a subprocess ---------------------------------------------------


def run_certs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RUN_CERTS, *args], capture_output=True, text=True, timeout=60)


def test_cli_writes_files_and_prints_ca_bundle(tmp_path: Path) -> None:
    out = tmp_path / "new" / "dir"
    result = run_certs(
        "--service",
        "gpu-admission",
        "--namespace",
        "gpu-admission-system",
        "--out",
        str(out),
        "--days",
        "30",
    )
    assert result.returncode == 0, result.stderr
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert modes == {"ca.crt": 0o644, "ca.key": 0o600, "tls.crt": 0o644, "tls.key": 0o600}
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    assert base64.b64decode(lines[0], validate=True) == (out / "ca.crt").read_bytes()
    assert result.stderr.startswith(
        f"issued a new CA and certificate; wrote ca.crt, tls.crt, "
        f"tls.key, ca.key to {out}; valid for gpu-admission, "
    )
    ca = x509.load_pem_x509_certificate((out / "ca.crt").read_bytes())
    leaf = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    verify(leaf=leaf, ca=ca, name=SVC)
    assert leaf.not_valid_after_utc - leaf.not_valid_before_utc == datetime.timedelta(
        days=30, minutes=5
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--out", "{file}/sub"],
            "Error: cannot write certificates to {file}/sub: Not a directory",
        ),
        (["--out", "{file}"], "Error: Invalid value for '--out': Directory '{file}' is a file."),
        (
            ["--out", "{tmp}", "--days", "0"],
            "Invalid value for '--days': 0 is not in the range x>=1",
        ),
        (
            ["--out", "{tmp}", "--apply-secret", "s", "--days", "30"],
            "Invalid value for --renew-before-days: must be less than --days (30)",
        ),
        (
            ["--out", "{tmp}", "--patch-webhook", "w", "--kubeconfig", "{tmp}/missing"],
            "Error: cannot configure the Kubernetes client from {tmp}/missing",
        ),
    ],
)
def test_cli_errors_exit_2_with_a_message(tmp_path: Path, args: list[str], message: str) -> None:
    file = tmp_path / "a-file"
    file.write_text("")
    fill = {"file": str(file), "tmp": str(tmp_path)}
    result = run_certs("--service", "s", "--namespace", "n", *(a.format(**fill) for a in args))
    assert result.returncode == 2
    assert message.format(**fill) in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


# --- the command against a fake apiserver --------------------------------------------


class FakeApiserver(ThreadingHTTPServer):
    """Answers the command's four calls like the kube-apiserver; records requests."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.secrets: dict[str, dict[str, Any]] = {}
        self.vwcs: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, str, Any]] = []  # method, path?query, type, body
        self.forbid: set[str] = set()  # "METHOD path" answered 403

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


SECRETS = "/api/v1/namespaces/gpu-admission-system/secrets/"
VWCS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/"


class _Handler(BaseHTTPRequestHandler):
    server: FakeApiserver

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle(None)

    def do_PATCH(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self._handle(json.loads(self.rfile.read(length)))

    def _handle(self, body: Any) -> None:
        fake = self.server
        fake.requests.append((self.command, self.path, self.headers.get("Content-Type", ""), body))
        path = self.path.split("?")[0]
        if self.headers.get("Authorization") != "Bearer t0ken":
            return self._reply(401, _status(401, "Unauthorized"))
        if f"{self.command} {path}" in fake.forbid:
            return self._reply(403, _status(403, f'cannot {self.command.lower()} "{path}"'))
        store, name = (
            (fake.secrets, path.removeprefix(SECRETS))
            if path.startswith(SECRETS)
            else (fake.vwcs, path.removeprefix(VWCS))
        )
        if self.command == "PATCH" and store is fake.secrets:
            store[name] = body  # server-side apply, force: the applied object wins
        elif name not in store:
            return self._reply(404, _status(404, f'"{name}" not found'))
        elif self.command == "PATCH":
            _json_patch(store[name], body)
        self._reply(200, store[name])

    def _reply(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _status(code: int, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "code": code,
    }


def _json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    for op in ops:
        *parents, last = op["path"].strip("/").split("/")
        target: Any = doc
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if op["op"] == "test":
            assert target[last] == op["value"], op
        else:
            target[last] = op["value"]


@pytest.fixture
def fake() -> Iterator[FakeApiserver]:
    server = FakeApiserver()
    server.vwcs["gpu-admission"] = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "gpu-admission"},
        "webhooks": [
            {"name": "pods.gpu-admission.io", "clientConfig": {"service": {"name": "x"}}},
            {"name": "workloads.gpu-admission.io", "clientConfig": {"service": {"name": "x"}}},
        ],
    }
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def api_client(fake: FakeApiserver) -> k8s.ApiClient:
    configuration = k8s.Configuration(host=fake.url)
    configuration.api_key = {"BearerToken": "t0ken"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    return k8s.ApiClient(configuration)


def sync(fake: FakeApiserver, out: Path, *, now: datetime.datetime = NOW) -> Any:
    return install(
        api=api_client(fake),
        service="gpu-admission",
        namespace="gpu-admission-system",
        out=out,
        days=365,
        secret_name="gpu-admission-tls",
        webhook_name="gpu-admission",
        renew_before=datetime.timedelta(days=30),
        now=now,
    )


def bundles(fake: FakeApiserver) -> list[list[str]]:
    """Per webhook, the subjects of the CAs in its caBundle."""
    return [
        [
            c.subject.rfc4514_string()
            for c in x509.load_pem_x509_certificates(
                base64.b64decode(w["clientConfig"]["caBundle"])
            )
        ]
        for w in fake.vwcs["gpu-admission"]["webhooks"]
    ]


def test_first_install_patches_webhook_then_applies_secret(
    fake: FakeApiserver, tmp_path: Path
) -> None:
    outcome = sync(fake, tmp_path)
    assert not outcome.reused
    assert [(m, p.split("?")[0], t) for m, p, t, _ in fake.requests] == [
        ("GET", SECRETS + "gpu-admission-tls", ""),
        ("GET", VWCS + "gpu-admission", ""),
        # the optional mutating entry's configuration: absent here (404), so not patched
        ("GET", VWCS.replace("validating", "mutating") + "gpu-admission", ""),
        ("PATCH", VWCS + "gpu-admission", "application/json-patch+json"),
        ("PATCH", SECRETS + "gpu-admission-tls", "application/apply-patch+yaml"),
    ]
    ops = fake.requests[3][3]
    assert [(o["op"], o["path"]) for o in ops] == [
        ("test", "/webhooks/0/name"),
        ("add", "/webhooks/0/clientConfig/caBundle"),
        ("test", "/webhooks/1/name"),
        ("add", "/webhooks/1/clientConfig/caBundle"),
    ]
    assert "fieldManager=gpu-admission-certs" in fake.requests[4][1]
    assert "force=true" in fake.requests[4][1]
    secret = fake.secrets["gpu-admission-tls"]
    assert secret["type"] == "kubernetes.io/tls"
    assert sorted(secret["data"]) == ["ca.crt", "tls.crt", "tls.key"]
    assert base64.b64decode(secret["data"]["tls.key"]) == (tmp_path / "tls.key").read_bytes()
    assert outcome.bundle == (tmp_path / "ca.crt").read_bytes()
    assert bundles(fake) == [[f"CN={_ca_cn()}"]] * 2


def _ca_cn() -> str:
    return "gpu-admission CA (gpu-admission.gpu-admission-system)"


def test_second_run_keeps_a_good_secret(fake: FakeApiserver, tmp_path: Path) -> None:
    first = sync(fake, tmp_path / "1")
    second = sync(fake, tmp_path / "2")
    assert second.reused and second.issued.cert == first.issued.cert
    assert second.reason == "kept the certificate in Secret gpu-admission-tls"
    assert [m for m, *_ in fake.requests].count("PATCH") == 3  # no second Secret write
    assert sorted(p.name for p in (tmp_path / "2").iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    assert second.bundle == first.bundle  # the same CA is not added twice


def test_expiring_secret_is_rotated_and_both_cas_stay_trusted(
    fake: FakeApiserver, tmp_path: Path
) -> None:
    old = sync(fake, tmp_path / "1", now=NOW - datetime.timedelta(days=350))
    new = sync(fake, tmp_path / "2")
    assert not new.reused and new.issued.ca != old.issued.ca
    assert new.reason.startswith("issued a new CA and certificate (the certificate expires on ")
    trusted = x509.load_pem_x509_certificates(new.bundle)
    assert [c.public_bytes(serialization.Encoding.PEM) for c in trusted] == [
        new.issued.ca,
        old.issued.ca,
    ]
    secret = fake.secrets["gpu-admission-tls"]
    assert base64.b64decode(secret["data"]["tls.crt"]) == new.issued.cert


def test_missing_webhook_configuration_fails_before_the_secret_is_written(
    fake: FakeApiserver, tmp_path: Path
) -> None:
    del fake.vwcs["gpu-admission"]
    with pytest.raises(CertsError, match="ValidatingWebhookConfiguration gpu-admission not found"):
        sync(fake, tmp_path)
    assert fake.secrets == {}


def write_kubeconfig(fake: FakeApiserver, path: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "fake",
                "clusters": [{"name": "fake", "cluster": {"server": fake.url}}],
                "users": [{"name": "fake", "user": {"token": "t0ken"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            }
        )
    )
    return path


def test_cli_cluster_options_end_to_end(fake: FakeApiserver, tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(fake, tmp_path / "kubeconfig")
    args = [
        "--service",
        "gpu-admission",
        "--namespace",
        "gpu-admission-system",
        "--out",
        str(tmp_path / "out"),
        "--kubeconfig",
        str(kubeconfig),
        "--apply-secret",
        "gpu-admission-tls",
        "--patch-webhook",
        "gpu-admission",
    ]
    result = run_certs(*args)
    assert result.returncode == 0, result.stderr
    assert base64.b64decode(result.stdout.strip()) == (tmp_path / "out" / "ca.crt").read_bytes()
    assert bundles(fake) == [[f"CN={_ca_cn()}"]] * 2
    assert "gpu-admission-tls" in fake.secrets
    again = run_certs(*args)
    assert again.returncode == 0, again.stderr
    assert again.stderr.startswith("kept the certificate in Secret gpu-admission-tls; wrote ")


def test_cli_api_error_exits_2_with_the_apiservers_message(
    fake: FakeApiserver, tmp_path: Path
) -> None:
    fake.forbid.add(f"PATCH {VWCS}gpu-admission")
    kubeconfig = write_kubeconfig(fake, tmp_path / "kubeconfig")
    result = run_certs(
        "--service",
        "gpu-admission",
        "--namespace",
        "gpu-admission-system",
        "--out",
        str(tmp_path / "out"),
        "--kubeconfig",
        str(kubeconfig),
        "--patch-webhook",
        "gpu-admission",
    )
    assert result.returncode == 2
    assert result.stderr == (
        "Error: Kubernetes API request failed: HTTP 403 Forbidden: "
        f'cannot patch "{VWCS}gpu-admission"\n'
    )
