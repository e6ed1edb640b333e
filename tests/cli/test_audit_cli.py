"""`gpu-admission audit --from ...` through the real CLI: shapes, outputs, exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.support.auditobjects import GPU_LABELS, as_list, deployment_family, pod
from tests.support.clirun import gpu_admission
from tests.support.paths import ROOT

INVENTORY = str(ROOT / "examples" / "cluster" / "nodes.json")

OBJECTS = [
    *deployment_family("trainer", pods=3, privileged=True),
    pod("ok", gpus=1, labels=GPU_LABELS, namespace="team-b"),
    pod("typo", namespace="team-b", labels=GPU_LABELS, gpus=1),
]
OBJECTS[-1]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpux": "1"}}


def write_shapes(tmp_path: Path) -> dict[str, Path]:
    files = {
        "kubectl.json": json.dumps(as_list(OBJECTS), indent=4),
        "compact.json": json.dumps(as_list(OBJECTS)),
        "dump.ndjson": "".join(json.dumps(o) + "\n" for o in OBJECTS),
        "kubectl.yaml": yaml.safe_dump(as_list(OBJECTS)),
        "multi.yaml": yaml.safe_dump_all(OBJECTS),
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return {name: tmp_path / name for name in files}


def audit_json(*args: str, stdin: str | None = None) -> tuple[int, dict[str, Any]]:
    proc = gpu_admission("audit", "-o", "json", *args, stdin=stdin)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_every_file_shape_gives_the_same_audit(tmp_path: Path) -> None:
    shapes = write_shapes(tmp_path)
    results = {}
    for name, path in shapes.items():
        code, body = audit_json("--from", str(path))
        assert code == 1, name
        results[name] = [{k: v for k, v in r.items() if k != "location"} for r in body["results"]]
    first = results["kubectl.json"]
    assert all(r == first for r in results.values())
    assert [(r["kind"], r["name"], r["rule"], r["pods"]) for r in first] == [
        ("Deployment", "trainer", "privileged", 3),
        ("Pod", "typo", "unknown-resource", 0),
    ]


def test_several_files_and_stdin(tmp_path: Path) -> None:
    shapes = write_shapes(tmp_path)
    text = json.dumps(pod("from-stdin", privileged=True))

    code, body = audit_json("--from", str(shapes["kubectl.yaml"]), "--from", "-", stdin=text)

    assert code == 1
    assert body["summary"]["objects"] == len(OBJECTS) + 1
    assert {r["location"].split(":")[0] for r in body["results"]} == {
        str(shapes["kubectl.yaml"]),
        "<stdin>",
    }


def test_json_summary_and_locations(tmp_path: Path) -> None:
    path = write_shapes(tmp_path)["kubectl.json"]

    _, body = audit_json("--from", str(path), "--inventory", INVENTORY)

    summary = body["summary"]
    assert summary["objects"] == 7
    assert summary["kinds"] == {"Deployment": 1, "Pod": 5, "ReplicaSet": 1}
    assert summary["podsAffected"] == 3
    assert summary["passed"] == 1
    deployment = body["results"][0]
    assert deployment["location"] == f"{path}:5"
    assert deployment["field"] == "spec.template.spec.containers[0].securityContext.privileged"


def test_text_summary_by_policy_rule_namespace_then_findings(tmp_path: Path) -> None:
    path = write_shapes(tmp_path)["kubectl.json"]

    proc = gpu_admission("audit", "--from", str(path))

    assert proc.returncode == 1
    out = proc.stdout
    assert out.startswith(
        "Audited 7 objects (1 Deployment, 5 Pods, 1 ReplicaSet): 7 evaluated, 0 skipped.\n"
        "Findings: 2 deny, 0 warn, 0 dryrun on 2 resources (with 3 Pods folded under their "
        "owners); 1 passed.\n"
    )
    order = ["By policy and rule:", "By namespace:", "Findings:\n", "Deployment team-a/trainer"]
    assert [out.index(s) for s in order] == sorted(out.index(s) for s in order)
    assert "  gpu-device-injection/privileged      DENY   1 resource (3 Pods)\n" in out
    assert "  team-a  1 deny, 0 warn, 0 dryrun" in out
    assert "Deployment team-a/trainer (3 Pods affected)" in out
    assert "\x1b[" not in out  # no colour when piped
    assert proc.stderr == ""  # no progress bar when stderr is not a terminal


def test_namespace_filter(tmp_path: Path) -> None:
    path = write_shapes(tmp_path)["kubectl.json"]

    code, body = audit_json("--from", str(path), "-n", "team-b")

    assert code == 1
    assert body["summary"]["objects"] == 2
    assert {r["namespace"] for r in body["results"]} == {"team-b"}


@pytest.mark.parametrize(("fail_on", "code"), [("deny", 1), ("warn", 1), ("never", 0)])
def test_fail_on(tmp_path: Path, fail_on: str, code: int) -> None:
    path = write_shapes(tmp_path)["kubectl.json"]

    assert gpu_admission("audit", "--from", str(path), "--fail-on", fail_on).returncode == code


def test_warn_findings_fail_only_with_fail_on_warn(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    text = (ROOT / "policies" / "gpu-device-injection.yaml").read_text()
    (policies / "p.yaml").write_text(
        text.replace("enforcementAction: deny", "enforcementAction: warn")
    )
    dump = tmp_path / "d.json"
    dump.write_bytes(orjson.dumps(pod("p", privileged=True)))

    base = ("audit", "--policies", str(policies), "--from", str(dump))
    assert gpu_admission(*base).returncode == 0
    assert gpu_admission(*base, "--fail-on", "warn").returncode == 1


def test_clean_audit_exits_0(tmp_path: Path) -> None:
    dump = tmp_path / "d.json"
    dump.write_bytes(orjson.dumps(as_list([pod("ok")])))

    proc = gpu_admission("audit", "--from", str(dump))

    assert proc.returncode == 0
    assert "0 deny, 0 warn, 0 dryrun on 0 resources; 1 passed." in proc.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "error: {path}: no such file"),
        (
            '{"kind": "List", "items": [{"a": 1},]}',
            "error: {path}:1: invalid JSON: Expecting value",
        ),
        ("a: [1,\n", "error: {path}:2: invalid YAML"),
    ],
)
def test_input_errors_exit_2_without_traceback(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "dump.json"
    if content is not None:
        path.write_text(content)

    proc = gpu_admission("audit", "--from", str(path))

    assert proc.returncode == 2
    assert message.format(path=path) in proc.stdout
    assert "Traceback" not in proc.stderr


def test_a_bad_inventory_exits_2(tmp_path: Path) -> None:
    inv = tmp_path / "nodes.json"
    inv.write_text('{"kind": "PodList", "items": []}')

    proc = gpu_admission("audit", "--from", str(inv), "--inventory", str(inv))

    assert proc.returncode == 2
    assert "inventory did not load" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- policyreport -----------------------------------------------------------------------


def policyreports(tmp_path: Path) -> list[dict[str, Any]]:
    path = write_shapes(tmp_path)["kubectl.json"]
    proc = gpu_admission("audit", "--from", str(path), "-o", "policyreport")
    assert proc.returncode == 1, proc.stderr
    return list(yaml.safe_load_all(proc.stdout))


def test_policyreport_per_namespace(tmp_path: Path) -> None:
    reports = policyreports(tmp_path)

    assert [(r["kind"], r["metadata"].get("namespace")) for r in reports] == [
        ("PolicyReport", "team-a"),
        ("PolicyReport", "team-b"),
    ]
    team_a, team_b = reports
    assert team_a["summary"] == {"pass": 0, "fail": 1, "warn": 0, "error": 0, "skip": 0}
    assert team_b["summary"] == {"pass": 1, "fail": 1, "warn": 0, "error": 0, "skip": 0}
    result = team_a["results"][0]
    assert result["resources"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "trainer",
            "namespace": "team-a",
            "uid": "uid-deploy-trainer",
        }
    ]
    assert result["properties"]["podsAffected"] == "3"


def test_policyreport_structure_is_what_the_crd_accepts(tmp_path: Path) -> None:
    for report in policyreports(tmp_path):
        assert report["apiVersion"] == "wgpolicyk8s.io/v1alpha2"
        assert set(report) == {"apiVersion", "kind", "metadata", "summary", "results"}
        assert report["metadata"]["name"] == "gpu-admission"
        assert report["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpu-admission"}
        for result in report["results"]:
            assert set(result) <= {
                "source", "policy", "rule", "category", "severity", "timestamp", "result",
                "scored", "message", "resources", "properties", "resourceSelector",
            }  # fmt: skip
            assert result["result"] in ("pass", "fail", "warn", "error", "skip")
            assert result["severity"] in ("critical", "high", "medium", "low", "info")
            assert result["source"] == "gpu-admission"
            assert set(result["timestamp"]) == {"seconds", "nanos"}
            assert all(isinstance(v, str) for v in result["properties"].values())


def test_policyreport_round_trips_through_yaml(tmp_path: Path) -> None:
    reports = policyreports(tmp_path)
    again = list(yaml.safe_load_all(yaml.safe_dump_all(reports)))

    assert again == reports


def test_from_and_context_together_is_a_usage_error(tmp_path: Path) -> None:
    path = write_shapes(tmp_path)["kubectl.json"]

    proc = gpu_admission("audit", "--from", str(path), "--context", "prod")

    assert proc.returncode == 2
    assert "--context and --kubeconfig are for a live audit, not --from" in proc.stderr


def test_a_broken_file_in_a_directory_does_not_hide_the_others(tmp_path: Path) -> None:
    (tmp_path / "dumps").mkdir()
    (tmp_path / "dumps" / "a-broken.json").write_text('{"kind": "List", "items": [{"a": 1},]}')
    (tmp_path / "dumps" / "b-good.json").write_text(json.dumps(pod("bad", privileged=True)))

    code, body = audit_json("--from", str(tmp_path / "dumps"))

    assert code == 2
    assert [r["name"] for r in body["results"]] == ["bad"]
    assert body["errors"][0].startswith(f"{tmp_path / 'dumps' / 'a-broken.json'}:1: invalid JSON")
