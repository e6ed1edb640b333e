"""`gpu-admission diff`: what changing the policies does to a corpus of objects."""

from __future__ import annotations

import sys

import click

from webhook.cli import (
    InputError,
    cluster_profile_option,
    color_option,
    inventory_option,
    load_policies,
    policies_option,
)
from webhook.commands.diff import DiffReport, diff_objects
from webhook.errors import GpuAdmissionError
from webhook.reports.diff import render_json, render_text
from webhook.sources.dumps import from_files
from webhook.sources.files import read_inventory


@click.command()
@click.option(
    "--base-policies",
    required=True,
    type=click.Path(file_okay=False),
    help="The policies before the change (e.g. a checkout of the base branch).",
)
@policies_option
@cluster_profile_option
@inventory_option
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text")
@color_option
@click.argument("paths", nargs=-1, required=True)
def diff(
    base_policies: str,
    policies_dir: str,
    cluster_profile: str | None,
    inventory: str | None,
    output: str,
    color: bool,
    paths: tuple[str, ...],
) -> None:
    """Compare two policy sets on manifests or audit dumps (files, directories, - for stdin).

    Lists objects that become denied, become allowed, or whose findings change.
    Exit 0: nothing becomes denied; 1: something does; 2: usage or input errors.
    """
    # The cluster is the same before and after the change: the flag applies to both.
    base = load_policies(base_policies, cluster_profile=cluster_profile)
    head = load_policies(policies_dir, cluster_profile=cluster_profile)
    try:
        inv = read_inventory(inventory)
    except GpuAdmissionError as exc:
        raise InputError(f"inventory did not load: {exc}") from None
    errors: list[str] = []
    objects = from_files(paths, errors=errors)
    report = diff_objects(objects, base=base, head=head, inventory=inv)
    report.errors[:0] = errors
    _print(report, output=output, color=color)
    sys.exit(report.exit_code)


def _print(report: DiffReport, *, output: str, color: bool) -> None:
    if output == "json":
        click.echo(render_json(report))
        return
    click.echo(render_text(report, colour=color), color=color)
