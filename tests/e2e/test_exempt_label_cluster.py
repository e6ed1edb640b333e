"""Exemption by a label only the platform may set, on a real kube-apiserver.

The chart's `webhook.exemptLabel` puts the label into every entry's namespaceSelector
and ships a ValidatingAdmissionPolicy that refuses a Namespace CREATE or UPDATE setting
or changing it unless the user is in `adminGroups`. Rendered by helm from the chart and
applied to a kubecluster; a tenant (impersonated, with RBAC to create and label
namespaces) tries to take the exemption.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from tests.support.kubeclusters import NEWEST, Clusters, kubeclusters, on  # noqa: F401
from tests.support.paths import ROOT

TENANT = ("--as", "alice", "--as-group", "tenants")
KEY = "gpu-admission.io/exempt"
RBAC = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: namespace-maker}
rules:
  - apiGroups: [""]
    resources: [namespaces]
    verbs: [create, update, patch, get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: tenants-make-namespaces}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: namespace-maker}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: tenants}]
"""


def rendered(*sets: str) -> list[dict[str, Any]]:
    from tests.e2e.test_chart import render

    return [d for d in render(*sets) if d]


@on(NEWEST)
def test_only_the_platform_may_exempt_a_namespace(kubeclusters: Clusters) -> None:  # noqa: F811
    cluster = kubeclusters.get(NEWEST)
    docs = rendered("--set", "webhook.exemptLabel.enabled=true")
    guard = [d for d in docs if str(d["kind"]).startswith("ValidatingAdmissionPolicy")]
    assert [d["kind"] for d in guard] == [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    [vwc] = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
    for entry in vwc["webhooks"]:  # type: ignore[attr-defined]
        expressions = entry["namespaceSelector"]["matchExpressions"]
        assert {"key": KEY, "operator": "NotIn", "values": ["true"]} in expressions
    cluster.kubectl("apply", "-f", "-", stdin=RBAC + "---\n" + yaml.safe_dump_all(guard))

    def tenant(*args: str) -> tuple[int, str]:
        run = cluster.kubectl(*TENANT, *args, check=False)
        return run.returncode, run.stderr

    # kubectl create namespace has no --labels: create from a manifest.
    labelled = {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "gpu-operator", "labels": {KEY: "true"}}}  # fmt: skip
    # The policy is compiled and bound asynchronously: try (server dry run) until it refuses.
    deadline = time.monotonic() + 30
    while True:
        run = cluster.kubectl(*TENANT, "create", "--dry-run=server", "-f", "-",
                              stdin=yaml.safe_dump(labelled), check=False)  # fmt: skip
        if run.returncode != 0 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    run = cluster.kubectl(*TENANT, "create", "-f", "-", stdin=yaml.safe_dump(labelled), check=False)
    assert run.returncode != 0
    assert f"only members of system:masters may set the label {KEY}" in run.stderr
    assert "alice" in run.stderr
    # A namespace without the label, and then the label added by UPDATE: refused too.
    code, err = tenant("create", "namespace", "tenant-plain")
    assert code == 0, err
    code, err = tenant("label", "namespace", "tenant-plain", f"{KEY}=true")
    assert code != 0 and "only members of system:masters" in err
    code, err = tenant("label", "namespace", "tenant-plain", "team=a")  # other labels: fine
    assert code == 0, err
    # The platform (the admin is in system:masters) may.
    cluster.kubectl("label", "namespace", "tenant-plain", f"{KEY}=true")
    labels = cluster.core.read_namespace("tenant-plain").metadata.labels
    assert labels[KEY] == "true"
    # Removing it puts the namespace back under the policies: anyone who may update it.
    code, err = tenant("label", "namespace", "tenant-plain", f"{KEY}-")
    assert code == 0, err


def test_the_chart_ships_no_guard_unless_asked() -> None:
    docs = rendered()
    assert not [d for d in docs if str(d["kind"]).startswith("ValidatingAdmissionPolicy")]
    [vwc] = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
    for entry in vwc["webhooks"]:  # type: ignore[attr-defined]
        keys = [e["key"] for e in entry["namespaceSelector"]["matchExpressions"]]
        assert keys == ["kubernetes.io/metadata.name"]
    assert (ROOT / "charts/gpu-admission/templates/exemptlabel.yaml").exists()


def test_the_kustomize_component_matches_the_chart(tmp_path: Path) -> None:
    overlay = tmp_path / "manifests/overlays/exempt"
    overlay.mkdir(parents=True)
    for part in ("base", "components"):
        (tmp_path / "manifests" / part).symlink_to(ROOT / "manifests" / part)
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources: [../../base]\ncomponents: [../../components/exempt-label]\n"
    )
    run = subprocess.run(["kubectl", "kustomize", str(overlay)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    kustomized = [d for d in yaml.safe_load_all(run.stdout) if d]
    charted = rendered("--set", "webhook.exemptLabel.enabled=true")

    def specs(docs: list[dict[str, Any]], kind: str) -> list[Any]:
        return [d["spec"] for d in docs if d["kind"] == kind]

    assert specs(kustomized, "ValidatingAdmissionPolicy") == specs(
        charted, "ValidatingAdmissionPolicy"
    )
    [base] = [d for d in kustomized if d["kind"] == "ValidatingWebhookConfiguration"]
    for entry in base["webhooks"]:
        expressions = entry["namespaceSelector"]["matchExpressions"]
        assert expressions[-1] == {"key": KEY, "operator": "NotIn", "values": ["true"]}
