"""`gpu-admission serve`: the webhook, with embedded defaults that run on a fresh machine."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import click

from webhook.cli import InputError, inventory_option, policies_option
from webhook.errors import GpuAdmissionError


@click.command()
@policies_option
@inventory_option
@click.option("--host", default="0.0.0.0", show_default=True)
@click.option("--port", default=8443, show_default=True, type=click.IntRange(0, 65535))
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64))
@click.option("--tls-cert-file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--tls-key-file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--client-ca-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Require client certificates signed by this CA (the apiserver's).",
)
@click.option(
    "--inventory-max-age",
    default=600.0,
    show_default=True,
    type=float,
    help="Seconds after the last Node watch sync when the inventory counts as stale.",
)
@click.option(
    "--stale-inventory",
    type=click.Choice(["deny", "warn", "allow"]),
    default="warn",
    show_default=True,
    help="What inventory-based findings do when it is stale.",
)
@click.option(
    "--reload-interval",
    default=5.0,
    show_default=True,
    type=float,
    help="Seconds between checks of the policy, inventory and certificate files.",
)
@click.option(
    "--body-timeout",
    default=10.0,
    show_default=True,
    type=float,
    help="Seconds a client has to send its request body before it gets 408.",
)
@click.option(
    "--eval-cache-size",
    default=2048,
    show_default=True,
    type=click.IntRange(0),
    help="Decisions of identical objects (replicas of one template) kept; 0 turns it off.",
)
@click.option(
    "--header-timeout",
    default=5.0,
    show_default=True,
    type=click.FloatRange(0, min_open=True),
    help="Seconds a client has for the TLS handshake, and for each request's line and "
    "headers (from its first byte; 408 after).",
)
@click.option(
    "--keep-alive-timeout",
    default=120.0,
    show_default=True,
    type=click.FloatRange(0, min_open=True),
    help="Seconds an idle connection is kept between requests (above the apiserver's 90).",
)
@click.option(
    "--max-connections",
    default=1000,
    show_default=True,
    type=click.IntRange(1),
    help="Open connections per worker; one more is closed at once.",
)
@click.option(
    "--max-in-flight",
    default=256,
    show_default=True,
    type=click.IntRange(1),
    help="Requests with a body in progress per worker; one more gets 503.",
)
@click.option(
    "--grace-period",
    default=20.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds after SIGTERM to finish the requests in flight; keep it under the "
    "Pod's terminationGracePeriodSeconds minus its preStop sleep.",
)
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="Without --inventory.")
@click.option("--context", help="kubeconfig context, without --inventory.")
def serve(
    policies_dir: str,
    inventory: str | None,
    host: str,
    port: int,
    workers: int,
    tls_cert_file: Path | None,
    tls_key_file: Path | None,
    client_ca_file: Path | None,
    inventory_max_age: float,
    stale_inventory: str,
    reload_interval: float,
    body_timeout: float,
    eval_cache_size: int,
    header_timeout: float,
    keep_alive_timeout: float,
    max_connections: int,
    max_in_flight: int,
    grace_period: float,
    kubeconfig: str | None,
    context: str | None,
) -> None:
    """Serve POST /validate (AdmissionReview v1), /healthz, /readyz and /metrics over HTTPS.

    Without --inventory the Nodes come from the cluster (in-cluster config, else
    kubeconfig) through a watch. Without --tls-cert-file a throwaway CA and a
    certificate for localhost are made, and the CA's path is printed.
    """
    from webhook.serve.connections import Limits
    from webhook.serve.serving import ServeOptions
    from webhook.serve.serving import serve as run
    from webhook.serve.state import Settings, State
    from webhook.serve.tls import self_signed_for_localhost

    if (tls_cert_file is None) != (tls_key_file is None):
        raise InputError("--tls-cert-file and --tls-key-file go together")
    settings = Settings(
        policies_dir,
        inventory,
        inventory_max_age,
        stale_inventory,  # type: ignore[arg-type]
        reload_interval,
        kubeconfig,
        context,
        eval_cache_size,
    )
    try:
        state = State.start(settings)
    except GpuAdmissionError as exc:
        raise InputError(f"cannot start: {exc}") from None
    if tls_cert_file is None or tls_key_file is None:
        made = self_signed_for_localhost(directory=Path(tempfile.mkdtemp(prefix="gpu-admission-")))
        tls_cert_file, tls_key_file = made.cert_file, made.key_file
        click.echo(
            f"no --tls-cert-file: serving a self-signed certificate for localhost; "
            f"clients trust the CA in {made.ca_file}",
            err=True,
        )
    click.echo(
        f"gpu-admission: starting with {len(state.policy_set.policies)} policies "
        f"({state.policy_set.digest}) for https://{host}:{port}/validate",
        err=True,
    )
    options = ServeOptions(
        settings,
        host,
        port,
        workers,
        tls_cert_file,
        tls_key_file,
        client_ca_file,
        tls_reload_interval=reload_interval,
        limits=Limits(
            header_timeout=header_timeout,
            body_timeout=body_timeout,
            keep_alive_timeout=keep_alive_timeout,
            max_connections=max_connections,
            max_in_flight=max_in_flight,
            grace_period=grace_period,
        ),
    )
    try:
        run(options, state)
    except OSError as exc:
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sys.exit(0)
