"""`test` results for people (text) and CI (JUnit)."""

from __future__ import annotations

from collections.abc import Sequence

import click

from webhook.commands.policytest_run import SuiteResult
from webhook.reports.junit import Case as JunitCase
from webhook.reports.junit import Suite as JunitSuite
from webhook.reports.junit import render_junit


def render_text(results: Sequence[SuiteResult], errors: Sequence[str], *, colour: bool) -> str:
    lines: list[str] = []
    for r in results:
        lines.append(_style(f"{r.file} ({r.name})", colour, bold=True))
        if r.error is not None:
            lines.append(f"  {_style('MALFORMED', colour, fg='red')}  {r.error}")
        for c in r.cases:
            if c.error is not None:
                lines.append(f"  {_style('ERROR', colour, fg='red')}  {c.name}")
                lines.append(f"        {c.error}")
                continue
            mark = (
                _style("PASS", colour, fg="green") if c.passed else _style("FAIL", colour, fg="red")
            )
            lines.append(f"  {mark}  {c.name}")
            if not c.passed:
                lines += [f"        {p}" for p in c.problems]
                lines += [f"        finding: {f}" for f in c.findings] or ["        no findings"]
        lines.append("")
    lines += [f"error: {e}" for e in errors]
    lines.append(_summary(results))
    return "\n".join(lines)


def _summary(results: Sequence[SuiteResult]) -> str:
    cases = [c for r in results for c in r.cases]
    failed = sum(not c.passed and c.error is None for c in cases)
    errors = sum(c.error is not None for c in cases)
    malformed = sum(r.error is not None for r in results)
    passed = len(cases) - failed - errors
    text = f"{len(results)} suites, {len(cases)} cases: {passed} passed, {failed} failed"
    text += f", {errors} not judged (input errors)" if errors else ""
    return text + (f", {malformed} suites malformed" if malformed else "")


def _style(text: str, colour: bool, *, fg: str | None = None, bold: bool = False) -> str:
    return click.style(text, fg=fg, bold=bold or fg is not None) if colour else text


def render_junit_results(results: Sequence[SuiteResult], errors: Sequence[str]) -> str:
    suites = []
    for r in results:
        suite = JunitSuite(f"{r.file} ({r.name})")
        if r.error is not None:
            suite.cases.append(JunitCase("load suite", r.file, error=r.error))
        for c in r.cases:
            if c.error is not None:
                suite.cases.append(JunitCase(c.name, r.name, error=c.error, seconds=c.seconds))
                continue
            failure = "\n".join([*c.problems, *(f"finding: {f}" for f in c.findings)])
            suite.cases.append(
                JunitCase(
                    c.name, r.name, failure=failure if not c.passed else None, seconds=c.seconds
                )
            )
        suites.append(suite)
    if errors:
        suites.append(JunitSuite("errors", [JunitCase("input", "errors", error=e) for e in errors]))
    return render_junit(suites, name="gpu-admission test")
