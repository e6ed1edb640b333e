"""Every shell judges an object alike: `check`, `audit`, `diff`, `test` and `serve`, and
`diagnose` gives a job that can never fit the same proof.

One table of objects goes through each shell as a user (or the apiserver) would send it:
the real CLI in a subprocess, the real server over TLS. Each must report the same
(policy, rule, message) findings, word for word, in the same namespace. The policy set
is the shipped one plus a policy narrowed to named namespaces, so an object placed in
the wrong namespace by one shell shows up as a finding too many or too few.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.clirun import gpu_admission
from tests.support.paths import ROOT
from tests.support.servers import Server

NODES = ROOT / "examples/cluster/nodes.json"
LABELS = {"gpu-admission.io/peak-memory": "4Gi", "gpu-admission.io/slo-class": "batch"}
NARROWED = "gpu-device-injection-teams"
NARROWED_POLICY = f"""\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: {NARROWED}
spec:
  description: The teams' own copy of the device rules, for their namespaces only.
  enforcementAction: deny
  match:
    namespaces: [default, "team-*"]
  check: device-injection
  messagePrefix: "[teams] "
"""
# Judged by no policy: what `diff` compares the head policies with.
NOTHING_POLICY = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: nothing
spec:
  enforcementAction: deny
  match:
    namespaces: [no-such-namespace]
  check: device-injection
"""

H100_8 = {"nvidia.com/gpu": 8}
ON_H100 = {
    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
}
Finding = tuple[str, str, str]  # policy, rule, message
Found = dict[str, tuple[str, list[Finding]]]  # object name -> (namespace, findings)


def pod(
    name: str,
    namespace: str | None = "team-a",
    *,
    labels: dict[str, str] | None = None,
    limits: dict[str, Any] | None = None,
    privileged: bool = False,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "nvcr.io/nvidia/cuda:12.4.0-base"}
    container["resources"] = {"limits": limits or {"nvidia.com/gpu": 1}}
    if privileged:
        container["securityContext"] = {"privileged": True}
    meta: dict[str, Any] = {"name": name, "labels": labels or LABELS}
    if namespace is not None:
        meta["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [container], **(spec or {})},
    }


def deployment(name: str, namespace: str, template: dict[str, Any]) -> dict[str, Any]:
    """A Deployment whose pod template is the given Pod's labels and spec."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": template["metadata"]["labels"]},
                "spec": template["spec"],
            },
        },
    }


def pytorchjob(name: str, namespace: str, master: dict[str, Any], worker: dict[str, Any]) -> Any:
    """A PyTorchJob (a workload target: two roles) whose Master and Worker templates are
    the given Pods' labels and specs."""
    specs = {
        role: {"replicas": n, "template": {"metadata": {"labels": p["metadata"]["labels"]},
                                           "spec": p["spec"]}}
        for role, n, p in (("Master", 1, master), ("Worker", 3, worker))
    }  # fmt: skip
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"pytorchReplicaSpecs": specs},
    }


def vfio_claim(name: str, namespace: str) -> dict[str, Any]:
    """A ResourceClaim (a claim target) for NVIDIA's passthrough class."""
    request = {"name": "gpu", "exactly": {"deviceClassName": "vfio.gpu.nvidia.com"}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [request]}},
    }


ADMIN_LABEL = {"resource.kubernetes.io/admin-access": "true"}
# A Namespace (a namespace target) that carries the DRA admin-access label, listed where
# check and audit compare, and created at admission by a cluster admin.
ADMIN_NAMESPACE = {"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "gpu-admins", "labels": ADMIN_LABEL}}  # fmt: skip
GUARDRAILS = "gpu-dra-guardrails.yaml"
# Who sends each object to the webhook, where it is not alice.
USERS = {"gpu-admins": {"username": "kubernetes-admin", "groups": ["kubeadm:cluster-admins"]}}

HOSTPATH = {"volumes": [{"name": "dev", "hostPath": {"path": "/dev/nvidia0"}}]}
LATENCY = {**LABELS, "gpu-admission.io/slo-class": "latency-sensitive"}
PEAK_12GI = {**LABELS, "gpu-admission.io/peak-memory": "12Gi"}
ON_A10G = {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A10G-SHARED"}}

# name -> (object, the namespace every shell must judge it in, the (policy, rule) pairs).
TABLE: dict[str, tuple[dict[str, Any], str, list[tuple[str, str]]]] = {
    "clean": (pod("clean"), "team-a", []),
    "hostpath": (
        pod("hostpath", spec=HOSTPATH),
        "team-a",
        [("gpu-device-injection", "hostpath-device"), (NARROWED, "hostpath-device")],
    ),
    "typo": (
        pod("typo", limits={"nvidia.com/mig-1g.10g": 1}),
        "team-a",
        [("gpu-resource-names", "unknown-resource")],
    ),
    "too-big": (
        deployment(
            "too-big",
            "team-a",
            pod("x", labels=PEAK_12GI, limits={"nvidia.com/mig-1g.10gb": 1}),
        ),
        "team-a",
        [("gpu-memory-fit", "exceeds-device-memory")],
    ),
    "latency": (
        pod("latency", labels=LATENCY, spec=ON_A10G),
        "team-a",
        [("gpu-slo-class", "sharing-mode-not-accepted")],
    ),
    # kubectl apply puts it in `default`, which the narrowed policy names.
    "no-namespace": (
        pod("no-namespace", None, privileged=True),
        "default",
        [("gpu-device-injection", "privileged"), (NARROWED, "privileged")],
    ),
    "research": (
        pod("research", "research", privileged=True),
        "research",
        [("gpu-device-injection", "privileged")],
    ),
    # Its own namespace, not `default` (where the narrowed policy would take it).
    "deploy-ns": (
        deployment("deploy-ns", "batch-jobs", pod("x", privileged=True)),
        "batch-jobs",
        [("gpu-device-injection", "privileged")],
    ),
    "exempt": (pod("exempt", "gpu-operator", privileged=True), "gpu-operator", []),
    # One of each target beside pod specs: a workload's roles, a claim, a Namespace.
    "ranks": (
        pytorchjob("ranks", "team-a", pod("m"), pod("w", spec=HOSTPATH)),
        "team-a",
        # and the ranks judged together: two GPU Pods with no gang (a warning)
        [
            ("gpu-device-injection", "hostpath-device"),
            (NARROWED, "hostpath-device"),
            ("gpu-distributed", "gang-not-wired"),
        ],
    ),
    # A job the example nodes can never hold whole (4 ranks of 8 GPUs, 2 H100 nodes):
    # diagnose names the same proof for its Pending Pods (test below).
    "gang": (
        pytorchjob(
            "gang",
            "team-a",
            pod("m", limits=H100_8, spec=ON_H100),
            pod("w", limits=H100_8, spec=ON_H100),
        ),
        "team-a",
        [
            ("gpu-distributed", "gang-not-wired"),
            ("gpu-distributed", "gang-never-fits"),
            ("gpu-distributed", "shm-default"),  # Master and Worker: 8 ranks, 64 MiB
            ("gpu-distributed", "shm-default"),
        ],
    ),
    "passthrough": (
        vfio_claim("passthrough", "team-a"),
        "team-a",
        [("gpu-dra-guardrails", "passthrough-class")],
    ),
    "gpu-admins": (ADMIN_NAMESPACE, "gpu-admins", []),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("serve"))
    try:
        guardrails = s.policies / GUARDRAILS  # the admins' Namespace is where it belongs
        guardrails.write_text(
            guardrails.read_text().replace(
                "adminAccessNamespaces: []", "adminAccessNamespaces: [gpu-admins]"
            )
        )
        # Every policy denies here, so each shell shows a finding's whole message (a
        # warning's is wrapped into lines for kubectl): the new policy too.
        distributed = s.policies / "gpu-distributed.yaml"
        text = distributed.read_text()
        assert "enforcementAction: warn" in text
        distributed.write_text(text.replace("enforcementAction: warn", "enforcementAction: deny"))
        (s.policies / f"{NARROWED}.yaml").write_text(NARROWED_POLICY)
        wait_for_policy(s, NARROWED)
        yield s
    finally:
        s.stop()


def wait_for_policy(server: Server, name: str) -> None:
    deadline = time.monotonic() + 20
    while name not in server.client.get(server.url + "/readyz").json()["policies"]:
        assert time.monotonic() < deadline, "the server did not load the narrowed policy"
        time.sleep(0.1)


def test_every_shell_reports_the_same_findings(server: Server, tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for name, (obj, _, _) in TABLE.items():
        (manifests / f"{name}.yaml").write_text(yaml.safe_dump(obj, sort_keys=False))
    policies = server.policies  # the shipped ones and the narrowed one, as served

    found = from_check(policies, manifests)
    assert {name: (ns, sorted((p, r) for p, r, _ in fs)) for name, (ns, fs) in found.items()} == {
        name: (namespace, sorted(pairs)) for name, (_, namespace, pairs) in TABLE.items() if pairs
    }
    shells = {
        "audit": from_audit(policies, tmp_path),
        "diff": from_diff(policies, manifests, tmp_path),
        "test": from_test(policies, tmp_path, expected=found),
        "serve": from_serve(server),
    }
    disagreements = {shell: differences(found, theirs) for shell, theirs in shells.items()}
    assert disagreements == {shell: [] for shell in shells}, "\n".join(
        f"{shell}: {line}" for shell, lines in disagreements.items() for line in lines
    )


def test_diagnose_gives_the_job_the_same_gang_proof(tmp_path: Path) -> None:
    """The "gang" job's Pods as its operator makes them, all Pending on the example nodes:
    diagnose's job record rests on check's gang-never-fits finding, word for word (the
    operator writes the replica type in lower case: training-operator v1.9.0
    pkg/controller.v1/common/pod.go, `strings.ToLower(string(rtype))`)."""
    job, _, _ = TABLE["gang"]
    manifests = tmp_path / "gang.yaml"
    manifests.write_text(yaml.safe_dump(job, sort_keys=False))
    rows = cli("check", "--inventory", str(NODES), "-o", "json", str(manifests), code=0)
    (proof,) = [r["message"] for r in rows["results"] if r["rule"] == "gang-never-fits"]
    pods = []
    for role, spec in job["spec"]["pytorchReplicaSpecs"].items():
        for i in range(spec["replicas"]):
            name = f"gang-{role.lower()}-{i}"
            labels = {
                **spec["template"]["metadata"]["labels"],
                "training.kubeflow.org/job-name": "gang",
                "training.kubeflow.org/replica-type": role.lower(),
                "training.kubeflow.org/replica-index": str(i),
            }
            owner = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "gang"}
            meta = {"name": name, "namespace": "team-a", "uid": name, "labels": labels}
            meta["ownerReferences"] = [{**owner, "uid": "job", "controller": True}]
            body = {"metadata": meta, "spec": spec["template"]["spec"]}
            pods.append({"apiVersion": "v1", "kind": "Pod", **body, "status": {"phase": "Pending"}})
    dump = tmp_path / "pods.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
    out = json.loads(
        cli("diagnose", "--from", str(NODES), "--from", str(dump), "-o", "json", code=1)
    )
    (record,) = [r for r in out if r["type"] == "job"]
    assert record["job"] == "PyTorchJob team-a/gang" and record["fit"] == "never"
    assert f"The job can never be placed at once: {proof}".lower() in record["verdict"].lower()
    assert [r["domain"] for r in out if r["type"] == "pod"] == ["gang-does-not-fit"] * 4


def differences(expected: Found, got: Found) -> list[str]:
    """What a shell reports that `check` does not (+) and what it misses (-), each finding
    counted (a finding reported twice is a difference too)."""

    def flat(found: Found) -> Counter[tuple[str, ...]]:
        return Counter((name, ns, *f) for name, (ns, fs) in found.items() for f in fs)

    mine, theirs = flat(expected), flat(got)
    return [
        f"{sign} {name} in {ns or '(no namespace)'}: [{policy}/{rule}] {message}"
        for sign, rows in (("-", mine - theirs), ("+", theirs - mine))
        for name, ns, policy, rule, message in sorted(rows.elements())
    ]


def found_in(rows: list[dict[str, Any]]) -> Found:
    """Findings per object name, from rows that carry name, namespace, policy, rule and
    message (check, audit and diff all write them so)."""
    out: Found = {}
    for row in rows:
        namespace, findings = out.setdefault(row["name"], (row["namespace"], []))
        assert row["namespace"] == namespace, row
        findings.append((row["policy"], row["rule"], row["message"]))
    return {name: (ns, sorted(fs)) for name, (ns, fs) in out.items()}


def cli(*args: str, code: int) -> Any:
    proc = gpu_admission(*args)
    assert (proc.returncode, proc.stderr) == (code, ""), proc.stdout[-2000:]
    return json.loads(proc.stdout) if proc.stdout.startswith("{") else proc.stdout


def from_check(policies: Path, manifests: Path) -> Found:
    body = cli("check", "--policies", str(policies), "--inventory", str(NODES), "-o", "json",
               str(manifests), code=1)  # fmt: skip
    assert body["summary"]["errors"] == 0
    return found_in(body["results"])


def from_audit(policies: Path, tmp_path: Path) -> Found:
    dump = tmp_path / "dump.json"
    items = [obj for obj, _, _ in TABLE.values()]
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2))
    body = cli("audit", "--policies", str(policies), "--inventory", str(NODES), "-o", "json",
               "--from", str(dump), code=1)  # fmt: skip
    assert all(r["pods"] == 0 for r in body["results"])  # nothing folded: owners are absent
    return found_in(body["results"])


def from_diff(policies: Path, manifests: Path, tmp_path: Path) -> Found:
    base = tmp_path / "base"
    base.mkdir()
    (base / "nothing.yaml").write_text(NOTHING_POLICY)
    shutil.copy(policies / "workload-kinds.yaml", base)
    body = cli("diff", "--base-policies", str(base), "--policies", str(policies),
               "--inventory", str(NODES), "-o", "json", str(manifests), code=1)  # fmt: skip
    diffs = body["becameDenied"] + body["becameAllowed"] + body["changed"]
    assert all(d["removed"] == [] for d in diffs)  # the base judges nothing
    return found_in([{**d, **f} for d in diffs for f in d["added"]])


def from_test(policies: Path, tmp_path: Path, *, expected: Found) -> Found:
    """A PolicyTest suite that expects `expected` (every message matched whole) must pass;
    what fails is reported per object in place of its findings."""
    cases: list[dict[str, Any]] = []
    for name, (obj, _, _) in TABLE.items():
        findings = expected.get(name, ("", []))[1]
        outcome = "deny" if findings else "skip" if name == "exempt" else "allow"
        rules = sorted({f"{p}/{r}" for p, r, _ in findings})
        cases.append({"name": name, "object": obj, "expect": {"outcome": outcome, "rules": rules}})
        for i, (_, _, message) in enumerate(findings):
            expect = {"outcome": outcome, "messageMatches": f"^{re.escape(message)}$"}
            cases.append({"name": f"{name} #{i}", "object": obj, "expect": expect})
    suite = tmp_path / "suite.yaml"
    spec = {"policies": str(policies), "inventory": str(NODES), "cases": cases}
    doc = {"apiVersion": "gpu-admission.io/v1alpha1", "kind": "PolicyTest",
           "metadata": {"name": "shells-agree"}, "spec": spec}  # fmt: skip
    suite.write_text(yaml.safe_dump(doc, sort_keys=False))
    proc = gpu_admission("test", "-o", "junit", str(suite))
    failed: dict[str, list[str]] = {}
    for case in ET.fromstring(proc.stdout).iter("testcase"):
        for problem in [*case.iter("failure"), *case.iter("error")]:
            failed.setdefault(case.get("name", "").split(" #")[0], []).append(
                problem.get("message") or problem.text or "?"
            )
    assert proc.returncode == (0 if not failed else 2 if "load suite" in failed else 1)
    kept = {} if "load suite" in failed else expected  # a malformed suite judged nothing
    out = {name: found for name, found in kept.items() if name not in failed}
    return out | {name: ("?", [("test", "failed", "; ".join(why))]) for name, why in failed.items()}


def from_serve(server: Server) -> Found:
    """AdmissionReviews as the apiserver sends them on CREATE: request.namespace is the
    namespace of the URL, which for an object without one is kubectl's target, `default`."""
    out: Found = {}
    for name, (obj, _, _) in TABLE.items():
        namespace = obj["metadata"].get("namespace") or "default"
        user = USERS.get(name, {"username": "alice", "groups": ["system:authenticated"]})
        resp = server.validate(admission_review(obj, namespace=namespace, user=user))
        assert resp.status_code == 200, (name, resp.text)
        body = resp.json()["response"]
        assert "warnings" not in body and "auditAnnotations" not in body  # every policy denies
        if body["allowed"]:
            continue
        head, *lines = body["status"]["message"].split("\n")
        assert head.startswith(f"{obj['kind']} {namespace}/{name} has "), head
        findings = [re.fullmatch(r"\[([^/\]]+)/([^\]]+)\] (.*)", line, re.S) for line in lines]
        assert all(findings), lines
        out[name] = (namespace, sorted((m[1], m[2], m[3]) for m in findings if m))
    return out


def admission_review(
    obj: dict[str, Any], *, namespace: str, user: dict[str, Any]
) -> dict[str, Any]:
    group, _, version = obj["apiVersion"].rpartition("/")
    plural = obj["kind"].lower() + "s"
    request = {
        "uid": f"uid-{obj['metadata']['name']}",
        "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "resource": {"group": group, "version": version, "resource": plural},
        "requestKind": {"group": group, "version": version, "kind": obj["kind"]},
        "name": obj["metadata"]["name"],
        "namespace": namespace,
        "operation": "CREATE",
        "userInfo": user,
        "object": obj,
        "oldObject": None,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
