"""`gpu-admission audit`: a cluster or a dump judged by the policies, nothing blocked."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import click

from webhook.cli import (
    InputError,
    cluster_profile_option,
    color_option,
    inventory_option,
    live_cluster_options,
    load_policies,
    policies_option,
)
from webhook.cli.progress import Progress
from webhook.commands.audit import Auditor, AuditReport, FailOn
from webhook.commands.auditdump import audit_dumps
from webhook.commands.check import supply_objects, with_supply_objects
from webhook.core.engine.policy import PolicySet
from webhook.core.supply.inventory import Inventory
from webhook.errors import GpuAdmissionError
from webhook.sources.dumps import Sourced
from webhook.sources.files import read_inventory, unreadable_notes


@click.command()
@policies_option
@cluster_profile_option
@inventory_option
@click.option(
    "--from",
    "from_files",
    multiple=True,
    type=click.Path(allow_dash=True),
    help="Audit a dump instead of the cluster: `kubectl get ... -o json|yaml` output, "
    "Lists, NDJSON; a directory or - for stdin. Repeatable.",
)
@live_cluster_options(scope="this namespace")
@click.option(
    "--output",
    "-o",
    type=click.Choice(["text", "json", "policyreport", "openreports"]),
    default="text",
)
@click.option(
    "--apply",
    "apply_reports",
    is_flag=True,
    help="With -o openreports: create or update the Reports in the cluster instead of "
    "printing them, and delete the ones an earlier run wrote that this one does not.",
)
@click.option(
    "--fail-on",
    type=click.Choice(["deny", "warn", "never"]),
    default="deny",
    show_default=True,
    help="Exit 1 when findings of this action (or worse) exist.",
)
@color_option
def audit(
    policies_dir: str,
    cluster_profile: str | None,
    inventory: str | None,
    from_files: tuple[str, ...],
    context: str | None,
    kubeconfig: str | None,
    namespace: str | None,
    page_size: int,
    output: str,
    apply_reports: bool,
    fail_on: FailOn,
    color: bool,
) -> None:
    """Judge every workload of a cluster (or of a dump) as if it were being created.

    Blocks nothing, and writes nothing to the cluster unless --apply. Exit 0: nothing
    at or above --fail-on; 1: findings at or above it; 2: usage or input errors.
    """
    if apply_reports and output != "openreports":
        raise click.UsageError("--apply writes OpenReports: use it with --output openreports")
    if from_files and (context or kubeconfig) and not apply_reports:
        raise click.UsageError("--context and --kubeconfig are for a live audit, not --from")
    policy_set = load_policies(policies_dir, cluster_profile=cluster_profile)
    progress = Progress()
    try:
        report = _run(
            policy_set,
            inventory_file=inventory,
            from_files=from_files,
            context=context,
            kubeconfig=kubeconfig,
            namespace=namespace,
            page_size=page_size,
            progress=progress,
        )
    finally:
        progress.close()
    if apply_reports:
        _apply(report, context=context, kubeconfig=kubeconfig, namespace=namespace,
               page_size=page_size, live=not from_files)  # fmt: skip
    else:
        use_colour = output == "text" and color
        click.echo(_render(report, output=output, colour=use_colour), nl=False, color=use_colour)
    if output != "text":
        for error in report.errors:
            click.echo(f"error: {error}", err=True)
    sys.exit(report.exit_code(fail_on))


def _run(
    policy_set: PolicySet,
    *,
    inventory_file: str | None,
    from_files: tuple[str, ...],
    context: str | None,
    kubeconfig: str | None,
    namespace: str | None,
    page_size: int,
    progress: Progress,
) -> AuditReport:
    notes: list[str] = []
    errors: list[str] = []
    if from_files:
        inv = _file_inventory(inventory_file, notes)
        if inventory_file is None:
            notes.append("no --inventory: node-dependent rules judged from resource names only")
        if policy_set.reads_input_supply:  # the dumps' own queues, claims and Namespaces
            # (stdin is read once, as it streams: its own are not joined)
            files = [f for f in from_files if f != "-"]
            inv = with_supply_objects(inv, supply_objects(files)) if files else inv
        auditor = Auditor(policy_set, inv, errors=errors, notes=notes)
        # Big JSON dumps across all CPUs (webhook.commands.auditdump), the rest here.
        audit_dumps(
            from_files,
            auditor=auditor,
            namespace=namespace,
            stage=progress.stage,
            tick=progress.tick,
        )
        return auditor.report()
    inv, objects = _live(
        policy_set,
        inventory_file=inventory_file,
        context=context,
        kubeconfig=kubeconfig,
        namespace=namespace,
        page_size=page_size,
        notes=notes,
        errors=errors,
        progress=progress,
    )
    auditor = Auditor(policy_set, inv, errors=errors, notes=notes)
    for item in objects:
        auditor.add(item.obj, location=item.location)
        progress.tick()
    return auditor.report()


def _file_inventory(name: str | None, notes: list[str]) -> Inventory:
    try:
        inventory = read_inventory(name)
    except GpuAdmissionError as exc:
        raise InputError(f"inventory did not load: {exc}") from None
    notes += unreadable_notes(inventory)
    return inventory


def _live(
    policy_set: PolicySet,
    *,
    inventory_file: str | None,
    context: str | None,
    kubeconfig: str | None,
    namespace: str | None,
    page_size: int,
    notes: list[str],
    errors: list[str],
    progress: Progress,
) -> tuple[Inventory, Iterator[Sourced]]:
    # The kubernetes client takes a while to import: only a live audit pays for it.
    from webhook.kube.client import KubeConfigError, api_client
    from webhook.kube.cluster import cluster_inventory, from_cluster, workload_resources

    try:
        client = api_client(context=context, kubeconfig=kubeconfig)
    except KubeConfigError as exc:
        raise InputError(f"{exc} (or audit a dump: --from FILE)") from None
    try:
        if inventory_file is not None:
            inv = _file_inventory(inventory_file, notes)
        else:
            progress.stage("nodes")
            inv = cluster_inventory(client, page_size=page_size, notes=notes)
        resources = workload_resources(client, policy_set.custom_kinds, notes)
    except GpuAdmissionError as exc:
        raise InputError(str(exc)) from None
    objects = from_cluster(
        client,
        resources=resources,
        namespace=namespace,
        page_size=page_size,
        notes=notes,
        errors=errors,
        stage=progress.stage,
    )
    return inv, objects


def _apply(
    report: AuditReport,
    *,
    context: str | None,
    kubeconfig: str | None,
    namespace: str | None,
    page_size: int,
    live: bool,
) -> None:
    from webhook.kube.client import KubeError, api_client
    from webhook.kube.reports_apply import apply_reports
    from webhook.reports.openreports import open_reports
    from webhook.reports.policyreport import MANAGED_BY

    # Only a complete live audit has seen everything it may delete reports for: a dump is
    # not the cluster, and an audit with errors missed objects.
    prune = live and not report.errors
    try:
        applied = apply_reports(
            api_client(context=context, kubeconfig=kubeconfig),
            reports=open_reports(report, timestamp=int(time.time())),
            selector=",".join(f"{k}={v}" for k, v in MANAGED_BY.items()),
            namespace=namespace,
            page_size=page_size,
            prune=prune,
        )
    except KubeError as exc:
        raise InputError(f"the reports were not applied: {exc}") from None
    for line in applied.lines():
        click.echo(line)
    if live and not prune:
        click.echo("note: earlier reports kept: the audit had errors", err=True)


def _render(report: AuditReport, *, output: str, colour: bool) -> str:
    if output == "json":
        from webhook.reports.audit import render_json

        return render_json(report) + "\n"
    if output == "policyreport":
        from webhook.reports.policyreport import render_policyreport

        return render_policyreport(report, timestamp=int(time.time()))
    if output == "openreports":
        from webhook.reports.openreports import render_openreports

        return render_openreports(report, timestamp=int(time.time()))
    from webhook.reports.audit import render_text

    return render_text(report, colour=colour)
