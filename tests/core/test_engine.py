"""The engine: which policies match a subject, and what their findings become."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.builders import (
    POLICIES,
    cluster,
    container,
    gpu,
    pod,
    rules,
    run,
    shipped,
    template_of,
)
from tests.support.paths import ROOT
from webhook.checks import registry
from webhook.core.engine.evaluation import Staleness, Subject, evaluate
from webhook.core.engine.policy import PolicySet
from webhook.core.supply.inventory import Inventory
from webhook.sources.policy_files import load_policy_files

PRIVILEGED = pod(container("x", securityContext={"privileged": True}))


def policy(name: str, *, action: str = "deny", match: str = "{}", prefix: str = "") -> str:
    return (
        "---\napiVersion: gpu-admission.io/v1alpha1\nkind: GPUPolicy\n"
        f"metadata: {{name: {name}}}\nspec:\n  enforcementAction: {action}\n"
        f"  check: device-injection\n  match: {match}\n  messagePrefix: {prefix!r}\n"
    )


def policy_set(tmp_path: Path, *docs: str) -> PolicySet:
    path = tmp_path / "policies.yaml"
    path.write_text("".join(docs))
    return load_policy_files([path, POLICIES / "workload-kinds.yaml"])


def deployment(pod_obj: dict[str, Any], **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "labels": labels},
        "spec": {"template": template_of(pod_obj)},
    }


@pytest.mark.parametrize(
    ("match", "kind", "namespace", "matched"),
    [
        ("{}", "Pod", "default", True),
        ("{kinds: []}", "Deployment", "default", True),
        ("{kinds: [Pod]}", "Pod", "default", True),
        ("{kinds: [Pod]}", "Deployment", "default", False),
        ("{kinds: [Deployment, Pod]}", "Deployment", "default", True),
        ("{kinds: ['*']}", "Deployment", "default", True),
        ("{namespaces: [team-a]}", "Pod", "team-a", True),
        ("{namespaces: [team-a]}", "Pod", "team-b", False),
        ("{namespaces: ['team-*']}", "Pod", "team-b", True),
        ("{namespaces: ['team-?']}", "Pod", "team-bb", False),
        ("{namespaces: ['team-*', default]}", "Pod", "default", True),
        ("{excludedNamespaces: [kube-system]}", "Pod", "kube-system", False),
        ("{excludedNamespaces: ['kube-*']}", "Pod", "kube-public", False),
        ("{excludedNamespaces: ['kube-*']}", "Pod", "default", True),
        # An excluded namespace wins over an included one.
        (
            "{namespaces: ['team-*'], excludedNamespaces: [team-sandbox]}",
            "Pod",
            "team-sandbox",
            False,
        ),
    ],
)
def test_match_kinds_and_namespaces(
    tmp_path: Path, match: str, kind: str, namespace: str, matched: bool
) -> None:
    obj = PRIVILEGED if kind == "Pod" else deployment(PRIVILEGED)
    decision = evaluate(
        policy_set(tmp_path, policy("p", match=match)), Subject(obj, namespace), cluster()
    )
    if matched:
        assert (decision.evaluated, rules(decision)) == (True, ["privileged"])
    else:
        assert decision.skipped == f"no policy matches {kind} in namespace {namespace}"
        assert decision.findings == ()


@pytest.mark.parametrize(
    ("selector", "labels", "matched"),
    [
        ("{matchLabels: {team: ml}}", {"team": "ml"}, True),
        ("{matchLabels: {team: ml}}", {"team": "web"}, False),
        ("{matchLabels: {team: ml}}", {}, False),
        (
            "{matchExpressions: [{key: team, operator: In, values: [ml, research]}]}",
            {"team": "research"},
            True,
        ),
        ("{matchExpressions: [{key: team, operator: NotIn, values: [web]}]}", {}, True),
        (
            "{matchExpressions: [{key: team, operator: NotIn, values: [web]}]}",
            {"team": "web"},
            False,
        ),
        ("{matchExpressions: [{key: gpu, operator: Exists}]}", {"gpu": ""}, True),
        ("{matchExpressions: [{key: gpu, operator: DoesNotExist}]}", {"gpu": "yes"}, False),
        (
            "{matchLabels: {team: ml}, matchExpressions: [{key: tier, operator: Exists}]}",
            {"team": "ml"},
            False,
        ),
        ("{}", {}, True),
    ],
)
def test_label_selector_on_pod_labels(
    tmp_path: Path, selector: str, labels: dict[str, str], matched: bool
) -> None:
    policies = policy_set(tmp_path, policy("p", match=f"{{labelSelector: {selector}}}"))
    obj = pod(container("x", securityContext={"privileged": True}), labels=labels)
    decision = run(policies, obj)
    assert decision.evaluated  # the policy matches the kind; the selector picks pod specs
    assert rules(decision) == (["privileged"] if matched else [])


def test_label_selector_applies_per_template(tmp_path: Path) -> None:
    policies = policy_set(
        tmp_path, policy("p", match="{labelSelector: {matchLabels: {role: worker}}}")
    )
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j", "labels": {"role": "worker"}},  # the object's: ignored
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "template": template_of(
                        pod(PRIVILEGED["spec"]["containers"][0], labels={"role": "master"})
                    )
                },
                "Worker": {
                    "template": template_of(
                        pod(PRIVILEGED["spec"]["containers"][0], labels={"role": "worker"})
                    )
                },
            }
        },
    }
    decision = run(policies, job)
    assert decision.pod_specs == 2
    assert [f.path[:3] for f in decision.findings] == [("spec", "pytorchReplicaSpecs", "Worker")]


@pytest.mark.parametrize(("action", "denied"), [("deny", True), ("warn", False), ("dryrun", False)])
def test_enforcement_actions(tmp_path: Path, action: str, denied: bool) -> None:
    decision = run(policy_set(tmp_path, policy("p", action=action)), PRIVILEGED)
    assert [f.action for f in decision.findings] == [action]
    assert decision.denied is denied
    assert decision.by_action(action) == decision.findings  # type: ignore[arg-type]


def test_policies_keep_their_own_action_and_order(tmp_path: Path) -> None:
    docs = [policy("a-dry", action="dryrun"), policy("b-deny"), policy("c-warn", action="warn")]
    decision = run(policy_set(tmp_path, *docs), PRIVILEGED)
    assert [(f.policy, f.action) for f in decision.findings] == [
        ("a-dry", "dryrun"),
        ("b-deny", "deny"),
        ("c-warn", "warn"),
    ]
    assert decision.denied


def test_message_prefix(tmp_path: Path) -> None:
    docs = [policy("plain"), policy("prefixed", prefix="[team-ml, see go/gpu-policy] ")]
    plain, prefixed = run(policy_set(tmp_path, *docs), PRIVILEGED).findings
    assert prefixed.message == "[team-ml, see go/gpu-policy] " + plain.message
    assert plain.message.startswith('container "x" is privileged')


@pytest.mark.parametrize(
    ("obj", "skipped"),
    [
        (
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
            "kind Service holds no pod spec",
        ),
        ({"apiVersion": "v1", "kind": 7}, "kind (none) holds no pod spec"),
        ({}, "kind (none) holds no pod spec"),
        (
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role"},
            "kind Role holds no pod spec",
        ),
        (
            {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow"},
            "kind JobFlow (flow.volcano.sh/v1alpha1) is not a configured workload kind "
            "(WorkloadKinds)",
        ),
        (
            {"apiVersion": "inference.networking.x-k8s.io/v1alpha2", "kind": "InferenceModel"},
            "kind InferenceModel (inference.networking.x-k8s.io/v1alpha2) is not a configured "
            "workload kind (WorkloadKinds)",
        ),
    ],
)
def test_subjects_without_pods_are_skipped(obj: dict[str, Any], skipped: str) -> None:
    decision = run(shipped(), obj)
    assert (decision.skipped, decision.evaluated, decision.findings, decision.pod_specs) == (
        skipped,
        False,
        (),
        0,
    )


def test_a_clean_object_is_evaluated_without_findings() -> None:
    decision = run(shipped(), deployment(pod(gpu("nvidia.com/mig-1g.10gb"))), cluster())
    assert (decision.evaluated, decision.findings, decision.pod_specs) == (True, (), 1)


def test_exempt_namespaces_of_the_shipped_policies() -> None:
    for namespace in (
        "kube-system",
        "gpu-operator",
        "nvidia-gpu-operator",
        "nvidia-device-plugin",
        "node-feature-discovery",
        "openshift-nfd",
        "gpu-admission-system",
    ):
        decision = evaluate(shipped(), Subject(PRIVILEGED, namespace), cluster())
        assert decision.skipped == f"no policy matches Pod in namespace {namespace}"
    assert rules(evaluate(shipped(), Subject(PRIVILEGED, "gpu-operator-x"), cluster())) == [
        "privileged"
    ]


# Fails memory-fit against the inventory (12 GiB on a 9856 MiB slice) and slo-class
# without it (no class label): one inventory rule and one that is not.
TOO_BIG = pod(gpu("nvidia.com/mig-1g.10gb"), labels={"gpu-admission.io/peak-memory": "12Gi"})
SUFFIX = " (node inventory is {age}s old, over the 300s limit: reported as {action})"


@pytest.mark.parametrize(
    ("stale_action", "expected"),
    [
        ("warn", [("exceeds-device-memory", "warn", "warn"), ("missing-slo-class", "deny", None)]),
        ("deny", [("exceeds-device-memory", "deny", "deny"), ("missing-slo-class", "deny", None)]),
        ("allow", [("missing-slo-class", "deny", None)]),
    ],
)
def test_stale_inventory(stale_action: str, expected: list[tuple[str, str, str | None]]) -> None:
    fresh = evaluate(shipped(), Subject(TOO_BIG), cluster())
    assert [(f.rule, f.action) for f in fresh.findings] == [
        ("exceeds-device-memory", "deny"),
        ("missing-slo-class", "deny"),
    ]
    base = {f.rule: f.message for f in fresh.findings}
    stale = Staleness(age_seconds=912.4, max_age_seconds=300, action=stale_action)  # type: ignore[arg-type]
    decision = evaluate(shipped(), Subject(TOO_BIG), cluster(), stale=stale)
    assert [(f.rule, f.action) for f in decision.findings] == [(r, a) for r, a, _ in expected]
    for finding, (rule, _, reported) in zip(decision.findings, expected, strict=True):
        tail = "" if reported is None else SUFFIX.format(age=912, action=reported)
        assert finding.message == base[rule] + tail


def test_stale_inventory_never_escalates_a_warn_policy(tmp_path: Path) -> None:
    text = (
        (POLICIES / "gpu-memory-fit.yaml")
        .read_text()
        .replace("enforcementAction: deny", "enforcementAction: warn")
    )
    path = tmp_path / "fit.yaml"
    path.write_text(text)
    policies = load_policy_files([path])
    stale = Staleness(age_seconds=600, max_age_seconds=300, action="deny")
    (finding,) = evaluate(policies, Subject(TOO_BIG), cluster(), stale=stale).findings
    assert (finding.rule, finding.action) == ("exceeds-device-memory", "warn")
    assert finding.message.endswith(
        "(node inventory is 600s old, over the 300s limit: reported as warn)"
    )


def test_the_checks_say_which_rules_rest_on_the_inventory() -> None:
    # The engine has no list of its own: what follows --stale-inventory is what each
    # check declares (Rule.uses_inventory), so a renamed rule cannot escape it.
    assert {
        (name, rule) for name, check in registry().items() for rule in sorted(check.inventory_rules)
    } == {
        ("distributed", "gang-never-fits"),
        ("resource-names", "unknown-resource"),
        ("resource-names", "insufficient-capacity"),
        ("resource-names", "no-candidate-node"),
        ("memory-fit", "exceeds-device-memory"),
        ("memory-fit", "unknown-device-memory"),
        ("slo-class", "sharing-mode-not-accepted"),
        ("queues", "mig-not-covered"),
        ("queues", "flavor-matches-no-node"),
        *(
            ("tenancy", rule)
            for rule in (
                "mig-profile-not-allowed",
                "product-not-allowed",
                "sharing-not-allowed",
                "too-much-gpu-memory-per-job",
                "too-much-gpu-memory-per-pod",
                "untrusted-on-shared-gpu",
            )
        ),
        *(
            ("dra-claims", rule)
            for rule in (
                "all-on-mixed-pool",
                "claims-exceed-node",
                "count-exceeds-node",
                "device-tainted",
                "memory-exceeds-device",
                "missing-claim-source",
                "selector-error",
                "selector-matches-nothing",
                "selector-unevaluable",
                "shared-device",
                "unknown-device-class",
            )
        ),
    }


def test_the_docs_describe_every_rule_and_the_inventory_rules() -> None:
    docs = (ROOT / "docs/policies.md").read_text()
    for check in registry().values():
        for rule in check.rules:
            assert f"\n| `{rule}` |" in docs, f"docs/policies.md has no row for {rule}"
    stale = docs[docs.index("**Stale inventory.**") :].split("\n\n")[0]
    listed = set(re.findall(r"`([a-z-]+)`", stale.split(").")[0]))
    assert listed == {rule for check in registry().values() for rule in check.inventory_rules}


def test_evaluation_is_pure() -> None:
    obj = deployment(TOO_BIG)
    snapshot = repr(obj)
    first = evaluate(shipped(), Subject(obj), cluster())
    assert evaluate(shipped(), Subject(obj), cluster()) == first
    assert repr(obj) == snapshot  # the subject is not modified
    assert evaluate(shipped(), Subject(obj), Inventory.unknown()) != first
