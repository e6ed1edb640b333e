"""`gpu-admission audit` against a live API: the real kubernetes client, a fake apiserver."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.auditobjects import GPU_LABELS, deployment_family, pod
from tests.support.clirun import gpu_admission
from tests.support.fakeapiserver import TOKEN, FakeApiServer
from tests.support.paths import ROOT
from webhook.kube.client import (
    BUILTIN_WORKLOADS,
    DRA_RESOURCES,
    NAMESPACES,
    NODES,
    QUEUE_RESOURCES,
    RESOURCE_QUOTAS,
)

PYTORCHJOBS = ("kubeflow.org", "v1", "pytorchjobs")


def key(kind: str) -> tuple[str, str, str]:
    refs = (*BUILTIN_WORKLOADS, NODES, NAMESPACES, *DRA_RESOURCES, *QUEUE_RESOURCES)
    ref = next(r for r in refs if r.kind == kind)
    return (ref.group, ref.version, ref.plural)


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        # Every apiserver serves Namespaces and ResourceQuotas; resource.k8s.io and Kueue
        # only where a test says so.
        for ref in (*BUILTIN_WORKLOADS, NODES, NAMESPACES, RESOURCE_QUOTAS):
            server.serve(ref.group, ref.version, ref.plural, ref.kind, namespaced=ref.namespaced)
        nodes = json.loads((ROOT / "examples" / "cluster" / "nodes.json").read_text())["items"]
        server.put_many(key("Node"), nodes)
        yield server


@pytest.fixture
def kubeconfig(api: FakeApiServer, tmp_path: Path) -> str:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": api.url}}],
        "users": [{"name": "tester", "user": {"token": TOKEN}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester"}}],
        "current-context": "fake",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def put(api: FakeApiServer, objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        api.put(key(obj["kind"]), obj)


def audit(kubeconfig: str, *args: str) -> tuple[int, dict[str, Any], str]:
    proc = gpu_admission("audit", "--kubeconfig", kubeconfig, "-o", "json", *args)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_live_audit_pages_through_every_workload(api: FakeApiServer, kubeconfig: str) -> None:
    put(api, deployment_family("trainer", pods=10, privileged=True))
    put(api, [pod(f"ok-{i}", namespace="team-b", gpus=1, labels=GPU_LABELS) for i in range(12)])

    code, body, _ = audit(kubeconfig, "--page-size", "4")

    assert code == 1
    assert body["summary"]["objects"] == 24
    assert body["summary"]["kinds"] == {"Deployment": 1, "Pod": 22, "ReplicaSet": 1}
    assert [(r["kind"], r["name"], r["rule"], r["pods"]) for r in body["results"]] == [
        ("Deployment", "trainer", "privileged", 10)
    ]
    pages = api.list_requests("/api/v1/pods")
    assert len(pages) == 6  # 22 Pods, 4 a page
    assert all(r.query["limit"] == "4" for r in pages)
    assert [bool(r.query.get("continue")) for r in pages] == [False] + [True] * 5
    assert pages[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert "location" not in body["results"][0]


def test_nodes_come_from_the_cluster(api: FakeApiServer, kubeconfig: str) -> None:
    typo = pod("typo", gpus=1, labels=GPU_LABELS)
    typo["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/mig-1g.10g": "1"}
    put(api, [typo])

    _, body, _ = audit(kubeconfig)

    message = body["results"][0]["message"]
    assert "no node in the inventory (6 nodes) advertises" in message
    assert len(api.list_requests("/api/v1/nodes")) == 1


def test_inventory_file_replaces_the_cluster_nodes(api: FakeApiServer, kubeconfig: str) -> None:
    inventory = str(ROOT / "examples" / "cluster" / "nodes.json")

    code, _, _ = audit(kubeconfig, "--inventory", inventory)

    assert code == 0
    assert api.list_requests("/api/v1/nodes") == []


def test_namespace_lists_only_that_namespace(api: FakeApiServer, kubeconfig: str) -> None:
    put(api, [pod("a", namespace="team-a", privileged=True), pod("b", namespace="team-b")])

    code, body, _ = audit(kubeconfig, "-n", "team-b")

    assert code == 0
    assert body["summary"]["objects"] == 1
    assert len(api.list_requests("/api/v1/namespaces/team-b/pods")) == 1
    assert api.list_requests("/api/v1/pods") == []


def test_custom_resources_listed_when_served_noted_when_not(
    api: FakeApiServer, kubeconfig: str
) -> None:
    api.serve(*PYTORCHJOBS, "PyTorchJob", namespaced=True)
    worker = {"name": "w", "securityContext": {"privileged": True}}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "finetune", "namespace": "ml", "uid": "u1"},
        "spec": {
            "pytorchReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [worker]}}}}
        },
    }
    api.put(PYTORCHJOBS, job)

    code, body, _ = audit(kubeconfig)

    assert code == 1
    assert [(r["kind"], r["name"], r["rule"]) for r in body["results"]] == [
        ("PyTorchJob", "finetune", "privileged")
    ]
    assert any("rayclusters.ray.io/v1: not served" in n for n in body["notes"])


def test_a_failing_resource_is_an_error_and_the_rest_is_audited(
    api: FakeApiServer, kubeconfig: str
) -> None:
    put(api, [pod("bad", privileged=True)])
    api.fail_next("/apis/batch/v1/jobs", 500)

    code, body, stderr = audit(kubeconfig)

    assert code == 2
    assert body["results"][0]["name"] == "bad"
    assert body["errors"] == [
        "listing jobs.batch/v1: GET /apis/batch/v1/jobs: HTTP 500: injected 500"
    ]
    assert "error: listing jobs.batch/v1" in stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--context", "nope"), "has no context 'nope'; it has: fake"),
        (("--kubeconfig", "/nonexistent/kubeconfig"), "kubeconfig /nonexistent/kubeconfig (given)"),
    ],
)
def test_bad_credentials_exit_2(kubeconfig: str, args: tuple[str, ...], message: str) -> None:
    proc = gpu_admission("audit", "--kubeconfig", kubeconfig, *args)

    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unreachable_cluster_exits_2(tmp_path: Path, kubeconfig: str, api: FakeApiServer) -> None:
    text = Path(kubeconfig).read_text().replace(api.url, "http://127.0.0.1:9")
    dead = tmp_path / "dead"
    dead.write_text(text)

    proc = gpu_admission("audit", "--kubeconfig", str(dead))

    assert proc.returncode == 2
    assert "cannot reach the Kubernetes API" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_configured_kind_the_cluster_does_not_serve_is_a_note(
    api: FakeApiServer, kubeconfig: str, tmp_path: Path
) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    shipped = ROOT / "policies" / "gpu-device-injection.yaml"
    (policies / "p.yaml").write_text(shipped.read_text())
    (policies / "kinds.yaml").write_text(
        "apiVersion: gpu-admission.io/v1alpha1\nkind: WorkloadKinds\n"
        "metadata: {name: extra}\nspec:\n  customResources:\n"
        "    - {group: example.com, kind: TrainJob, templates: [spec.template]}\n"
    )

    code, body, _ = audit(kubeconfig, "--policies", str(policies))

    assert code == 0
    assert "skipped TrainJob.example.com: the cluster does not serve that group" in body["notes"]
    assert len(api.list_requests("/apis/example.com")) == 1


def test_dra_claims_and_namespaces_are_judged_against_the_cluster_supply(
    api: FakeApiServer, kubeconfig: str
) -> None:
    # The cluster's DRA supply (examples/dra/cluster.yaml: classes, slices, a template)
    # is read with its Nodes; claims, templates and Namespaces are judged as themselves.
    for ref in DRA_RESOURCES:
        api.serve(ref.group, ref.version, ref.plural, ref.kind, namespaced=ref.namespaced)
    supply = yaml.safe_load((ROOT / "examples/dra/cluster.yaml").read_text())["items"]
    put(api, [o for o in supply if o["kind"] != "Node"])
    bad = ROOT / "examples/dra/bad"
    typo = yaml.safe_load((bad / "selector-matches-nothing.yaml").read_text())
    labelled = yaml.safe_load((bad / "admin-access-label.yaml").read_text())
    put(
        api, [typo, labelled, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}]
    )

    code, body, _ = audit(kubeconfig)

    assert code == 1
    found = {(r["kind"], r["name"], r["rule"]) for r in body["results"]}
    assert ("ResourceClaim", "a100-typo", "selector-matches-nothing") in found
    assert ("Namespace", "team-a", "admin-access-label") in found
    assert body["summary"]["kinds"]["Namespace"] == 2
    # One namespace's audit judges that Namespace only.
    _, scoped, _ = audit(kubeconfig, "-n", "ml")
    assert scoped["summary"]["kinds"].get("Namespace") == 1
    assert ("ResourceClaim", "a100-typo", "selector-matches-nothing") in {
        (r["kind"], r["name"], r["rule"]) for r in scoped["results"]
    }


def test_a_cluster_without_dra_is_a_note(api: FakeApiServer, kubeconfig: str) -> None:
    put(api, [pod("ok", namespace="ml", gpus=1, labels=GPU_LABELS)])

    code, body, _ = audit(kubeconfig)

    assert code == 0
    assert (
        "skipped resourceclaims.resource.k8s.io/v1: not served by this cluster "
        "(resource.k8s.io/v1 is served from Kubernetes 1.34 on, unless the API is off)"
    ) in body["notes"]
