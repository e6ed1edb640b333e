"""JUnit XML, the test-report format every CI shows: for `check` and for `test`.

`check`: one testsuite per file, one testcase per finding (deny: a failure; warn and
dryrun: passing, with the message in system-out), and one passing testcase for a file
without findings. Input errors are testcases with an error.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field

from webhook.commands.check import CheckRun, Result


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    classname: str
    failure: str | None = None  # message of a failed expectation or a deny
    error: str | None = None  # the case could not run at all
    output: str = ""  # system-out
    seconds: float = 0.0


@dataclass(slots=True)
class Suite:
    name: str
    cases: list[Case] = field(default_factory=list)


def render_junit(suites: Sequence[Suite], *, name: str) -> str:
    root = ET.Element("testsuites", {"name": name, **_counts([c for s in suites for c in s.cases])})
    for suite in suites:
        node = ET.SubElement(root, "testsuite", {"name": suite.name, **_counts(suite.cases)})
        for case in suite.cases:
            _case(node, case)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


def _counts(cases: Sequence[Case]) -> dict[str, str]:
    return {
        "tests": str(len(cases)),
        "failures": str(sum(c.failure is not None for c in cases)),
        "errors": str(sum(c.error is not None for c in cases)),
        "skipped": "0",
        "time": f"{sum(c.seconds for c in cases):.3f}",
    }


def _case(parent: ET.Element, case: Case) -> None:
    node = ET.SubElement(
        parent, "testcase", name=case.name, classname=case.classname, time=f"{case.seconds:.3f}"
    )
    if case.failure is not None:
        ET.SubElement(node, "failure", message=case.failure.split("\n", 1)[0]).text = case.failure
    if case.error is not None:
        ET.SubElement(node, "error", message=case.error.split("\n", 1)[0]).text = case.error
    if case.output:
        ET.SubElement(node, "system-out").text = case.output


# -- check ------------------------------------------------------------------------------


def check_suites(run: CheckRun, *, files: Sequence[str]) -> list[Suite]:
    """The check run as suites: `files` are every file checked, in order."""
    suites = {name: Suite(name) for name in files}
    for r in run.results:
        suites.setdefault(r.file, Suite(r.file)).cases.append(_finding_case(r))
    for suite in suites.values():
        errors = [e for e in run.errors if e.startswith(f"{suite.name}:")]
        suite.cases += [Case("input", suite.name, error=e) for e in errors]
        if not suite.cases:
            suite.cases.append(Case("no findings", suite.name))
    others = [e for e in run.errors if not any(e.startswith(f"{n}:") for n in suites)]
    if others:
        suites["errors"] = Suite("errors", [Case("input", "errors", error=e) for e in others])
    return list(suites.values())


def _finding_case(r: Result) -> Case:
    f = r.finding
    name = f"{f.policy}/{f.rule} {r.kind} {r.namespace}/{r.name} (line {r.line})"
    text = f"{r.file}:{r.line}: {f.action}: {f.message}"
    if f.action == "deny":
        return Case(name, r.file, failure=text)
    return Case(name, r.file, output=text)


def render_check_junit_failure(message: str) -> str:
    """The run that could not start (policies or inventory did not load): one failing
    testcase naming the problem, so CI shows a red test instead of no tests."""
    suite = Suite("gpu-admission", [Case("load", "gpu-admission", error=message)])
    return render_junit([suite], name="gpu-admission check")


def render_check_junit(run: CheckRun, *, files: Sequence[str]) -> str:
    return render_junit(check_suites(run, files=files), name="gpu-admission check")
