"""Newcomer mistakes with inputs, through the real CLI: nothing to check is exit 2 naming
the input; a file that is not Kubernetes is skipped and counted; a run whose policies or
inventory do not load still writes one error into SARIF and JUnit."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.builders import EXAMPLES
from tests.support.clirun import gpu_admission
from webhook.commands.parallel import MIN_FILES

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: a}
spec: {containers: [{name: c, image: x}]}
"""
LOCK = '{"name": "app", "lockfileVersion": 3, "packages": {"": {"kind": "x"}}}\n'
EMPTY_DUMP = '{"apiVersion": "v1", "kind": "List", "items": []}\n'


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    (tmp_path / "empty-dir").mkdir()
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "comments.yaml").write_text("# nothing yet\n---\n")
    (tmp_path / "dump.json").write_text(EMPTY_DUMP)
    (tmp_path / "package-lock.json").write_text(LOCK)
    (tmp_path / "values.yaml").write_text("replicas: 2\nimage: {tag: x}\n")
    (tmp_path / "pod.yaml").write_text(POD)
    return tmp_path


EMPTY_CASES = [
    # (arguments, stdin, the error)
    (["empty-dir"], None, "no Kubernetes objects found in {tmp}/empty-dir"),
    (["empty.yaml"], None, "no Kubernetes objects found in {tmp}/empty.yaml"),
    (["comments.yaml"], None, "no Kubernetes objects found in {tmp}/comments.yaml"),
    (["dump.json"], None, "no Kubernetes objects found in {tmp}/dump.json"),
    (["-"], "", "no Kubernetes objects found in <stdin>"),
    (["pod.yaml", "empty.yaml"], None, "no Kubernetes objects found in {tmp}/empty.yaml"),
]


@pytest.mark.parametrize(("args", "stdin", "error"), EMPTY_CASES)
def test_check_of_nothing_is_an_input_error(
    inputs: Path, args: list[str], stdin: str | None, error: str
) -> None:
    paths = [a if a == "-" else str(inputs / a) for a in args]
    proc = gpu_admission("check", "-o", "json", *paths, stdin=stdin)
    assert proc.returncode == 2, proc.stderr
    assert json.loads(proc.stdout)["errors"] == [error.format(tmp=inputs)]


@pytest.mark.parametrize(
    ("command", "args", "stdin", "error"),
    [
        (["audit", "--from"], ["dump.json"], None, "{tmp}/dump.json"),
        (["audit", "--from"], ["empty-dir"], None, "{tmp}/empty-dir"),
        (["audit", "--from"], ["-"], "", "<stdin>"),
        (["diff", "--base-policies", "policies"], ["empty.yaml"], None, "{tmp}/empty.yaml"),
        (["diff", "--base-policies", "policies"], ["dump.json"], None, "{tmp}/dump.json"),
    ],
)
def test_audit_and_diff_of_nothing_are_input_errors(
    inputs: Path, command: list[str], args: list[str], stdin: str | None, error: str
) -> None:
    paths = [a if a == "-" else str(inputs / a) for a in args]
    proc = gpu_admission(*command, *paths, stdin=stdin)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    expected = f"error: no Kubernetes objects found in {error.format(tmp=inputs)}"
    assert expected in (proc.stdout + proc.stderr).splitlines()


@pytest.mark.parametrize(
    ("files", "summary", "reasons"),
    [
        # A lock file (not parsed) or a values file beside manifests: skipped and counted.
        (
            ["pod.yaml", "package-lock.json", "values.yaml"],
            (3, 2, 1, 2),
            {"not a Kubernetes file": 1, "without apiVersion/kind": 1},
        ),
        # Alone: still no error (a verdict on a file, not an empty input).
        (["package-lock.json"], (1, 0, 0, 1), {"not a Kubernetes file": 1}),
        (["values.yaml"], (1, 1, 0, 1), {"without apiVersion/kind": 1}),
    ],
)
def test_a_file_that_is_not_kubernetes_is_skipped(
    inputs: Path, files: list[str], summary: tuple[int, int, int, int], reasons: dict[str, int]
) -> None:
    proc = gpu_admission("check", "-o", "json", *(str(inputs / f) for f in files))
    assert proc.returncode == 0, proc.stdout
    body = json.loads(proc.stdout)
    s = body["summary"]
    assert (s["files"], s["objects"], s["evaluated"], s["skipped"]) == summary
    assert s["skippedReasons"] == reasons
    assert body["errors"] == []


def test_the_parallel_check_reports_empty_inputs_as_one_process_does(tmp_path: Path) -> None:
    sources = sorted((EXAMPLES / "manifests").rglob("*.yaml"))
    many = tmp_path / "many"
    many.mkdir()
    for i in range(MIN_FILES + 10):
        shutil.copy(sources[i % len(sources)], many / f"m{i:04d}.yaml")
    (many / "package-lock.json").write_text(LOCK)
    (tmp_path / "empty").mkdir()
    proc = gpu_admission("check", "-o", "json", str(many), str(tmp_path / "empty"))
    few = gpu_admission("check", "-o", "json", *sorted(map(str, many.iterdir()))[:3],
                        str(many / "package-lock.json"), str(tmp_path / "empty"))  # fmt: skip
    for p in (proc, few):
        body = json.loads(p.stdout)
        assert p.returncode == 2
        assert body["errors"] == [f"no Kubernetes objects found in {tmp_path / 'empty'}"]
        assert body["summary"]["skippedReasons"]["not a Kubernetes file"] == 1


LOAD_FAILURES = [
    # (extra arguments, what the one error says)
    (
        ["--inventory", "{tmp}/bad-nodes.yaml"],
        "inventory did not load: {tmp}/bad-nodes.yaml:2: invalid YAML: "
        "did not find expected node content",
    ),
    (
        ["--policies", "{tmp}/bad-policies"],
        "policies did not load:\n{tmp}/bad-policies/p.yaml: document 1 (line 1): "
        "kind must be GPUPolicy, WorkloadKinds or ClusterProfile, got 'Nope'",
    ),
]


@pytest.fixture
def broken(inputs: Path) -> Path:
    (inputs / "bad-nodes.yaml").write_text("items: [\n")
    (inputs / "bad-policies").mkdir()
    (inputs / "bad-policies" / "p.yaml").write_text("kind: Nope\n")
    return inputs


@pytest.mark.parametrize(("extra", "message"), LOAD_FAILURES)
def test_sarif_names_what_did_not_load(broken: Path, extra: list[str], message: str) -> None:
    args = [a.format(tmp=broken) for a in extra]
    proc = gpu_admission("check", "-o", "sarif", *args, str(broken / "pod.yaml"))
    assert proc.returncode == 2
    run = json.loads(proc.stdout)["runs"][0]
    expected = message.format(tmp=broken)
    assert [(r["ruleId"], r["level"], r["message"]["text"]) for r in run["results"]] == [
        ("gpu-admission/load", "error", expected)
    ]
    assert run["invocations"][0]["executionSuccessful"] is False
    assert f"Error: {expected}" in proc.stderr


@pytest.mark.parametrize(("extra", "message"), LOAD_FAILURES)
def test_junit_names_what_did_not_load(broken: Path, extra: list[str], message: str) -> None:
    args = [a.format(tmp=broken) for a in extra]
    proc = gpu_admission("check", "-o", "junit", *args, str(broken / "pod.yaml"))
    assert proc.returncode == 2
    root = ET.fromstring(proc.stdout)
    cases = root.findall("./testsuite/testcase")
    assert [(c.get("name"), c.find("error").text) for c in cases] == [  # type: ignore[union-attr]
        ("load", message.format(tmp=broken))
    ]
    assert (root.get("tests"), root.get("errors")) == ("1", "1")
