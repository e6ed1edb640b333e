"""`gpu-admission diagnose`: why each GPU Pod is Pending, by failure domain."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from datetime import UTC, datetime

import click

from webhook.cli import (
    InputError,
    color_option,
    live_cluster_options,
    load_policies,
    policies_option,
)
from webhook.cli.progress import Progress
from webhook.commands.diagnose import Diagnoser, DiagnoseReport, diagnosis_rules, job_rules
from webhook.sources.dumps import Sourced
from webhook.sources.dumps import from_files as files_source


@click.command()
@policies_option
@click.option(
    "--from",
    "from_files",
    multiple=True,
    type=click.Path(allow_dash=True),
    help="Diagnose dumps instead of the cluster: `kubectl get nodes,pods,events -A -o json` "
    "(and deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates for DRA "
    "claims; Lists of any size, in any mix and order; NDJSON and YAML too); a directory or "
    "- for stdin. Repeatable.",
)
@live_cluster_options(scope="Pods of this namespace")
@click.option("--output", "-o", type=click.Choice(["text", "markdown", "json"]), default="text")
@color_option
@click.argument("pods", nargs=-1)
def diagnose(
    policies_dir: str,
    from_files: tuple[str, ...],
    context: str | None,
    kubeconfig: str | None,
    namespace: str | None,
    page_size: int,
    output: str,
    color: bool,
    pods: tuple[str, ...],
) -> None:
    """Say why each Pending Pod that asks for GPUs is Pending: one failure domain per
    Pod, with the facts, the scheduler's own words and the next action.

    PODS (optional) are namespace/name, or names in --namespace: only those, and a
    named Pod that asks for no GPU is reported too. Writes nothing to the cluster.
    Exit 0: nothing stuck; 1: some Pod is stuck; 2: usage or input errors.
    """
    if from_files and (context or kubeconfig):
        raise click.UsageError("--context and --kubeconfig are for a live cluster, not --from")
    only = frozenset(_pod_ref(p, namespace) for p in pods)
    policy_set = load_policies(policies_dir)
    rules = diagnosis_rules(policy_set)
    diagnoser = Diagnoser(rules=rules, jobs=job_rules(policy_set), namespace=namespace, only=only)
    progress = Progress(label="diagnose")
    # Parsed objects hold no cycles and go as they are read, so reference counting frees
    # them; the cyclic collector would walk the kept node facts again and again for
    # nothing (5% of the time on 100,000 Pods).
    collecting = gc.isenabled()
    gc.disable()
    try:
        for item in _objects(diagnoser, from_files, context, kubeconfig, page_size, progress):
            diagnoser.add(item.obj, location=item.location)
            progress.tick()
    finally:
        progress.close()
        if collecting:
            gc.enable()
    now = datetime.now(UTC)
    if from_files:  # a dump is as old as the newest thing in it
        now = diagnoser.latest() or now
    report = diagnoser.report(now=now)
    click.echo(_render(report, output=output, colour=color), nl=False, color=color)
    if output == "json":
        for note in report.notes:
            click.echo(f"note: {note}", err=True)
        for error in report.errors:
            click.echo(f"error: {error}", err=True)
    sys.exit(report.exit_code)


def _pod_ref(text: str, namespace: str | None) -> str:
    name = text.removeprefix("pod/").removeprefix("pods/")
    if "/" in name:
        ns, _, rest = name.partition("/")
        if not ns or not rest or "/" in rest:
            raise click.BadParameter(f"{text!r}: give namespace/name or a name", param_hint="PODS")
        if namespace is not None and ns != namespace:
            raise click.BadParameter(f"{text!r} is not in --namespace {namespace}")
        return name
    return f"{namespace or 'default'}/{name}"


def _objects(
    diagnoser: Diagnoser,
    from_files: tuple[str, ...],
    context: str | None,
    kubeconfig: str | None,
    page_size: int,
    progress: Progress,
) -> Iterator[Sourced]:
    if from_files:
        return files_source(from_files, errors=diagnoser.errors, stage=progress.stage)
    # The kubernetes client takes a while to import: only a live diagnosis pays for it.
    from webhook.kube.client import KubeConfigError, api_client
    from webhook.kube.diagnose import diagnosis_objects

    try:
        client = api_client(context=context, kubeconfig=kubeconfig)
    except KubeConfigError as exc:
        raise InputError(f"{exc} (or diagnose a dump: --from FILE)") from None
    return diagnosis_objects(
        client,
        page_size=page_size,
        errors=diagnoser.errors,
        notes=diagnoser.notes,
        listed=diagnoser.dra.listed,
        stage=progress.stage,
    )


def _render(report: DiagnoseReport, *, output: str, colour: bool) -> str:
    from webhook.reports import diagnose as reports

    if output == "json":
        return reports.render_json(report)
    if output == "markdown":
        return reports.render_markdown(report)
    return reports.render_text(report, colour=colour)
