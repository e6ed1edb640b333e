"""`audit -o openreports` and `audit -o openreports --apply`: OpenReports the OpenReports
CRDs accept (offline against their schema, and live in a real apiserver), written again
by a second run instead of duplicated, and the stale ones deleted."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.support.auditobjects import GPU_LABELS, as_list, deployment_family, pod
from tests.support.clirun import gpu_admission
from tests.support.kubeclusters import Cluster, kubeclusters  # noqa: F401  (fixtures)
from tests.support.kubeclusters import cluster as cluster
from tests.support.paths import ROOT
from webhook.commands.audit import AuditEntry, AuditReport, ObjectRef
from webhook.core.engine.evaluation import Finding
from webhook.kube.reports_apply import apply_reports
from webhook.reports.openreports import open_reports

CRDS = ROOT / "tests/fixtures/openreports"
INVENTORY = str(ROOT / "examples/cluster/nodes.json")
MANAGED = "app.kubernetes.io/managed-by=gpu-admission"

Obj = dict[str, Any]

OBJECTS = [
    *deployment_family("trainer", pods=3, privileged=True),
    pod("ok", gpus=1, labels=GPU_LABELS, namespace="team-b"),
    pod("typo", namespace="team-b", labels=GPU_LABELS, gpus=1),
]
OBJECTS[-1]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpux": "1"}}


def crd_schema(kind: str) -> Obj:
    name = {"Report": "reports", "ClusterReport": "clusterreports"}[kind]
    crd = yaml.safe_load((CRDS / f"openreports.io_{name}.yaml").read_text())
    [version] = crd["spec"]["versions"]
    schema: Obj = version["schema"]["openAPIV3Schema"]
    return schema


def audit(tmp_path: Path, output: str, objects: list[Obj] = OBJECTS) -> list[Obj]:
    dump = tmp_path / f"dump-{output}.json"
    dump.write_text(json.dumps(as_list(objects)))
    run = gpu_admission("audit", "--from", str(dump), "--inventory", INVENTORY, "-o", output)
    assert run.returncode == 1, run.stderr
    return list(yaml.safe_load_all(run.stdout))


def without_timestamps(results: list[Obj]) -> list[Obj]:
    return [{k: v for k, v in r.items() if k != "timestamp"} for r in results]


# --- the renderer, offline ----------------------------------------------------------------


def test_the_vendored_crds_are_the_upstream_files() -> None:
    readme = (CRDS / "README.md").read_text()
    for name in ("openreports.io_reports.yaml", "openreports.io_clusterreports.yaml"):
        digest = hashlib.sha256((CRDS / name).read_bytes()).hexdigest()
        assert f"| {name} | {digest} |" in readme, f"{name} differs from the vendored release"
    assert "Apache License" in (CRDS / "LICENSE").read_text()


def test_openreports_are_the_policyreports_renamed(tmp_path: Path) -> None:
    reports, policy_reports = audit(tmp_path, "openreports"), audit(tmp_path, "policyreport")

    assert [(r["kind"], r["metadata"]) for r in reports] == [
        ("Report", {"name": "gpu-admission", "namespace": ns, "labels": {
            "app.kubernetes.io/managed-by": "gpu-admission"}})
        for ns in ("team-a", "team-b")
    ]  # fmt: skip
    for report, policy_report in zip(reports, policy_reports, strict=True):
        assert report["apiVersion"] == "openreports.io/v1alpha1"
        assert report["source"] == "gpu-admission"
        assert report["summary"] == policy_report["summary"]
        assert without_timestamps(report["results"]) == without_timestamps(policy_report["results"])
    assert reports[1]["summary"] == {"pass": 1, "fail": 1, "warn": 0, "error": 0, "skip": 0}


def cluster_scoped_audit() -> AuditReport:
    """An audit with a finding on a cluster-scoped object (workloads never are one)."""
    ref = ObjectRef("example.com/v1", "NodeAgent", "", "agent", "uid-agent")
    finding = Finding("gpu-device-injection", "privileged", "deny", "agent is privileged", ())
    return AuditReport((AuditEntry(ref, finding, "", 0),), 1, 1, {}, {}, {}, {})


def test_openreports_validate_against_the_crd_schema(tmp_path: Path) -> None:
    reports = audit(tmp_path, "openreports")
    reports += open_reports(cluster_scoped_audit(), timestamp=1)

    assert [r["kind"] for r in reports] == ["Report", "Report", "ClusterReport"]
    assert "namespace" not in reports[2]["metadata"]
    for report in reports:
        schema = crd_schema(report["kind"])
        jsonschema.validate(report, schema)
        # The schema does not forbid other fields (the apiserver would prune or, with
        # strict validation, refuse them): check the names too.
        assert set(report) <= set(schema["properties"])
        result_fields = schema["properties"]["results"]["items"]["properties"]
        for result in report["results"]:
            assert set(result) <= set(result_fields), set(result)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("-o", "json", "--apply"), "--apply writes OpenReports: use it with --output openreports"),
        (("--apply",), "--apply writes OpenReports: use it with --output openreports"),
    ],
)
def test_apply_needs_openreports(args: tuple[str, ...], message: str) -> None:
    run = gpu_admission("audit", "--from", INVENTORY, *args)

    assert run.returncode == 2
    assert message in run.stderr
    assert "Traceback" not in run.stderr


# --- into a real apiserver ---------------------------------------------------------------


def apply(cluster: Cluster, *args: str) -> tuple[int, list[str], str]:
    run = gpu_admission(
        "audit", "--kubeconfig", str(cluster.kubeconfig), "--inventory", INVENTORY,
        "-o", "openreports", "--apply", "--page-size", "1", *args,
    )  # fmt: skip
    return run.returncode, run.stdout.splitlines(), run.stderr


def reports(cluster: Cluster, *namespaces: str) -> dict[str, Obj]:
    listed = json.loads(cluster.kubectl("get", "reports", "-A", "-l", MANAGED, "-o", "json").stdout)
    return {
        r["metadata"]["namespace"]: r
        for r in listed["items"]
        if r["metadata"]["namespace"] in namespaces
    }


def create(cluster: Cluster, namespace: str, objects: list[Obj]) -> None:
    docs = [{**o, "metadata": {k: v for k, v in o["metadata"].items() if k != "uid"}}
            for o in objects]  # fmt: skip
    cluster.kubectl("-n", namespace, "create", "-f", "-", stdin=yaml.safe_dump_all(docs))


def test_apply_creates_then_updates_and_prunes(cluster: Cluster) -> None:
    a, b = cluster.namespace("openreports-a"), cluster.namespace("openreports-b")
    privileged = pod("privileged", namespace=a, privileged=True)
    create(cluster, a, [privileged])
    typo = pod("typo", namespace=b, labels=GPU_LABELS, gpus=1)
    typo["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpux": "1"}}
    create(cluster, b, [typo])

    # Before the CRDs: a clear error, nothing half-written.
    code, out, err = apply(cluster)
    assert code == 2, (out, err)
    assert (
        "the reports were not applied: GET /apis/openreports.io/v1alpha1/reports: the cluster "
        "does not serve reports.openreports.io/v1alpha1: install the OpenReports CRDs first"
    ) in err
    cluster.kubectl("apply", "--server-side", "-f", str(CRDS / "openreports.io_reports.yaml"),
                    "-f", str(CRDS / "openreports.io_clusterreports.yaml"))  # fmt: skip
    cluster.kubectl("wait", "--for", "condition=established", "--timeout", "30s",
                    "crd/reports.openreports.io", "crd/clusterreports.openreports.io")  # fmt: skip

    code, out, err = apply(cluster)
    assert code == 1, err  # findings at --fail-on deny, as without --apply
    assert {f"Report {a}/gpu-admission created", f"Report {b}/gpu-admission created"} <= set(out)
    first = reports(cluster, a, b)
    assert first[a]["summary"] == {"pass": 0, "fail": 1, "warn": 0, "error": 0, "skip": 0}
    assert [(r["rule"], r["resources"][0]["name"]) for r in first[a]["results"]] == [
        ("privileged", "privileged")
    ]

    # A second finding in a; b's only workload gone: a is updated in place, b deleted.
    create(cluster, a, [pod("second", namespace=a, privileged=True)])
    cluster.kubectl("-n", b, "delete", "pod", "typo", "--wait=false")
    code, out, err = apply(cluster)
    assert code == 1, err
    assert f"Report {a}/gpu-admission updated" in out
    assert f"Report {b}/gpu-admission deleted" in out
    assert f"Report {a}/gpu-admission created" not in out
    second = reports(cluster, a, b)
    assert set(second) == {a}
    assert second[a]["metadata"]["uid"] == first[a]["metadata"]["uid"]  # the same object
    assert second[a]["metadata"]["resourceVersion"] != first[a]["metadata"]["resourceVersion"]
    assert second[a]["summary"] == {"pass": 0, "fail": 2, "warn": 0, "error": 0, "skip": 0}

    # A dump is not the cluster: its reports are written, nothing is deleted.
    dump = cluster.dir / "dump.json"
    dump.write_text(json.dumps(as_list([typo])))
    code, out, err = apply(cluster, "--from", str(dump))
    assert code == 1, err
    assert out == [f"Report {b}/gpu-admission created"]
    assert set(reports(cluster, a, b)) == {a, b}

    # --namespace a: a is written, and nothing outside a is deleted (b's report stays,
    # though b has no workloads any more).
    code, out, err = apply(cluster, "--namespace", a)
    assert code == 1, err
    assert out == [f"Report {a}/gpu-admission updated"]
    assert set(reports(cluster, a, b)) == {a, b}

    # A ClusterReport, through the same code (no workload is cluster-scoped).
    cluster_reports = open_reports(cluster_scoped_audit(), timestamp=1)
    for verb in ("created", "updated"):
        applied = apply_reports(cluster.api, reports=cluster_reports, selector=MANAGED,
                                namespace=None, page_size=1, prune=False)  # fmt: skip
        assert list(applied.lines()) == [f"ClusterReport gpu-admission {verb}"]
    listed = json.loads(cluster.kubectl("get", "clusterreports", "-o", "json").stdout)["items"]
    assert [r["results"][0]["resources"][0]["kind"] for r in listed] == ["NodeAgent"]
