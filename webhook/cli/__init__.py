"""The `gpu-admission` command: thin shells around the engine."""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from webhook import __version__
from webhook.cli import process
from webhook.cli.lazy import LazyGroup
from webhook.core.supply.profiles import PROFILE_NAMES
from webhook.errors import GpuAdmissionError

if TYPE_CHECKING:
    from webhook.core.engine.policy import PolicySet

F = TypeVar("F", bound=Callable[..., Any])

# The shipped policies: beside the package in a checkout (or an editable install), and
# under <prefix>/share/gpu-admission/policies where a wheel puts them (pyproject data-files).
SHIPPED_POLICIES = (
    Path(__file__).resolve().parents[2] / "policies",
    Path(sysconfig.get_path("data")) / "share" / "gpu-admission" / "policies",
)


def default_policies() -> str:
    """GPU_ADMISSION_POLICIES (set in the container image), else the shipped policies."""
    from_env = os.environ.get("GPU_ADMISSION_POLICIES")
    if from_env:
        return from_env
    found = next((p for p in SHIPPED_POLICIES if p.is_dir()), SHIPPED_POLICIES[0])
    return str(found)


class InputError(click.ClickException):
    """Bad input from the user: message on stderr, exit code 2, never a traceback."""

    exit_code = 2


def load_policies(directory: str, *, cluster_profile: str | None = None) -> PolicySet:
    # Imported here, not above: pydantic may come with it, after `run` has set it up. A
    # set validated before comes from the cache, without pydantic (policy_cache).
    from webhook.sources.policy_cache import load_policy_dir_cached

    try:
        return load_policy_dir_cached(directory, cluster_profile=cluster_profile)  # type: ignore[arg-type]
    except GpuAdmissionError as exc:
        raise InputError(f"policies did not load:\n{exc}") from None


def _resolve_colour(ctx: click.Context, param: click.Parameter, value: bool | None) -> bool:
    """--color/--no-color, else colour when stdout is a terminal and NO_COLOR is unset."""
    return value if value is not None else sys.stdout.isatty() and "NO_COLOR" not in os.environ


color_option = click.option(
    "--color/--no-color",
    default=None,
    callback=_resolve_colour,
    help="Colour text output (default: on a terminal, unless NO_COLOR is set).",
)
policies_option = click.option(
    "--policies",
    "policies_dir",
    default=default_policies,
    show_default="shipped policies/",
    type=click.Path(file_okay=False),
    help="Directory of policy files (read recursively).",
)
cluster_profile_option = click.option(
    "--cluster-profile",
    type=click.Choice(PROFILE_NAMES),
    default=None,
    help="What the cluster adds at admission (gke, eks: ExtendedResourceToleration); "
    "replaces a ClusterProfile document's spec.profile (default: the document's, else generic).",
)
inventory_option = click.option(
    "--inventory",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Nodes as `kubectl get nodes -o json|yaml` writes them.",
)


def live_cluster_options(*, scope: str) -> Callable[[F], F]:
    """--context, --kubeconfig, --namespace and --page-size, for commands that read a
    live cluster (audit, diagnose); `scope` says what --namespace narrows."""

    def decorate(command: F) -> F:
        for option in reversed(
            (
                click.option("--context", help="kubeconfig context (live cluster)."),
                click.option(
                    "--kubeconfig", type=click.Path(dir_okay=False), help="kubeconfig file."
                ),
                click.option("--namespace", "-n", help=f"Only {scope} (default: all)."),
                click.option(
                    "--page-size",
                    type=click.IntRange(1, 5000),
                    default=500,
                    show_default=True,
                    help="Objects per list request (live cluster).",
                ),
            )
        ):
            command = option(command)
        return command

    return decorate


# Commands that live in their own modules, imported when run (see LazyGroup).
_COMMANDS = {
    "audit": "webhook.cli.audit:audit",
    "certs": "webhook.cli.certs:certs",
    "diagnose": "webhook.cli.diagnose:diagnose",
    "diff": "webhook.cli.diff:diff",
    "match-conditions": "webhook.cli.match_conditions:match_conditions",
    "serve": "webhook.cli.serve:serve",
    "test": "webhook.cli.test:test_command",
}


@click.group(
    cls=LazyGroup, lazy=_COMMANDS, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(__version__, prog_name="gpu-admission")
def main() -> None:
    """Policy-as-code admission for Kubernetes GPU workloads."""


@main.command()
@policies_option
@cluster_profile_option
@inventory_option
@click.option(
    "--output", "-o", type=click.Choice(["text", "json", "sarif", "junit"]), default="text"
)
@color_option
@click.argument("paths", nargs=-1, required=True)
def check(
    policies_dir: str,
    cluster_profile: str | None,
    inventory: str | None,
    output: str,
    color: bool,
    paths: tuple[str, ...],
) -> None:
    """Check manifest files (YAML/JSON, directories, - for stdin) against the policies.

    Exit 0: nothing denied; 1: deny findings; 2: usage or input errors.
    """
    from webhook.commands.parallel import check_files
    from webhook.reports.check import render_json, render_text
    from webhook.sources.files import read_inventory, unreadable_notes

    try:
        policy_set = load_policies(policies_dir, cluster_profile=cluster_profile)
        try:
            inv = read_inventory(inventory, read=policy_set.profile.node_facts)
        except GpuAdmissionError as exc:
            raise InputError(f"inventory did not load: {exc}") from None
    except InputError as exc:
        _report_failure(exc.message, output=output, source=inventory or policies_dir)
        raise
    for note in unreadable_notes(inv):
        click.echo(f"warning: {note}", err=True)
    run = check_files(paths, policy_set=policy_set, inventory=inv)  # large inputs: all CPUs
    if output == "json":
        click.echo(render_json(run))
    elif output == "sarif":
        from webhook.reports.sarif import render_sarif

        click.echo(render_sarif(run, policy_set=policy_set))
    elif output == "junit":
        from webhook.reports.junit import render_check_junit
        from webhook.sources.files import expand_paths

        files = ["<stdin>" if f == "-" else f for f in expand_paths(paths)]
        click.echo(render_check_junit(run, files=files))
    else:
        click.echo(render_text(run, colour=color), color=color)
    sys.exit(run.exit_code)


def _report_failure(message: str, *, output: str, source: str) -> None:
    """SARIF and JUnit readers (code scanning, CI test tabs) see only stdout: a run that
    could not start is one error there too, not an empty, clean-looking report."""
    if output == "sarif":
        from webhook.reports.sarif import render_sarif_failure

        click.echo(render_sarif_failure(message, source=source))
    elif output == "junit":
        from webhook.reports.junit import render_check_junit_failure

        click.echo(render_check_junit_failure(message))


def run() -> None:
    """The `gpu-admission` console script and `python -m webhook`: `main` in a process
    that starts and exits cheaply (webhook.cli.process)."""
    process.run(main)


if __name__ == "__main__":  # pragma: no cover
    run()
