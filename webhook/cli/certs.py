"""`gpu-admission certs`: make the webhook's CA and serving certificate.

Without cluster options it only writes files and prints the caBundle. With
``--apply-secret`` / ``--patch-webhook`` it is the self-signed install route (a Job
in the cluster, see docs/deploy.md): it keeps a Secret whose certificate is still
good, rotates one that is not, and points the webhook configuration at the CA.

Order matters during a rotation: the caBundle is patched first, to the new CA *plus*
the still-valid CAs already in it, and the Secret second. Pods keep serving the old
certificate until the kubelet refreshes their mount (a minute or two); with both CAs
trusted, no call fails in between.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import urllib3
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from webhook.cli.lazy import lazy_module
from webhook.serve import certs as pki

if TYPE_CHECKING:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config
else:
    # The kubernetes client takes ~0.15 s to import and only --apply-secret and
    # --patch-webhook use it; every other command starts without it.
    k8s = lazy_module("kubernetes.client")
    k8s_config = lazy_module("kubernetes.config")

FIELD_MANAGER = "gpu-admission-certs"
SECRET_LABELS = {
    "app.kubernetes.io/name": "gpu-admission",
    "app.kubernetes.io/managed-by": FIELD_MANAGER,
}


class CertsError(click.ClickException):
    """The certificates could not be written or installed (exit code 2)."""

    exit_code = 2


@dataclass(frozen=True)
class Issued:
    """A CA and the serving pair it signed, as PEM. ``ca_key`` is None when the pair
    was reused from the cluster, where the CA key is never stored."""

    ca: bytes
    cert: bytes
    key: bytes
    ca_key: bytes | None

    @classmethod
    def new(
        cls, *, service: str, namespace: str, days: int, now: datetime.datetime | None = None
    ) -> Issued:
        ca = pki.make_ca(
            common_name=f"gpu-admission CA ({service}.{namespace})", days=days, now=now
        )
        names = pki.service_dns_names(service=service, namespace=namespace)
        leaf = pki.make_serving_cert(ca=ca, dns_names=names, days=days, now=now)
        return cls(ca=ca.cert_pem, cert=leaf.cert_pem, key=leaf.key_pem, ca_key=ca.key_pem)


@click.command("certs")
@click.option("--service", required=True, help="Service name of the webhook.")
@click.option("--namespace", required=True, help="Namespace of the Service.")
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for ca.crt, ca.key, tls.crt, tls.key (created if missing).",
)
@click.option("--days", default=pki.DEFAULT_DAYS, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--apply-secret",
    metavar="NAME",
    help="Create or update this kubernetes.io/tls Secret in --namespace; a Secret whose "
    "certificate is still good is kept.",
)
@click.option(
    "--patch-webhook",
    metavar="NAME",
    help="Set the caBundle of every webhook in this ValidatingWebhookConfiguration (and "
    "in the MutatingWebhookConfiguration of that name, if there is one).",
)
@click.option(
    "--renew-before-days",
    default=30,
    show_default=True,
    type=click.IntRange(min=0),
    help="With --apply-secret: rotate a certificate that expires within this many days.",
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Kubeconfig for the cluster options (default: the in-cluster service account).",
)
def certs_command(
    *,
    service: str,
    namespace: str,
    out: Path,
    days: int,
    apply_secret: str | None,
    patch_webhook: str | None,
    renew_before_days: int,
    kubeconfig: Path | None,
) -> None:
    """Write a self-signed CA and a serving certificate for SERVICE.NAMESPACE.svc.

    Prints the caBundle (base64, one line) on stdout.
    """
    if apply_secret and renew_before_days >= days:
        raise click.BadParameter(
            f"must be less than --days ({days}), or every run would rotate",
            param_hint="--renew-before-days",
        )
    api = _api_client(kubeconfig) if apply_secret or patch_webhook else None
    with _cluster_errors():
        outcome = install(
            api=api,
            service=service,
            namespace=namespace,
            out=out,
            days=days,
            secret_name=apply_secret,
            webhook_name=patch_webhook,
            renew_before=datetime.timedelta(days=renew_before_days),
        )
    click.echo(base64.b64encode(outcome.bundle).decode("ascii"))
    click.echo(_summary(outcome, out=out), err=True)


# The main group registers this object: ``main.add_command(certs)``.
certs = certs_command


@dataclass(frozen=True)
class Outcome:
    """What ``install`` did: the pair and caBundle now in effect, and why."""

    issued: Issued
    bundle: bytes
    reused: bool
    reason: str


def install(
    *,
    api: k8s.ApiClient | None,
    service: str,
    namespace: str,
    out: Path,
    days: int,
    secret_name: str | None,
    webhook_name: str | None,
    renew_before: datetime.timedelta,
    now: datetime.datetime | None = None,
) -> Outcome:
    """Issue (or keep) the pair, write it to ``out``, then update the cluster."""
    names = pki.service_dns_names(service=service, namespace=namespace)
    current = (
        read_secret(api, name=secret_name, namespace=namespace) if api and secret_name else None
    )
    problem = _problem(current, names=names, renew_before=renew_before, now=now)
    reused = current is not None and problem is None
    issued = (
        current
        if current and reused
        else Issued.new(service=service, namespace=namespace, days=days, now=now)
    )
    # Local files first: a bad --out fails before anything in the cluster changes.
    write_files(issued, out=out)
    bundle = issued.ca
    if api and webhook_name:
        bundle = patch_ca_bundle(api, name=webhook_name, ca=issued.ca, now=now)
    if api and secret_name and not reused:
        apply_tls_secret(api, name=secret_name, namespace=namespace, issued=issued)
    if reused:
        reason = f"kept the certificate in Secret {secret_name}"
    elif problem:
        reason = f"issued a new CA and certificate ({problem})"
    else:
        reason = "issued a new CA and certificate"
    return Outcome(issued=issued, bundle=bundle, reused=reused, reason=reason)


def write_files(issued: Issued, *, out: Path) -> None:
    files = [
        ("ca.crt", issued.ca, False),
        ("tls.crt", issued.cert, False),
        ("tls.key", issued.key, True),
    ]
    if issued.ca_key is not None:
        files.append(("ca.key", issued.ca_key, True))
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, data, private in files:
            pki.write_pem(path=out / name, data=data, private=private)
        if issued.ca_key is None:
            # A ca.key left from an earlier run would not belong to this ca.crt.
            (out / "ca.key").unlink(missing_ok=True)
    except OSError as e:
        raise CertsError(f"cannot write certificates to {out}: {e.strerror or e}") from e


def read_secret(api: k8s.ApiClient, *, name: str, namespace: str) -> Issued | None:
    """The pair stored in a TLS Secret, or None if there is no such Secret."""
    try:
        raw = k8s.CoreV1Api(api).read_namespaced_secret(name, namespace, _preload_content=False)
    except k8s.ApiException as e:
        if e.status == 404:
            return None
        raise
    data = _json(raw).get("data") or {}
    try:
        return Issued(
            ca=base64.b64decode(data.get("ca.crt", "")),
            cert=base64.b64decode(data.get("tls.crt", "")),
            key=base64.b64decode(data.get("tls.key", "")),
            ca_key=None,
        )
    except ValueError:
        return Issued(ca=b"", cert=b"", key=b"", ca_key=None)  # unusable: rotated below


def apply_tls_secret(api: k8s.ApiClient, *, name: str, namespace: str, issued: Issued) -> None:
    """Create or update the Secret in one server-side apply (no read-modify-write race)."""
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": SECRET_LABELS},
        "type": "kubernetes.io/tls",
        "data": {
            "ca.crt": _b64(issued.ca),
            "tls.crt": _b64(issued.cert),
            "tls.key": _b64(issued.key),
        },
    }
    k8s.CoreV1Api(api).patch_namespaced_secret(
        name,
        namespace,
        body,
        field_manager=FIELD_MANAGER,
        force=True,
        _content_type="application/apply-patch+yaml",
        _preload_content=False,
    )


def patch_ca_bundle(
    api: k8s.ApiClient, *, name: str, ca: bytes, now: datetime.datetime | None = None
) -> bytes:
    """Point every webhook of the ValidatingWebhookConfiguration at ``ca`` (plus the
    still-valid CAs it already trusted), and those of the MutatingWebhookConfiguration of
    the same name when there is one (the optional /mutate entry); return the bundle set."""
    admission = k8s.AdmissionregistrationV1Api(api)
    validating = _webhooks(admission.read_validating_webhook_configuration, name)
    if validating is None:
        raise CertsError(f"ValidatingWebhookConfiguration {name} not found")
    if not validating:
        raise CertsError(f"ValidatingWebhookConfiguration {name} has no webhooks to patch")
    mutating = _webhooks(admission.read_mutating_webhook_configuration, name) or []
    bundle = merge_ca_bundle(
        ca=ca,
        trusted=[
            base64.b64decode(w.get("clientConfig", {}).get("caBundle", ""))
            for w in (*validating, *mutating)
        ],
        now=now,
    )
    admission.patch_validating_webhook_configuration(
        name, _bundle_ops(validating, bundle), _content_type="application/json-patch+json",
        _preload_content=False,
    )  # fmt: skip
    if mutating:
        admission.patch_mutating_webhook_configuration(
            name, _bundle_ops(mutating, bundle), _content_type="application/json-patch+json",
            _preload_content=False,
        )  # fmt: skip
    return bundle


def _webhooks(read: Any, name: str) -> list[dict[str, Any]] | None:
    """The webhooks of a configuration; None when there is no such configuration."""
    try:
        raw = read(name, _preload_content=False)
    except k8s.ApiException as e:
        if e.status == 404:
            return None
        raise
    found: list[dict[str, Any]] = _json(raw).get("webhooks") or []
    return found


def _bundle_ops(webhooks: list[dict[str, Any]], bundle: bytes) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    for i, webhook in enumerate(webhooks):
        # "test" first: if someone reordered the webhooks since we read them, the
        # whole patch fails instead of giving one webhook another's settings.
        ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": webhook["name"]})
        ops.append(
            {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": _b64(bundle)}
        )
    return ops


def merge_ca_bundle(
    *, ca: bytes, trusted: list[bytes], now: datetime.datetime | None = None
) -> bytes:
    """``ca`` first, then every distinct, unexpired CA certificate from ``trusted``."""
    at = now or datetime.datetime.now(datetime.UTC)
    bundle = [ca.strip() + b"\n"]
    for pem in trusted:
        for cert in _certificates(pem):
            text = cert.public_bytes(serialization.Encoding.PEM)
            if cert.not_valid_after_utc > at and text not in bundle:
                bundle.append(text)
    return b"".join(bundle)


def _certificates(pem: bytes) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError:
        return []  # empty or foreign content: nothing to keep


def _problem(
    current: Issued | None,
    *,
    names: list[str],
    renew_before: datetime.timedelta,
    now: datetime.datetime | None,
) -> str | None:
    """Why the Secret's pair must be replaced (None: keep it, or there is none)."""
    if current is None:
        return None
    return pki.serving_pair_problem(
        ca_pem=current.ca,
        cert_pem=current.cert,
        key_pem=current.key,
        dns_names=names,
        min_remaining=renew_before,
        now=now,
    )


def _api_client(kubeconfig: Path | None) -> k8s.ApiClient:
    configuration = k8s.Configuration()
    # kubernetes.config is the one untyped corner of the client package.
    try:
        if kubeconfig is not None:
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(kubeconfig), client_configuration=configuration
            )
        else:
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
    except (k8s_config.ConfigException, OSError) as e:
        where = str(kubeconfig) if kubeconfig else "the in-cluster service account"
        raise CertsError(f"cannot configure the Kubernetes client from {where}: {e}") from e
    return k8s.ApiClient(configuration)


@contextlib.contextmanager
def _cluster_errors() -> Iterator[None]:
    """Turn API and connection failures into one line and exit code 2."""
    try:
        yield
    except k8s.ApiException as e:
        raise CertsError(f"Kubernetes API request failed: {_api_message(e)}") from e
    except urllib3.exceptions.HTTPError as e:
        raise CertsError(f"cannot reach the Kubernetes API: {e}") from e


def _api_message(error: k8s.ApiException) -> str:
    try:
        message = json.loads(error.body or "{}").get("message")
    except ValueError:
        message = None
    return f"HTTP {error.status} {error.reason}" + (f": {message}" if message else "")


def _summary(outcome: Outcome, *, out: Path) -> str:
    leaf = x509.load_pem_x509_certificate(outcome.issued.cert)
    names = ", ".join(pki.san_dns_names(leaf))
    files = "ca.crt, tls.crt, tls.key" + (", ca.key" if outcome.issued.ca_key else "")
    return (
        f"{outcome.reason}; wrote {files} to {out}; valid for {names} "
        f"until {leaf.not_valid_after_utc:%Y-%m-%d}"
    )


def _json(response: Any) -> Mapping[str, Any]:
    # Raw JSON, not the client's models: caBundle and Secret data are base64 strings
    # on the wire, and the models' decoding of them has changed between releases.
    parsed = json.loads(response.data)
    return parsed if isinstance(parsed, dict) else {}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


if __name__ == "__main__":
    certs()
