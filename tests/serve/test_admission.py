"""The AdmissionReview protocol, in process: the starlette app with the real engine."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from tests.support.paths import ROOT
from tests.support.reviews import CLEAN, VIOLATIONS, pod, review
from webhook.serve.decisionlog import DecisionLog
from webhook.serve.server import INLINE_BODY, MAX_BODY, create_app
from webhook.serve.state import Settings, State


def make_state(policies: Path = ROOT / "policies") -> State:
    settings = Settings(str(policies), str(ROOT / "examples/cluster/nodes.json"))
    return State.start(settings)


@pytest.fixture
def log() -> io.BytesIO:
    return io.BytesIO()


@pytest.fixture
def client(log: io.BytesIO) -> TestClient:
    return TestClient(create_app(make_state(), decision_log=DecisionLog(log)))


def post(client: TestClient, body: Any) -> Any:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return client.post("/validate", content=raw, headers={"content-type": "application/json"})


@pytest.mark.parametrize(("rule", "obj"), VIOLATIONS, ids=[r for r, _ in VIOLATIONS])
def test_every_rule_denies_with_its_id_in_the_message(client: TestClient, rule: str, obj: Any):
    r = review(obj)
    resp = post(client, r)
    assert resp.status_code == 200
    out = resp.json()
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    assert out["response"]["uid"] == r["request"]["uid"]
    assert out["response"]["allowed"] is False
    assert out["response"]["status"]["code"] == 403
    assert f"[{rule}]" in out["response"]["status"]["message"]


@pytest.mark.parametrize(("name", "obj"), CLEAN, ids=[n for n, _ in CLEAN])
def test_clean_objects_are_allowed(client: TestClient, name: str, obj: Any):
    out = post(client, review(obj)).json()["response"]
    assert out == {"uid": out["uid"], "allowed": True}


def test_deny_message_lists_every_violation(client: TestClient):
    obj = pod(
        limits={"nvidia.com/mig-1g.10g": 1}, container={"securityContext": {"privileged": True}}
    )
    message = post(client, review(obj)).json()["response"]["status"]["message"]
    assert message.startswith("Pod ml/p has 2 GPU policy violations:\n")
    assert "[gpu-device-injection/privileged]" in message
    assert "[gpu-resource-names/unknown-resource]" in message
    assert "did you mean nvidia.com/mig-1g.10gb?" in message


def test_a_deployment_is_judged_through_its_template(client: TestClient):
    from tests.support.reviews import deployment

    obj = deployment(pod(limits={"nvidia.com/mig-1g.10g": 1}))
    message = post(client, review(obj)).json()["response"]["status"]["message"]
    assert "spec.template.spec.containers[0]" in message


def _policies_with(tmp_path: Path, action: str) -> Path:
    target = tmp_path / "policies"
    shutil.copytree(ROOT / "policies", target)
    for f in target.glob("gpu-*.yaml"):
        f.write_text(
            f.read_text().replace("enforcementAction: deny", f"enforcementAction: {action}")
        )
    return target


def test_warn_findings_become_short_clean_warning_lines(tmp_path: Path):
    app = create_app(
        make_state(_policies_with(tmp_path, "warn")), decision_log=DecisionLog(io.BytesIO())
    )
    obj = pod(limits={"nvidia.com/mig-1g.10g": 1})
    out = post(TestClient(app), review(obj)).json()["response"]
    assert out["allowed"] is True and "status" not in out
    assert out["warnings"][0].startswith("[gpu-resource-names/unknown-resource]")
    assert all(len(w) <= 120 for w in out["warnings"])
    assert all(w.isprintable() for w in out["warnings"])
    assert sum(len(w) for w in out["warnings"]) <= 4096


def test_what_admission_cannot_see_is_a_warning_under_a_deny_policy(client: TestClient):
    # The shipped policies deny; an envFrom source that may hold NVIDIA_VISIBLE_DEVICES
    # is reported, capped at a warning: its content is not in the request.
    obj = pod(container={"envFrom": [{"configMapRef": {"name": "app-settings"}}]})
    out = post(client, review(obj)).json()["response"]
    assert out["allowed"] is True and "status" not in out
    assert out["warnings"][0].startswith("[gpu-device-injection/visible-devices-env-from]")


def test_dryrun_findings_become_audit_annotations(tmp_path: Path):
    app = create_app(
        make_state(_policies_with(tmp_path, "dryrun")), decision_log=DecisionLog(io.BytesIO())
    )
    out = post(TestClient(app), review(pod(labels={}, limits={"nvidia.com/gpu": 1}))).json()
    response = out["response"]
    assert response["allowed"] is True and "warnings" not in response
    assert set(response["auditAnnotations"]) == {
        "gpu-memory-fit.missing-peak-memory",
        "gpu-slo-class.missing-slo-class",
    }


@pytest.mark.parametrize("operation", ["DELETE", "CONNECT"])
def test_delete_and_connect_are_allowed_without_evaluation(
    client: TestClient, log: io.BytesIO, operation: str
):
    bad = pod(container={"securityContext": {"privileged": True}})
    r = review(None, operation=operation, old=bad)
    out = post(client, r).json()["response"]
    assert out == {"uid": r["request"]["uid"], "allowed": True}
    assert orjson.loads(log.getvalue().splitlines()[-1])["decision"] == "skip"


def test_ephemeral_container_update_judges_only_what_it_adds(client: TestClient):
    # The running Pod predates the labels policy; kubectl debug must still work, unless
    # the debug container itself smuggles a GPU in.
    running = pod(labels={}, limits={"nvidia.com/gpu": 1})
    debug = {
        "name": "debugger",
        "image": "busybox",
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
    }
    harmless = {"name": "debugger", "image": "busybox"}
    for added, allowed in ((harmless, True), (debug, False)):
        new = {**running, "spec": {**running["spec"], "ephemeralContainers": [added]}}
        r = review(new, operation="UPDATE", old=running, sub_resource="ephemeralcontainers")
        out = post(client, r).json()["response"]
        assert out["allowed"] is allowed, out
        if not allowed:
            assert 'ephemeral container "debugger"' in out["status"]["message"]
            assert "[gpu-device-injection/visible-devices-env]" in out["status"]["message"]


def test_pod_update_judges_only_what_it_adds(client: TestClient):
    # `kubectl annotate` on a running Pod: a CDI or NRI device annotation is read by the
    # node plugin at the next sandbox, so it is judged now; a label added to a Pod that
    # predates a policy is not a reason to refuse it.
    running = pod(labels={}, limits={"nvidia.com/gpu": 1})
    labelled = {**running, "metadata": {**running["metadata"], "labels": {"team": "a"}}}
    cdi = {
        **running,
        "metadata": {**running["metadata"], "annotations": {"cdi.k8s.io/x": "nvidia.com/gpu=all"}},
    }
    for new, allowed in ((labelled, True), (cdi, False)):
        out = post(client, review(new, operation="UPDATE", old=running)).json()["response"]
        assert out["allowed"] is allowed, out
    out = post(client, review(cdi, operation="UPDATE", old=running)).json()["response"]
    assert "[gpu-device-injection/cdi-annotation]" in out["status"]["message"]
    # The same annotation on both sides is what was admitted before: not judged again.
    assert post(client, review(cdi, operation="UPDATE", old=cdi)).json()["response"]["allowed"]
    status = review(cdi, operation="UPDATE", old=running, sub_resource="status")
    assert post(client, status).json()["response"]["allowed"]


def test_dry_run_requests_are_judged_the_same(client: TestClient):
    r = review(pod(container={"securityContext": {"privileged": True}}))
    r["request"]["dryRun"] = True
    assert post(client, r).json()["response"]["allowed"] is False


def test_exempt_namespace_is_not_judged(client: TestClient):
    r = review(pod(container={"securityContext": {"privileged": True}}), namespace="kube-system")
    assert post(client, r).json()["response"]["allowed"] is True


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"", "not valid JSON"),
        (b"{", "not valid JSON"),
        (b"[]", "JSON object"),
        (b"[" * 100_000, "not valid JSON"),
        (b'{"n": NaN}', "not valid JSON"),
        (b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}', "apiVersion"),
        (
            orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
            "request must be",
        ),
        (orjson.dumps(review(pod()) | {"request": {"uid": ""}}), "uid"),
        (
            orjson.dumps(
                {**review(pod()), "request": {**review(pod())["request"], "object": None}}
            ),
            "request.object",
        ),
        (
            orjson.dumps(
                {**review(pod()), "request": {**review(pod())["request"], "operation": "PATCH"}}
            ),
            "operation",
        ),
    ],
)
def test_bad_requests_get_400_with_a_json_error(client: TestClient, body: bytes, fragment: str):
    resp = post(client, body)
    assert resp.status_code == 400
    assert fragment in resp.json()["error"]


def test_body_over_3_mib_gets_413(client: TestClient):
    resp = post(client, b" " * (MAX_BODY + 1))
    assert resp.status_code == 413


def test_internal_fault_is_500_with_the_uid(monkeypatch: pytest.MonkeyPatch):
    state = make_state()

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")  # stands in for a bug in a check

    monkeypatch.setattr("webhook.serve.server.judge", broken)
    client = TestClient(create_app(state, decision_log=DecisionLog(io.BytesIO())))
    r = review(pod())
    resp = post(client, r)
    assert resp.status_code == 500
    assert resp.json()["uid"] == r["request"]["uid"]


def test_a_generate_name_pod_is_named_as_a_prefix(client: TestClient, log: io.BytesIO):
    # A ReplicaSet's Pod has only generateName at admission: `train-` alone would read as
    # the whole name, in the deny message and in the decision log alike.
    obj = pod(container={"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]})
    obj["metadata"] = {"generateName": "train-", "labels": obj["metadata"]["labels"]}
    resp = post(client, review(obj))
    message = resp.json()["response"]["status"]["message"]
    assert "Pod ml/train-*" in message and "Pod ml/train- " not in message
    assert orjson.loads(log.getvalue().splitlines()[-1])["name"] == "train-*"


def test_decision_log_holds_no_values(client: TestClient, log: io.BytesIO):
    secret = "GPU-3f9c0a52-secret-uuid"
    obj = pod(
        annotations={"cdi.k8s.io/x": secret},
        container={"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": secret}]},
    )
    post(client, review(obj))
    line = log.getvalue().splitlines()[-1]
    entry = orjson.loads(line)
    assert secret.encode() not in line
    assert entry["decision"] == "deny" and entry["user"] == "alice" and entry["name"] == "p"
    assert {f["rule"] for f in entry["findings"]} == {"cdi-annotation", "visible-devices-env"}
    assert set(entry) >= {
        "time",
        "uid",
        "operation",
        "kind",
        "namespace",
        "policySet",
        "inventoryAgeSeconds",
    }


def test_health_ready_and_metrics(client: TestClient):
    assert client.get("/healthz").status_code == 200
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["inventoryNodes"] == 6
    post(client, review(pod(container={"securityContext": {"privileged": True}})))
    text = client.get("/metrics").text
    assert 'gpu_admission_requests_total{decision="deny",kind="Pod",operation="CREATE"}' in text
    assert (
        'gpu_admission_findings_total{action="deny",policy="gpu-device-injection",rule="privileged"}'
        in text
    )
    assert "gpu_admission_request_duration_seconds_bucket" in text
    assert "gpu_admission_inventory_nodes 6.0" in text


def _samples(text: str) -> dict[str, float]:
    return {
        name: float(value)
        for line in text.splitlines()
        if line and not line.startswith("#")
        for name, value in [line.rsplit(" ", 1)]
    }


def test_requests_judged_on_the_large_body_thread_are_counted_with_the_rest(
    client: TestClient,
):
    # Counts are plain ints per thread (the event loop's, the large-body thread's),
    # added up when /metrics is scraped.
    small = review(pod(container={"securityContext": {"privileged": True}}))
    large = review(
        pod(
            container={"securityContext": {"privileged": True}},
            annotations={"padding": "x" * (INLINE_BODY + 1000)},
        )
    )
    assert len(orjson.dumps(large)) > INLINE_BODY
    series = 'gpu_admission_requests_total{decision="deny",kind="Pod",operation="CREATE"}'
    finding = (
        'gpu_admission_findings_total{action="deny",policy="gpu-device-injection",'
        'rule="privileged"}'
    )
    count = "gpu_admission_request_duration_seconds_count"
    before = _samples(client.get("/metrics").text)
    for body in (small, large, large):
        assert post(client, body).json()["response"]["allowed"] is False
    after = _samples(client.get("/metrics").text)
    assert after[series] - before.get(series, 0) == 3
    assert after[finding] - before.get(finding, 0) == 3
    assert after[count] - before.get(count, 0) == 3
    assert after['gpu_admission_request_duration_seconds_bucket{le="+Inf"}'] == after[count]


def test_not_ready_until_the_inventory_synced():
    state = State.start(Settings(str(ROOT / "policies")))  # no file: waits for a Node watch
    client = TestClient(create_app(state, decision_log=DecisionLog(io.BytesIO())))
    assert client.get("/readyz").status_code == 503
    state.set_nodes([])
    assert client.get("/readyz").status_code == 200


def test_stale_inventory_downgrades_inventory_findings_to_warnings():
    clock = [1000.0]
    state = State.start(Settings(str(ROOT / "policies"), inventory_max_age=60))
    state.clock = lambda: clock[0]
    state.set_nodes(orjson.loads((ROOT / "examples/cluster/nodes.json").read_bytes())["items"])
    clock[0] += 3600
    client = TestClient(create_app(state, decision_log=DecisionLog(io.BytesIO())))
    out = post(client, review(pod(limits={"nvidia.com/mig-1g.10g": 1}))).json()["response"]
    assert out["allowed"] is True
    assert "node inventory is 3600s old" in " ".join(w.strip() for w in out["warnings"])


def test_policy_reload_keeps_the_last_good_set(tmp_path: Path):
    policies = _policies_with(tmp_path, "deny")
    state = make_state(policies)
    digest = state.policy_set.digest
    (policies / "gpu-slo-class.yaml").write_text("apiVersion: [broken")
    # A change loads at the second check that sees it (a write in progress settles first).
    assert state.reload_policies() is False and state.policy_error is None
    assert state.reload_policies() is False
    assert state.policy_set.digest == digest and "invalid YAML" in (state.policy_error or "")
    client = TestClient(create_app(state, decision_log=DecisionLog(io.BytesIO())))
    assert "invalid YAML" in client.get("/readyz").json()["policyReloadError"]
    (policies / "gpu-slo-class.yaml").unlink()
    assert state.reload_policies() is False
    assert state.reload_policies() is True and state.policy_error is None
    shipped = len(list((ROOT / "policies").glob("gpu-*.yaml")))
    assert len(state.policy_set.policies) == shipped - 1  # every shipped one, one removed


def test_a_broken_decision_log_does_not_fail_admission() -> None:
    class Broken(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, data: Any) -> int:
            raise BrokenPipeError("stdout closed")

    log = DecisionLog(Broken())  # type: ignore[arg-type]
    client = TestClient(create_app(make_state(), decision_log=log))
    for _ in range(2):
        out = post(client, review(pod(container={"securityContext": {"privileged": True}})))
        assert out.status_code == 200 and out.json()["response"]["allowed"] is False
    assert log.lost == 2


def test_a_response_stays_bounded_however_many_findings() -> None:
    from webhook.core.engine.evaluation import Decision, Finding
    from webhook.serve.admission import ANNOTATION_BUDGET, DENY_BUDGET, response

    def findings(action: str) -> tuple[Finding, ...]:
        message = "volume hostPath /dev/nvidia0 exposes a GPU device node " * 4
        return tuple(
            Finding("gpu-device-injection", "hostpath-device", action, f"{n}: {message}", ())  # type: ignore[arg-type]
            for n in range(5000)
        )

    denied = response("u", Decision(findings("deny")), subject="Pod ml/p")["response"]
    message = denied["status"]["message"]
    assert len(message) <= DENY_BUDGET
    assert message.startswith("Pod ml/p has 5000 GPU policy violations:\n")
    shown = message.count("[gpu-device-injection/hostpath-device] ")
    assert message.endswith(f"\n... {5000 - shown} more GPU policy violations not shown")
    warned = response("u", Decision(findings("warn")), subject="Pod ml/p")["response"]
    assert sum(len(w) for w in warned["warnings"]) <= 4096
    audited = response("u", Decision(findings("dryrun")), subject="Pod ml/p")["response"]
    (value,) = audited["auditAnnotations"].values()
    assert len(value) == ANNOTATION_BUDGET and value.endswith("…")


@pytest.mark.parametrize(
    "uid",
    ["705ab4f5-6393-11e8-b7cc-42010a800002", 'a "quoted" \\ uid', "ünï\u2028cødé", "\x00\x1f"],
)
def test_an_allowed_response_is_built_as_the_same_bytes(uid: str) -> None:
    # A decision without findings is answered from bytes made directly; they must be
    # what serialising the AdmissionReview gives.
    from webhook.core.engine.evaluation import Decision
    from webhook.serve.admission import allowed_bytes, response

    for decision in (Decision(), Decision(skipped="DELETE is not judged")):
        assert allowed_bytes(uid) == orjson.dumps(response(uid, decision, subject="Pod ml/p"))
