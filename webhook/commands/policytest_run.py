"""Running policy test suites, and their results as text and JUnit."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from webhook.commands.policytest import (
    Case,
    Expected,
    PolicyCache,
    Suite,
    SuiteError,
    is_suite_file,
    load_suites,
)
from webhook.core.engine.evaluation import Decision, Outcome, evaluate, problem
from webhook.core.engine.subject import subject_of
from webhook.sources.files import MANIFEST_SUFFIXES


@dataclass(frozen=True, slots=True)
class CaseResult:
    name: str
    problems: tuple[str, ...]  # empty: passed
    findings: tuple[str, ...]  # "deny policy/rule: message", for failure reports
    seconds: float
    # The case's object cannot be judged as it is (too large): an input error, exit 2.
    error: str | None = None

    @property
    def passed(self) -> bool:
        return not self.problems and self.error is None


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
        subject = subject_of(
            case.obj,
            namespace=case.namespace,
            operation=case.operation,
            user=case.user,
            old=case.old,
        )
        decision = evaluate(suite.policies, subject, case.inventory)
        if decision.invalid is not None:
            error = problem(decision, subject)
            elapsed = time.perf_counter() - start
            result.cases.append(CaseResult(case.name, (), (), elapsed, error))
            continue
        problems = tuple(_problems(case, decision))
        findings = tuple(f"{f.action} {f.policy}/{f.rule}: {f.message}" for f in decision.findings)
        result.cases.append(CaseResult(case.name, problems, findings, time.perf_counter() - start))
    return result


def _problems(case: Case, decision: Decision) -> Iterable[str]:
    expect = case.expect
    got = decision.outcome
    if not met(expect.outcome, got):
        why = decision.error or decision.skipped
        yield f"expected outcome {expect.outcome}, got {got}" + (f" ({why})" if why else "")
    fired = sorted({f"{f.policy}/{f.rule}" for f in decision.findings})
    if expect.rules is not None and sorted(set(expect.rules)) != fired:
        yield f"expected rules [{', '.join(sorted(set(expect.rules)))}], fired [{', '.join(fired)}]"
    if case.pattern is not None and not any(
        case.pattern.search(f.message) for f in decision.findings
    ):
        yield f"no finding's message matches /{case.pattern.pattern}/"


def met(expected: Expected, got: Outcome) -> bool:
    """`allow` is what admission does, and it lets a skipped object through too; `skip`
    asks for more: that no policy of the suite judged the object at all."""
    return got == expected or (expected == "allow" and got == "skip")


def exit_code(results: Sequence[SuiteResult], errors: Sequence[str]) -> int:
    if errors or any(r.error or any(c.error for c in r.cases) for r in results):
        return 2
    return 1 if any(not c.passed for r in results for c in r.cases) else 0


# -- output -----------------------------------------------------------------------------
