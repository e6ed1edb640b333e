"""gpu-dra-guardrails: who may set the DRA admin-access label on a Namespace (judged by
the request's userInfo at admission, by where the label is in check and audit), and
passthrough (VFIO) device classes outside the namespaces allowed them."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from tests.support.clirun import gpu_admission
from tests.support.paths import ROOT
from tests.support.reviews import review
from webhook.core.engine.evaluation import evaluate
from webhook.core.engine.subject import subject_of
from webhook.serve.decisionlog import DecisionLog
from webhook.serve.server import create_app
from webhook.serve.state import Settings, State
from webhook.sources.files import read_inventory
from webhook.sources.policy_files import load_policy_dir

POLICIES = load_policy_dir(str(ROOT / "policies"))
INVENTORY = read_inventory(str(ROOT / "examples/dra/cluster.yaml"))
LABEL = "resource.kubernetes.io/admin-access"
ADMIN = {
    "username": "kubernetes-admin",
    "groups": ["kubeadm:cluster-admins", "system:authenticated"],
}
ALICE = {"username": "alice", "groups": ["team-a", "system:authenticated"]}


def namespace(name: str, value: str | None = "true") -> dict[str, Any]:
    labels = {"kubernetes.io/metadata.name": name}
    if value is not None:
        labels[LABEL] = value
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def findings(obj: dict[str, Any], **request: Any) -> list[tuple[str, str, str]]:
    decision = evaluate(POLICIES, subject_of(obj, **request), INVENTORY)
    assert decision.error is None
    return [(f.action, f"{f.policy}/{f.rule}", f.message) for f in decision.findings]


RULE = "gpu-dra-guardrails/admin-access-label"
ALICE_DENY = (
    "deny",
    RULE,
    "user alice (groups: team-a, system:authenticated) sets "
    'resource.kubernetes.io/admin-access: "true" on Namespace team-a, which lets every claim '
    "in it take any device with adminAccess, even devices in use by others; only the groups "
    "system:masters, kubeadm:cluster-admins may set it (parameter adminAccessGroups).",
)

NAMESPACE_CASES = [
    # (case, object, request facts, findings)
    ("a tenant sets the label", namespace("team-a"), {"user": ALICE}, [ALICE_DENY]),
    ("an admin sets it", namespace("team-a"), {"user": ADMIN}, []),
    (
        "a tenant adds it on UPDATE",
        namespace("team-a"),
        {"user": ALICE, "operation": "UPDATE", "old": namespace("team-a", None)},
        [ALICE_DENY],
    ),
    (
        "an UPDATE that keeps it (another label changes)",
        namespace("team-a"),
        {"user": ALICE, "operation": "UPDATE", "old": namespace("team-a")},
        [],
    ),
    ("a tenant sets it to false", namespace("team-a", "false"), {"user": ALICE}, []),
    (
        "check and audit: no request, the label outside the allowed namespaces",
        namespace("team-a"),
        {},
        [
            (
                "warn",
                RULE,
                'Namespace team-a carries resource.kubernetes.io/admin-access: "true", so '
                "every claim in it may take any device with adminAccess, even devices in use "
                "by others; it is not among the namespaces allowed the label (none). Who set "
                "it is judged at admission.",
            )
        ],
    ),
]


@pytest.mark.parametrize(
    ("obj", "request_facts", "expected"),
    [c[1:] for c in NAMESPACE_CASES],
    ids=[c[0] for c in NAMESPACE_CASES],
)
def test_admin_access_label(obj: Any, request_facts: Any, expected: Any) -> None:
    assert findings(obj, **request_facts) == expected


def test_a_namespace_without_the_label_is_not_judged() -> None:
    decision = evaluate(POLICIES, subject_of(namespace("team-a", None), user=ALICE), INVENTORY)
    assert decision.skipped == "Namespace carries no label a policy reads"
    assert not decision.findings


def vfio_claim(namespace: str, *, cls: str = "vfio.gpu.nvidia.com", selector: str = "") -> Any:
    exactly: dict[str, Any] = {"deviceClassName": cls}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "passthrough", "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


PASS = "gpu-dra-guardrails/passthrough-class"
TAIL = (
    "in namespace ml: the GPU leaves the host driver's control (no isolation, health or "
    "memory checks apply); only the namespaces none may (parameter passthroughNamespaces)."
)


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            vfio_claim("ml"),
            f'ResourceClaim "passthrough" request "gpu" asks for a passthrough (VFIO) device '
            f"(DeviceClass vfio.gpu.nvidia.com) {TAIL}",
        ),
        (
            vfio_claim(
                "ml", cls="gpu.nvidia.com",
                selector="device.attributes['gpu.nvidia.com'].type == 'vfio'",
            ),
            'ResourceClaim "passthrough" request "gpu" asks for a passthrough (VFIO) device '
            "(selector \"device.attributes['gpu.nvidia.com'].type == 'vfio'\") " + TAIL,
        ),
    ],
    ids=["the class", "a selector"],
)  # fmt: skip
def test_passthrough_claims_are_denied_outside_the_allowed_namespaces(
    obj: Any, expected: str
) -> None:
    mine = [f for f in findings(obj) if f[1] == PASS]
    assert mine == [("deny", PASS, expected)]


def test_passthrough_in_an_allowed_namespace_and_a_plain_claim_pass(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    text = (ROOT / "policies/gpu-dra-guardrails.yaml").read_text()
    (policies / "p.yaml").write_text(
        text.replace("passthroughNamespaces: []", "passthroughNamespaces: [vms]")
    )
    only = load_policy_dir(str(policies))
    decision = evaluate(only, subject_of(vfio_claim("vms")), INVENTORY)
    assert decision.findings == ()
    plain = vfio_claim("ml", cls="gpu.nvidia.com")
    assert evaluate(only, subject_of(plain), INVENTORY).findings == ()


def test_the_webhook_judges_who_sets_the_label_from_the_review() -> None:
    """As the apiserver sends it: request.userInfo, oldObject on UPDATE; never cached."""
    state = State.start(Settings(str(ROOT / "policies"), str(ROOT / "examples/dra/cluster.yaml")))
    client = TestClient(create_app(state, decision_log=DecisionLog(io.BytesIO())))

    def send(user: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
        body = review(namespace("team-a"), operation=operation)
        body["request"]["kind"] = {"group": "", "version": "v1", "kind": "Namespace"}
        body["request"]["namespace"] = "team-a"
        body["request"]["userInfo"] = user
        if operation == "UPDATE":
            body["request"]["oldObject"] = namespace("team-a", None)
        resp = client.post("/validate", content=orjson.dumps(body))
        assert resp.status_code == 200, resp.text
        out: dict[str, Any] = resp.json()["response"]
        return out

    denied = send(ALICE)
    assert denied["allowed"] is False
    assert ALICE_DENY[2] in denied["status"]["message"]
    assert send(ADMIN)["allowed"] is True  # the same object, another user: not from a cache
    assert send(copy.deepcopy(ALICE), "UPDATE")["allowed"] is False


def test_check_warns_for_a_labelled_namespace(tmp_path: Path) -> None:
    (tmp_path / "ns.yaml").write_text(json.dumps(namespace("team-a")))
    done = gpu_admission("check", "--output", "json", str(tmp_path / "ns.yaml"))
    assert done.returncode == 0, done.stderr
    [result] = json.loads(done.stdout)["results"]
    assert (result["rule"], result["action"]) == ("admin-access-label", "warn")


def admin_claim(
    kind: str = "ResourceClaim", ns: str = "ml", version: str = "v1", name: str = "admin"
) -> dict[str, Any]:
    """A claim (template) asking for admin access, as v1 and v1beta1 write it."""
    if version == "v1":
        request: dict[str, Any] = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
        request["exactly"]["adminAccess"] = True
    else:
        request = {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "adminAccess": True}
    spec = {"devices": {"requests": [request]}}
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": kind,
        "metadata": {"name": name, "namespace": ns},
        "spec": {"spec": spec} if kind == "ResourceClaimTemplate" else spec,
    }


def claim_pod(ns: str = "ml") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": ns},
        "spec": {
            "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "admin"}],
            "containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "g"}]}}],
        },
    }


ADMIN_RULE = "admin-access-claim"
UNKNOWN = (
    'ResourceClaim "admin" request "gpu" sets adminAccess (every matching device, even one '
    "in use by others); the apiserver admits it only in a namespace labelled "
    f'{LABEL}: "true", and namespace ml is neither in the input nor in the inventory, so '
    "whether it is cannot be told here. Add the Namespace to the input (or --inventory), or "
    "drop adminAccess."
)
REFUSED = (
    'ResourceClaim "admin" request "gpu" sets adminAccess, but namespace ml does not carry '
    f'{LABEL}: "true": the apiserver refuses the claim. Drop adminAccess, or have a cluster '
    "admin (one of adminAccessGroups) label the namespace."
)
# (case, the files of one `check` run, its admin-access-claim findings as (kind, action,
# message start)). The Namespace may come in any file of the input.
ADMIN_CASES: list[tuple[str, list[list[dict[str, Any]]], list[tuple[str, str, str]]]] = [
    ("no Namespace known", [[admin_claim()]], [("ResourceClaim", "warn", UNKNOWN)]),
    ("a Namespace without the label", [[admin_claim(), namespace("ml", None)]],
     [("ResourceClaim", "deny", REFUSED)]),
    ("the Namespace in another file", [[admin_claim()], [namespace("ml", "false")]],
     [("ResourceClaim", "deny", REFUSED)]),
    ("a labelled Namespace", [[admin_claim(), namespace("ml")]], []),
    ("another namespace's label", [[admin_claim(), namespace("other")]],
     [("ResourceClaim", "warn", UNKNOWN)]),
    ("v1beta1 on the request", [[admin_claim(version="v1beta1"), namespace("ml", None)]],
     [("ResourceClaim", "deny", REFUSED)]),
    ("a template and the pod naming it",
     [[admin_claim("ResourceClaimTemplate"), claim_pod(), namespace("ml", None)]],
     [("ResourceClaimTemplate", "deny", 'ResourceClaimTemplate "admin" request "gpu" sets '),
      ("Pod", "deny", 'pod claim "g": ResourceClaimTemplate "admin" request "gpu" sets ')]),
    ("a claim without adminAccess", [[vfio_claim("ml", cls="gpu.nvidia.com")]], []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("files", "expected"), [c[1:] for c in ADMIN_CASES], ids=[c[0] for c in ADMIN_CASES]
)
def test_check_reads_admin_access_on_claims(
    tmp_path: Path, files: list[list[dict[str, Any]]], expected: list[tuple[str, str, str]]
) -> None:
    names = []
    for i, objs in enumerate(files):
        path = tmp_path / f"f{i}.yaml"
        path.write_text("---\n".join(json.dumps(o) + "\n" for o in objs))
        names.append(str(path))
    done = gpu_admission("check", "--output", "json", *names)
    assert "Traceback" not in done.stderr
    found = [
        (r["kind"], r["action"], r["message"])
        for r in json.loads(done.stdout)["results"]
        if r["rule"] == ADMIN_RULE
    ]
    assert len(found) == len(expected), found
    for (kind, action, message), (want, start) in zip(
        found, [(e[:2], e[2]) for e in expected], strict=True
    ):
        assert (kind, action) == want
        assert message.startswith(start), message
    denied = any(a == "deny" for _, a, _ in expected)
    assert done.returncode == (1 if denied else 0), done.stdout


def test_admin_access_at_admission_is_the_apiservers() -> None:
    """The apiserver validated the label before calling any webhook: nothing to add."""
    decision = evaluate(POLICIES, subject_of(admin_claim(), user=ALICE), INVENTORY)
    assert not [f for f in decision.findings if f.rule == ADMIN_RULE]
    unknown = evaluate(POLICIES, subject_of(admin_claim()), INVENTORY)
    assert [(f.rule, f.action) for f in unknown.findings] == [(ADMIN_RULE, "warn")]
