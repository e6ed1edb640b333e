"""commands.audit: evaluation as if created, folding under the top owner, counts, exit codes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.auditobjects import (
    GPU_LABELS,
    cronjob,
    deployment,
    deployment_family,
    job,
    pod,
    replicaset,
)
from tests.support.builders import POLICIES, RAISE_LABEL, with_broken_check
from webhook.commands.audit import Auditor, AuditReport, ObjectRef
from webhook.core.supply.inventory import Inventory
from webhook.sources.policy_files import load_policy_dir

PRIVILEGED = ("gpu-device-injection", "privileged")
NO_NODES = Inventory.unknown()


def audit(objects: list[dict[str, Any]]) -> AuditReport:
    auditor = Auditor(load_policy_dir(POLICIES), Inventory.unknown())
    for obj in objects:
        auditor.add(obj, location="")
    return auditor.report()


def rows(report: AuditReport) -> list[tuple[str, str, str, int]]:
    return [(str(e.resource), e.finding.policy, e.finding.rule, e.pods) for e in report.entries]


def test_pods_fold_under_the_deployment_with_their_count() -> None:
    report = audit(deployment_family("trainer", pods=3, privileged=True))

    assert rows(report) == [("Deployment team-a/trainer", *PRIVILEGED, 3)]
    entry = report.entries[0]
    assert entry.finding.path[:2] == ("spec", "template")  # the owner's own finding is kept
    assert report.pods_affected == {entry.resource: 3}
    assert report.evaluated == 5


def test_order_does_not_matter_pods_before_their_owners() -> None:
    family = deployment_family("trainer", pods=2, privileged=True)

    assert rows(audit(family[::-1])) == rows(audit(family))


def test_job_pods_fold_under_the_cronjob() -> None:
    objects = [
        pod("nightly-1-x", owner=("Job", "nightly-1", "uid-job-nightly-1"), privileged=True),
        job("nightly-1", "nightly", privileged=True),
        cronjob("nightly", privileged=True),
    ]

    assert rows(audit(objects)) == [("CronJob team-a/nightly", *PRIVILEGED, 1)]


def test_a_pod_whose_owner_is_not_in_the_audit_is_reported_as_itself() -> None:
    lone = pod("web-1", owner=("ReplicaSet", "web-abc", "uid-rs-missing"), privileged=True)

    assert rows(audit([lone])) == [("Pod team-a/web-1", *PRIVILEGED, 0)]


def test_a_pod_finding_the_template_lacks_is_added_under_the_owner() -> None:
    # An old ReplicaSet's Pods still run a spec the Deployment no longer has.
    objects = [
        deployment("api"),
        replicaset("api-old", "api", privileged=True),
        pod("api-old-1", owner=("ReplicaSet", "api-old", "uid-rs-api-old"), privileged=True),
        pod("api-old-2", owner=("ReplicaSet", "api-old", "uid-rs-api-old"), privileged=True),
    ]

    report = audit(objects)

    assert rows(report) == [("Deployment team-a/api", *PRIVILEGED, 2)]
    assert "spec.template.spec.containers[0]" in report.entries[0].finding.message


def test_identical_findings_are_stored_once() -> None:
    report = audit([pod(f"p{i}", privileged=True) for i in range(5)])

    assert len(report.entries) == 5
    assert len({id(e.finding.message) for e in report.entries}) == 1


def test_passed_counts_resources_not_folded_pods() -> None:
    objects = [
        *deployment_family("clean", pods=4),
        *deployment_family("bad", pods=2, privileged=True),
        pod("lone-clean"),
        pod("other-ns", namespace="team-b"),
    ]

    report = audit(objects)

    assert report.passed == {"team-a": 2, "team-b": 1}  # Deployment clean + lone-clean
    assert report.objects == 12


def test_skipped_objects_are_counted_by_reason() -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}
    excluded = pod("dcgm", namespace="kube-system", privileged=True)

    report = audit([service, excluded, {"kind": "Pod"}])

    assert report.entries == ()
    assert report.skipped == {
        "kind Service holds no pod spec": 1,
        "no policy matches Pod in namespace kube-system": 1,
        "without apiVersion/kind": 1,
    }


def test_a_pod_without_a_namespace_is_judged_and_reported_in_default() -> None:
    # As `check` and `kubectl apply` place it (core.subject); a Pod is never cluster-scoped.
    obj = pod("p", privileged=True)
    del obj["metadata"]["namespace"]

    report = audit([obj])

    assert report.entries[0].resource == ObjectRef("v1", "Pod", "default", "p", "uid-pod-team-a-p")
    assert str(report.entries[0].resource) == "Pod default/p"


def test_cluster_scoped_owners_have_no_namespace() -> None:
    # The kubelet's mirror Pod of a static Pod is owned by its Node.
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-0", "uid": "uid-n"}}
    mirror = pod("etcd-gpu-0", owner=("Node", "gpu-0", "uid-n"), privileged=True)

    report = audit([node, mirror])

    assert rows(report) == [("Node gpu-0", *PRIVILEGED, 1)]
    assert report.entries[0].resource.namespace == ""


def test_findings_are_the_same_as_at_admission() -> None:
    from webhook.core.engine.evaluation import Subject, evaluate

    obj = pod("gpu", gpus=1, labels={"gpu-admission.io/slo-class": "batch"})
    policies = load_policy_dir(POLICIES)
    expected = evaluate(policies, Subject(obj, "team-a"), Inventory.unknown()).findings

    assert tuple(e.finding for e in audit([obj]).entries) == expected


@pytest.mark.parametrize(
    ("objects", "fail_on", "code"),
    [
        ([pod("ok", gpus=1, labels=GPU_LABELS)], "deny", 0),
        ([pod("bad", privileged=True)], "deny", 1),
        ([pod("bad", privileged=True)], "warn", 1),
        ([pod("bad", privileged=True)], "never", 0),
    ],
)
def test_exit_code_follows_fail_on(objects: list[dict[str, Any]], fail_on: Any, code: int) -> None:
    assert audit(objects).exit_code(fail_on) == code


def test_errors_make_exit_code_2() -> None:
    auditor = Auditor(load_policy_dir(POLICIES), Inventory.unknown())
    auditor.errors.append("dump.json:3: invalid JSON")

    assert auditor.report().exit_code("never") == 2


def test_an_internal_error_on_one_object_is_reported_and_the_audit_goes_on() -> None:
    # A check that raises on one object (a bug) makes that object an error, not a pass.
    auditor = Auditor(with_broken_check(load_policy_dir(POLICIES)), NO_NODES)
    auditor.add(pod("boom", labels={RAISE_LABEL: ""}), location="dump.json:7")
    auditor.add(pod("next", privileged=True), location="dump.json:30")

    report = auditor.report()
    assert report.errors == (
        "dump.json:7: internal error while evaluating Pod team-a/boom: policy broken "
        "(check broken): KeyError: 'spec'",
    )
    assert rows(report) == [("Pod team-a/next", *PRIVILEGED, 0)]
    assert report.exit_code("never") == 2
