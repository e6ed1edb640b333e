"""`gpu-admission test` through the real CLI: passing, failing and malformed suites."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.clirun import gpu_admission
from tests.support.paths import ROOT

PRIVILEGED = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "team-a"},
    "spec": {"containers": [{"name": "main", "securityContext": {"privileged": True}}]},
}


def suite(cases: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "gpu-admission.io/v1alpha1",
        "kind": "PolicyTest",
        "metadata": {"name": "mine"},
        "spec": {"policies": str(ROOT / "policies"), **spec, "cases": cases},
    }


def case(name: str = "privileged", **expect: Any) -> dict[str, Any]:
    return {"name": name, "object": PRIVILEGED, "expect": expect}


def write(tmp_path: Path, doc: dict[str, Any], name: str = "suite.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run(*args: str) -> tuple[int, str]:
    proc = gpu_admission("test", *args)
    assert "Traceback" not in proc.stderr
    return proc.returncode, proc.stdout


def test_shipped_suites_pass_by_default() -> None:
    code, out = run()

    assert code == 0
    # Every case of every shipped suite passes, however many there are.
    files = (ROOT / "policies" / "tests").glob("*.yaml")
    suites = sum("kind: PolicyTest" in p.read_text() for p in files)
    assert re.search(rf"\n{suites} suites, (\d+) cases: \1 passed, 0 failed$", out.rstrip()), out


def test_a_passing_suite(tmp_path: Path) -> None:
    rules = ["gpu-device-injection/privileged"]
    path = write(tmp_path, suite([case(outcome="deny", rules=rules, messageMatches="privileged")]))

    code, out = run(str(path))

    assert code == 0
    assert f"{path} (mine)\n  PASS  privileged\n" in out


@pytest.mark.parametrize(
    ("expect", "problem"),
    [
        ({"outcome": "allow"}, "expected outcome allow, got deny"),
        (
            {"outcome": "deny", "rules": ["gpu-device-injection/cdi-annotation"]},
            "expected rules [gpu-device-injection/cdi-annotation], "
            "fired [gpu-device-injection/privileged]",
        ),
        (
            {"outcome": "deny", "messageMatches": "hostPath"},
            "no finding's message matches /hostPath/",
        ),
    ],
)
def test_failing_cases_say_what_differs(
    tmp_path: Path, expect: dict[str, Any], problem: str
) -> None:
    path = write(tmp_path, suite([case(**expect)]))

    code, out = run(str(path))

    assert code == 1
    assert f"  FAIL  privileged\n        {problem}\n" in out
    assert '        finding: deny gpu-device-injection/privileged: container "main"' in out
    assert out.rstrip().endswith("1 suites, 1 cases: 0 passed, 1 failed")


def test_inventory_inline_per_case_and_null(tmp_path: Path) -> None:
    gpu_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "g", "namespace": "team-a"},
        "spec": {"containers": [{"name": "m", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
    }
    inline = {"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "cpu-only"}}]}
    cases: list[dict[str, Any]] = [
        {"name": "no nodes have GPUs", "object": gpu_pod, "inventory": inline,
         "expect": {"outcome": "deny", "rules": ["gpu-resource-names/unknown-resource"]}},
        {"name": "unknown inventory", "object": gpu_pod, "inventory": None,
         "expect": {"outcome": "allow", "rules": []}},
    ]  # fmt: skip
    path = write(tmp_path, suite(cases, policyNames=["gpu-resource-names"]))

    code, out = run(str(path))

    assert code == 0, out


def test_file_cases_are_relative_to_the_suite(tmp_path: Path) -> None:
    (tmp_path / "objs").mkdir()
    (tmp_path / "objs" / "p.yaml").write_text(yaml.safe_dump(PRIVILEGED))
    doc = suite([{"name": "from file", "file": "objs/p.yaml", "expect": {"outcome": "deny"}}])

    code, _ = run(str(write(tmp_path, doc)))

    assert code == 0


MALFORMED = [
    (
        suite([{"name": "no outcome", "object": PRIVILEGED, "expect": {}}]),
        'suite.yaml:LINE: case "no outcome", field spec.cases[0].expect.outcome: Field required',
        "expect:",
    ),
    (
        suite(
            [
                {
                    "name": "both",
                    "object": PRIVILEGED,
                    "file": "x.yaml",
                    "expect": {"outcome": "deny"},
                }
            ]
        ),
        'case "both", field spec.cases[0]: give exactly one of `object` (inline) or `file`',
        None,
    ),
    (
        suite([case(outcome="maybe")]),
        "field spec.cases[0].expect.outcome: Input should be 'allow', 'warn', 'deny', 'skip' "
        "or 'error' (got 'maybe')",
        "outcome",
    ),
    (
        suite([case(outcome="deny", rules=["gpu-device-injection/privileges"])]),
        "field spec.cases[0].expect.rules[0]: 'gpu-device-injection/privileges' is not a rule of "
        "the suite's policies",
        "privileges",
    ),
    (
        suite([case(outcome="deny", messageMatches="(")]),
        "field spec.cases[0].expect.messageMatches: not a regex: missing ), "
        "unterminated subpattern",
        "messageMatches",
    ),
    (
        suite([case(outcome="deny")], policyNames=["gpu-nope"]),
        "field spec.policyNames[0]: no policy 'gpu-nope' in",
        "gpu-nope",
    ),
    (
        suite([{"name": "gone", "file": "missing.yaml", "expect": {"outcome": "deny"}}]),
        'case "gone", field spec.cases[0].file: ',
        "missing.yaml",
    ),
    (
        suite([case(outcome="deny", extra=1)]),
        "field spec.cases[0].expect.extra: unknown field (got 1)",
        "extra",
    ),
    (
        suite([case(outcome="deny")], inventory="nodes-missing.yaml"),
        "field spec.inventory: inventory did not load:",
        "nodes-missing",
    ),
]


@pytest.mark.parametrize(("doc", "message", "line_of"), MALFORMED)
def test_malformed_suites_exit_2_naming_file_case_field(
    tmp_path: Path, doc: dict[str, Any], message: str, line_of: str | None
) -> None:
    path = write(tmp_path, doc)
    lines = path.read_text().split("\n")
    line = next((i + 1 for i, text in enumerate(lines) if line_of and line_of in text), 0)

    code, out = run(str(path))

    assert code == 2
    assert "MALFORMED" in out
    assert message.replace("LINE", str(line)) in out


def test_a_malformed_suite_does_not_stop_the_others(tmp_path: Path) -> None:
    good = write(tmp_path, suite([case(outcome="deny")]), "a.yaml")
    bad = write(tmp_path, suite([case(outcome="nope")]), "b.yaml")

    code, out = run(str(good), str(bad))

    assert code == 2
    assert "  PASS  privileged" in out
    assert out.rstrip().endswith("2 suites, 1 cases: 1 passed, 0 failed, 1 suites malformed")


def test_directories_hold_suites_and_other_yaml(tmp_path: Path) -> None:
    write(tmp_path, suite([case(outcome="deny")]), "one.yaml")
    (tmp_path / "nodes.yaml").write_text("kind: List\nitems: []\n")

    code, out = run(str(tmp_path))

    assert code == 0
    assert "1 suites, 1 cases: 1 passed" in out


def test_a_missing_path_exits_2() -> None:
    code, out = run("/nonexistent/suite.yaml")

    assert code == 2
    assert "error: /nonexistent/suite.yaml: no such file or directory" in out


def test_junit_output(tmp_path: Path) -> None:
    path = write(tmp_path, suite([case("ok", outcome="deny"), case("wrong", outcome="allow")]))

    proc = gpu_admission("test", "-o", "junit", str(path))

    assert proc.returncode == 1
    root = ET.fromstring(proc.stdout)
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "1", "0")
    ok, wrong = root.findall("testsuite/testcase")
    assert ok.get("name") == "ok" and ok.find("failure") is None
    failure = wrong.find("failure")
    assert failure is not None
    assert failure.get("message") == "expected outcome allow, got deny"
