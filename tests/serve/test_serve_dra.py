"""DRA subjects through the real `gpu-admission serve` over TLS: the kinds and versions the
webhook configuration sends (resource.k8s.io claims and claim templates, Pods with
spec.resourceClaims) are judged against the DRA objects of its inventory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.support.paths import ROOT
from tests.support.reviews import review
from tests.support.servers import Server

DRA = ROOT / "examples/dra"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("serve-dra"), "--inventory", str(DRA / "cluster.yaml"))
    yield s
    s.stop()


def claim_review(obj: dict[str, Any], *, version: str) -> dict[str, Any]:
    """The request the apiserver sends for a resource.k8s.io object in `version`."""
    body = review(obj)
    kind = obj["kind"]
    body["request"]["kind"] = {"group": "resource.k8s.io", "version": version, "kind": kind}
    body["request"]["resource"] = {
        "group": "resource.k8s.io",
        "version": version,
        "resource": kind.lower() + "s",
    }
    return body


def load(name: str) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((DRA / name).read_text())
    return obj


def response(server: Server, body: dict[str, Any]) -> dict[str, Any]:
    resp = server.validate(body)
    assert resp.status_code == 200, resp.text
    out: dict[str, Any] = resp.json()["response"]
    assert out["uid"] == body["request"]["uid"]
    return out


# (example file, rule it must be denied by) for claim templates, as v1 sends them.
DENIED = [
    ("bad/unknown-device-class.yaml", "gpu-dra-claims/unknown-device-class"),
    ("bad/count-exceeds-node.yaml", "gpu-dra-claims/count-exceeds-node"),
    ("bad/selector-matches-nothing.yaml", "gpu-dra-claims/selector-matches-nothing"),
]


@pytest.mark.parametrize(("name", "rule"), DENIED, ids=[n for n, _ in DENIED])
def test_claim_templates_are_denied_over_https(server: Server, name: str, rule: str) -> None:
    obj = load(name)
    assert obj["kind"] in ("ResourceClaimTemplate", "ResourceClaim")
    out = response(server, claim_review(obj, version="v1"))
    assert out["allowed"] is False and f"[{rule}]" in out["status"]["message"], out


def test_unknown_class_message_is_the_one_check_prints(server: Server) -> None:
    out = response(server, claim_review(load("bad/unknown-device-class.yaml"), version="v1"))
    assert (
        'ResourceClaimTemplate "single-gpu" request "gpu" names DeviceClass "gpu.nvidia.co", '
        "which does not exist"
    ) in out["status"]["message"]


def test_a_v1beta1_claim_template_is_judged_like_v1(server: Server) -> None:
    """v1beta1 keeps deviceClassName and count on the request itself (no `exactly`)."""
    obj = load("bad/unknown-device-class.yaml")
    request = obj["spec"]["spec"]["devices"]["requests"][0]
    request.update(request.pop("exactly"))
    obj["apiVersion"] = "resource.k8s.io/v1beta1"
    out = response(server, claim_review(obj, version="v1beta1"))
    assert out["allowed"] is False
    assert "[gpu-dra-claims/unknown-device-class]" in out["status"]["message"]


def test_pod_with_a_template_of_the_cluster_is_allowed(server: Server) -> None:
    out = response(server, review(load("good/pod-with-template.yaml")))
    assert out["allowed"] is True, out


def test_pod_naming_a_template_nowhere_is_warned(server: Server) -> None:
    obj = load("good/pod-with-template.yaml")
    obj["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "no-such-template"
    out = response(server, review(obj))
    assert out["allowed"] is True
    assert any("no-such-template" in w for w in out.get("warnings", [])), out
