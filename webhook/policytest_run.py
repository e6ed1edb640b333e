"""Running policy test suites, and their results as text and JUnit."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import click

from webhook.diffing import outcome
from webhook.engine import Decision, Subject, evaluate
from webhook.junit import Case as JunitCase
from webhook.junit import Suite as JunitSuite
from webhook.junit import render_junit
from webhook.policytest import Case, PolicyCache, Suite, SuiteError, is_suite_file, load_suites
from webhook.sources import MANIFEST_SUFFIXES


@dataclass(frozen=True, slots=True)
class CaseResult:
    name: str
    problems: tuple[str, ...]  # empty: passed
    findings: tuple[str, ...]  # "deny policy/rule: message", for failure reports
    seconds: float

    @property
    def passed(self) -> bool:
        return not self.problems


@dataclass
class SuiteResult:
    file: str
    name: str
    cases: list[CaseResult] = field(default_factory=list)
    error: str | None = None  # the suite is malformed: nothing ran


def suite_files(paths: Sequence[str]) -> tuple[list[Path], list[str]]:
    """Files to run: named files as given, PolicyTest files found in directories."""
    files: list[Path] = []
    errors: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += [
                f
                for f in sorted(path.rglob("*"))
                if f.suffix in MANIFEST_SUFFIXES and f.is_file() and is_suite_file(f)
            ]
        elif path.is_file():
            files.append(path)
        else:
            errors.append(f"{raw}: no such file or directory")
    return files, errors


def run_files(files: Iterable[Path], *, default_policies: str) -> list[SuiteResult]:
    cache: PolicyCache = {}
    results: list[SuiteResult] = []
    for path in files:
        try:
            suites = list(load_suites(path, default_policies=default_policies, cache=cache))
        except SuiteError as exc:
            results.append(SuiteResult(str(path), path.stem, error=str(exc)))
            continue
        results += [run_suite(s) for s in suites]
    return results


def run_suite(suite: Suite) -> SuiteResult:
    result = SuiteResult(suite.file, suite.name)
    for case in suite.cases:
        start = time.perf_counter()
        decision = evaluate(suite.policies, Subject(case.obj, case.namespace), case.inventory)
        problems = tuple(_problems(case, decision))
        findings = tuple(f"{f.action} {f.policy}/{f.rule}: {f.message}" for f in decision.findings)
        result.cases.append(CaseResult(case.name, problems, findings, time.perf_counter() - start))
    return result


def _problems(case: Case, decision: Decision) -> Iterable[str]:
    expect = case.expect
    got = outcome(decision)
    if got != expect.outcome:
        why = f" ({decision.skipped})" if decision.skipped else ""
        yield f"expected outcome {expect.outcome}, got {got}{why}"
    fired = sorted({f"{f.policy}/{f.rule}" for f in decision.findings})
    if expect.rules is not None and sorted(set(expect.rules)) != fired:
        yield f"expected rules [{', '.join(sorted(set(expect.rules)))}], fired [{', '.join(fired)}]"
    if case.pattern is not None and not any(
        case.pattern.search(f.message) for f in decision.findings
    ):
        yield f"no finding's message matches /{case.pattern.pattern}/"


def exit_code(results: Sequence[SuiteResult], errors: Sequence[str]) -> int:
    if errors or any(r.error for r in results):
        return 2
    return 1 if any(not c.passed for r in results for c in r.cases) else 0


# -- output -----------------------------------------------------------------------------


def render_text(results: Sequence[SuiteResult], errors: Sequence[str], *, colour: bool) -> str:
    lines: list[str] = []
    for r in results:
        lines.append(_style(f"{r.file} ({r.name})", colour, bold=True))
        if r.error is not None:
            lines.append(f"  {_style('MALFORMED', colour, fg='red')}  {r.error}")
        for c in r.cases:
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
    failed = sum(not c.passed for c in cases)
    malformed = sum(r.error is not None for r in results)
    text = (
        f"{len(results)} suites, {len(cases)} cases: {len(cases) - failed} passed, {failed} failed"
    )
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
