"""`check --output sarif|junit` through the real CLI: what code scanning and CI read."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.support.clirun import gpu_admission
from tests.support.paths import ROOT
from webhook.sources.policy_files import load_policy_dir

INVENTORY = "examples/cluster/nodes.json"
BAD = "examples/manifests/bad/privileged.yaml"
GOOD = "examples/manifests/good/pod-inference-h100.yaml"
MANIFEST = """\
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: team-a
spec:
  containers:
    - name: main
      securityContext:
        privileged: true
"""


def sarif(*args: str, cwd: Path = ROOT) -> tuple[int, dict[str, Any]]:
    proc = gpu_admission("check", "--inventory", str(ROOT / INVENTORY), "-o", "sarif", *args,
                         cwd=cwd)  # fmt: skip
    return proc.returncode, json.loads(proc.stdout)


def test_sarif_run_with_one_rule_per_policy_rule() -> None:
    code, body = sarif(BAD, GOOD)

    assert code == 1
    assert body["version"] == "2.1.0"
    assert body["$schema"].endswith("sarif-2.1.0.json")
    (run,) = body["runs"]
    rules = run["tool"]["driver"]["rules"]
    policies = load_policy_dir(ROOT / "policies").policies
    expected = [f"{p.name}/{rule}" for p in policies for rule in p.check.rules]
    assert [r["id"] for r in rules] == expected
    privileged = rules[expected.index("gpu-device-injection/privileged")]
    assert privileged["shortDescription"]["text"] == (
        "A privileged container sees every GPU on the host."
    )
    assert privileged["fullDescription"]["text"].startswith("Containers must get GPUs")
    assert privileged["defaultConfiguration"] == {"level": "error"}
    assert run["invocations"] == [{"executionSuccessful": True, "toolExecutionNotifications": []}]


def test_sarif_results_point_at_file_and_line() -> None:
    _, body = sarif(BAD, GOOD)

    (result,) = body["runs"][0]["results"]
    rules = body["runs"][0]["tool"]["driver"]["rules"]
    assert result["ruleId"] == "gpu-device-injection/privileged"
    assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    assert result["level"] == "error"
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": BAD, "uriBaseId": "%SRCROOT%"}
    line = location["region"]["startLine"]
    assert "privileged: true" in (ROOT / BAD).read_text().split("\n")[line - 1]
    assert result["message"]["text"].startswith("Pod research/debug-shell: container")


def test_sarif_uri_is_relative_to_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "pod.yaml").write_text(MANIFEST)

    _, body = sarif(str(tmp_path / "k8s" / "pod.yaml"), cwd=tmp_path)

    location = body["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "k8s/pod.yaml"
    assert location["region"] == {"startLine": 10}


@pytest.mark.parametrize(("action", "level"), [("warn", "warning"), ("dryrun", "note")])
def test_sarif_level_follows_the_action(tmp_path: Path, action: str, level: str) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    text = (ROOT / "policies" / "gpu-device-injection.yaml").read_text()
    (policies / "p.yaml").write_text(
        text.replace("enforcementAction: deny", f"enforcementAction: {action}")
    )
    (tmp_path / "pod.yaml").write_text(MANIFEST)

    code, body = sarif("--policies", str(policies), "pod.yaml", cwd=tmp_path)

    assert code == 0
    run = body["runs"][0]
    assert run["results"][0]["level"] == level
    assert {r["defaultConfiguration"]["level"] for r in run["tool"]["driver"]["rules"]} == {level}


def test_sarif_reports_input_errors_as_notifications(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("a: [1,\n")

    code, body = sarif("broken.yaml", cwd=tmp_path)

    assert code == 2
    invocation = body["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False
    assert invocation["toolExecutionNotifications"][0]["message"]["text"].startswith(
        "broken.yaml:2: invalid YAML"
    )


def junit(*args: str, cwd: Path = ROOT) -> tuple[int, ET.Element]:
    proc = gpu_admission("check", "--inventory", str(ROOT / INVENTORY), "-o", "junit", *args,
                         cwd=cwd)  # fmt: skip
    assert proc.stdout.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    return proc.returncode, ET.fromstring(proc.stdout)


def test_junit_one_suite_per_file_failure_per_deny() -> None:
    code, root = junit(BAD, GOOD)

    assert code == 1
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "1", "0")
    bad, good = root.findall("testsuite")
    assert bad.get("name") == BAD
    (case,) = bad.findall("testcase")
    assert case.get("name") == "gpu-device-injection/privileged Pod research/debug-shell (line 15)"
    failure = case.find("failure")
    assert failure is not None
    assert (failure.text or "").startswith(f"{BAD}:15: deny: container")
    assert [c.get("name") for c in good.findall("testcase")] == ["no findings"]


def test_junit_input_errors_are_errors(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("a: [1,\n")

    code, root = junit("broken.yaml", cwd=tmp_path)

    assert code == 2
    assert root.get("errors") == "1"
    error = root.find("testsuite/testcase/error")
    assert error is not None
    assert (error.text or "").startswith("broken.yaml:2: invalid YAML")
