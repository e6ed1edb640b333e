"""`gpu-admission test`: run policy test suites."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from webhook.cli import color_option, default_policies
from webhook.commands.policytest_run import exit_code, run_files, suite_files
from webhook.reports.policytest import render_junit_results, render_text
from webhook.sources.policy_files import TESTS_DIR


@click.command(name="test")
@click.option("--output", "-o", type=click.Choice(["text", "junit"]), default="text")
@color_option
@click.argument("paths", nargs=-1)
def test_command(output: str, color: bool, paths: tuple[str, ...]) -> None:
    """Run policy test suites (PolicyTest YAML files, or directories holding them).

    Default: the suites in the policy directory's tests/. Exit 0: every case passed;
    1: a case failed; 2: a suite is malformed or a path does not exist.
    """
    policies = default_policies()
    files, errors = suite_files(paths or (str(Path(policies) / TESTS_DIR),))
    if not files and not errors:
        errors.append(f"no PolicyTest suites in {', '.join(paths) or policies}")
    results = run_files(files, default_policies=policies)
    if output == "junit":
        click.echo(render_junit_results(results, errors))
    else:
        click.echo(render_text(results, errors, colour=color), color=color)
    sys.exit(exit_code(results, errors))
