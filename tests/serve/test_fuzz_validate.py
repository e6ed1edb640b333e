"""Property-based fuzzing of /validate: no input gives a 500 or stops the app.

Two generators: arbitrary JSON (mostly not AdmissionReviews: must be 400), and
AdmissionReviews whose object is arbitrary JSON shaped loosely like a Pod (must be 200:
the engine has to cope with any object the apiserver could hand it).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from tests.support.paths import ROOT
from tests.support.reviews import review
from tests.support.servers import Server
from webhook.serve.decisionlog import DecisionLog
from webhook.serve.server import create_app
from webhook.serve.state import Settings, State

STATE = State.start(Settings(str(ROOT / "policies"), str(ROOT / "examples/cluster/nodes.json")))
CLIENT = TestClient(create_app(STATE, decision_log=DecisionLog(io.BytesIO())))

KEYS = st.sampled_from(
    [
        "spec",
        "containers",
        "initContainers",
        "ephemeralContainers",
        "volumes",
        "hostPath",
        "path",
        "env",
        "name",
        "value",
        "valueFrom",
        "resources",
        "limits",
        "requests",
        "nvidia.com/gpu",
        "nvidia.com/mig-1g.10gb",
        "metadata",
        "labels",
        "annotations",
        "gpu-admission.io/peak-memory",
        "gpu-admission.io/slo-class",
        "securityContext",
        "privileged",
        "volumeMounts",
        "mountPath",
        "nodeSelector",
        "affinity",
        "tolerations",
        "template",
        "jobTemplate",
        "restartPolicy",
        "key",
        "operator",
        "values",
        "effect",
    ]
) | st.text(max_size=8)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(
        ["1", "0.5", "12Gi", "/dev/nvidia0", "all", "Always", "Exists", "In", "//dev/./dri/"]
    )
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=30,
)
KINDS = st.sampled_from(
    ["Pod", "Deployment", "CronJob", "Job", "PodTemplate", "PyTorchJob", "RayCluster", "ConfigMap"]
)
API_VERSIONS = {
    "Pod": "v1",
    "Deployment": "apps/v1",
    "CronJob": "batch/v1",
    "Job": "batch/v1",
    "PodTemplate": "v1",
    "PyTorchJob": "kubeflow.org/v1",
    "RayCluster": "ray.io/v1",
    "ConfigMap": "v1",
}


def dumps(value: Any) -> bytes:
    # The stdlib, not orjson: it writes integers of any size, as an apiserver could.
    return json.dumps(value).encode()


def post(body: bytes) -> int:
    resp = CLIENT.post("/validate", content=body, headers={"content-type": "application/json"})
    if resp.status_code == 200:
        assert resp.json()["response"]["uid"]
    return resp.status_code


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON)
def test_arbitrary_json_is_never_a_500(body: Any) -> None:
    assert post(dumps(body)) in (200, 400)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_never_a_500(body: bytes) -> None:
    assert post(body) in (200, 400)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=KINDS,
    spec=JSON,
    metadata=JSON,
    operation=st.sampled_from(["CREATE", "UPDATE"]),
    sub=st.sampled_from(["", "ephemeralcontainers"]),
    old=st.none() | JSON,
)
def test_any_object_in_a_valid_review_is_judged(
    kind: str, spec: Any, metadata: Any, operation: str, sub: str, old: Any
) -> None:
    obj = {"apiVersion": API_VERSIONS[kind], "kind": kind, "metadata": metadata, "spec": spec}
    old_obj = {"apiVersion": API_VERSIONS[kind], "kind": kind, "spec": old} if old else None
    r = review(obj, operation=operation, old=old_obj, sub_resource=sub or None)
    assert post(dumps(r)) == 200


def test_the_app_still_answers_after_fuzzing() -> None:
    assert CLIENT.get("/healthz").status_code == 200


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = Server(tmp_path_factory.mktemp("fuzz"))
    yield server
    server.stop()


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=JSON | st.binary(max_size=100), kind=KINDS, spec=JSON)
def test_the_real_server_survives_fuzzing(live: Server, body: Any, kind: str, spec: Any) -> None:
    raw = body if isinstance(body, bytes) else dumps(body)
    assert live.client.post(live.url + "/validate", content=raw).status_code in (200, 400)
    obj = {"apiVersion": API_VERSIONS[kind], "kind": kind, "metadata": {}, "spec": spec}
    assert live.client.post(live.url + "/validate", content=dumps(review(obj))).status_code == 200
    assert live.proc.poll() is None
