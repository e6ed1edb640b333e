"""POST /mutate: the optional neutralising patch, as an AdmissionReview answer."""

from __future__ import annotations

import base64
import io
from typing import Any

import orjson
from starlette.testclient import TestClient

from tests.serve.test_admission import make_state
from tests.support.reviews import pod, review
from webhook.serve.decisionlog import DecisionLog
from webhook.serve.server import create_app


def mutate(body: Any) -> Any:
    client = TestClient(create_app(make_state(), decision_log=DecisionLog(io.BytesIO())))
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return client.post("/mutate", content=raw, headers={"content-type": "application/json"})


def test_a_container_asking_for_no_gpu_gets_void() -> None:
    r = review(pod())
    out = mutate(r).json()
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    body = out["response"]
    assert body["uid"] == r["request"]["uid"] and body["allowed"] is True
    assert body["patchType"] == "JSONPatch"
    assert orjson.loads(base64.b64decode(body["patch"])) == [
        {
            "op": "add",
            "path": "/spec/containers/0/env",
            "value": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}],
        }
    ]


def test_a_gpu_pod_and_other_requests_are_allowed_unchanged() -> None:
    for r in (
        review(pod(limits={"nvidia.com/gpu": 1})),
        review(pod(), operation="UPDATE", old=pod()),
        review(None, operation="DELETE", old=pod()),
        review({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}),
    ):
        body = mutate(r).json()["response"]
        assert body == {"uid": r["request"]["uid"], "allowed": True}


def test_a_bad_body_is_a_400_that_says_why() -> None:
    resp = mutate(b"{")
    assert resp.status_code == 400 and "not valid JSON" in resp.json()["error"]
    resp = mutate({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})
    assert resp.status_code == 400 and "request must be an object" in resp.json()["error"]
