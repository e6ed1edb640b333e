"""webhook.reports.policyreport: reports per namespace, cluster-scoped ones, bounded in size."""

from __future__ import annotations

from typing import Any

import yaml

from webhook.commands.audit import AuditEntry, AuditReport, ObjectRef
from webhook.core.engine.evaluation import Finding
from webhook.reports import policyreport


def entry(namespace: str, name: str, *, action: Any = "deny", pods: int = 0) -> AuditEntry:
    ref = ObjectRef("v1", "Pod", namespace, name, f"uid-{name}")
    finding = Finding("gpu-device-injection", "privileged", action, f"{name} is privileged", ())
    return AuditEntry(ref, finding, "", pods)


def report(entries: list[AuditEntry], passed: dict[str, int] | None = None) -> AuditReport:
    return AuditReport(tuple(entries), len(entries), len(entries), {}, {}, passed or {}, {})


def test_cluster_scoped_objects_go_to_a_cluster_policy_report() -> None:
    docs = policyreport.policy_reports(report([entry("", "node-agent"), entry("a", "p")]),
                                       timestamp=1)  # fmt: skip

    assert [(d["kind"], d["metadata"].get("namespace")) for d in docs] == [
        ("PolicyReport", "a"),
        ("ClusterPolicyReport", None),
    ]
    assert "namespace" not in docs[1]["results"][0]["resources"][0]


def test_actions_map_to_results_and_severities() -> None:
    entries = [entry("a", "d"), entry("a", "w", action="warn"), entry("a", "r", action="dryrun")]

    (doc,) = policyreport.policy_reports(report(entries, {"a": 4}), timestamp=1700000000)

    got = [
        (r["result"], r["severity"], r["properties"]["enforcementAction"]) for r in doc["results"]
    ]
    assert got == [("fail", "high", "deny"), ("warn", "medium", "warn"), ("warn", "low", "dryrun")]
    assert doc["summary"] == {"pass": 4, "fail": 1, "warn": 2, "error": 0, "skip": 0}
    assert doc["results"][0]["timestamp"] == {"seconds": 1700000000, "nanos": 0}


def test_a_namespace_with_only_passes_gets_a_report() -> None:
    (doc,) = policyreport.policy_reports(report([], {"quiet": 3}), timestamp=1)

    assert doc["metadata"]["namespace"] == "quiet"
    assert doc["results"] == []
    assert doc["summary"]["pass"] == 3


def test_large_namespaces_are_split_never_truncated() -> None:
    entries = [entry("big", f"pod-{i:05d}") for i in range(2500)]

    docs = policyreport.policy_reports(report(entries, {"big": 7}), timestamp=1)

    assert [d["metadata"]["name"] for d in docs] == [
        "gpu-admission", "gpu-admission-2", "gpu-admission-3",
    ]  # fmt: skip
    assert sum(len(d["results"]) for d in docs) == 2500
    assert [d["summary"]["pass"] for d in docs] == [7, 0, 0]
    assert all(len(yaml.safe_dump(d)) < 1_500_000 for d in docs)


def test_reports_split_by_size_too() -> None:
    long = [entry("big", f"p{i}") for i in range(300)]
    long = [AuditEntry(e.resource, Finding("p", "r", "deny", "x" * 5000, ()), "", 0) for e in long]

    docs = policyreport.policy_reports(report(long), timestamp=1)

    assert len(docs) == 2
    assert all(len(yaml.safe_dump(d)) < 1_500_000 for d in docs)


def test_rendered_yaml_is_a_stream_of_documents() -> None:
    text = policyreport.render_policyreport(report([entry("a", "p", pods=3)]), timestamp=5)

    (doc,) = yaml.safe_load_all(text)
    assert text.startswith("---\napiVersion: wgpolicyk8s.io/v1alpha2\nkind: PolicyReport\n")
    assert doc["results"][0]["properties"]["podsAffected"] == "3"


def test_what_kubectl_would_read_as_another_type_is_quoted() -> None:
    # A Pod named `y` or `on` in namespace `no`: unquoted, kubectl (go-yaml v2) reads
    # true/false, and the PolicyReport would not apply.
    from webhook.reports import openreports
    from webhook.sources.yamlsource import iter_documents

    entries = [entry("no", "y"), entry("no", "on")]
    for render in (policyreport.render_policyreport, openreports.render_openreports):
        text = render(report(entries), timestamp=5)
        (doc,) = [d.data for d in iter_documents(text, source="report")]
        assert doc["metadata"]["namespace"] == "no"
        assert [r["resources"][0]["name"] for r in doc["results"]] == ["y", "on"]
