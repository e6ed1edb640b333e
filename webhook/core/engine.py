"""The one evaluation every shell calls: policies x subject x inventory -> Decision.

Pure: no I/O, no clock. The webhook, `check`, `audit` and `test` differ only in where
the subject comes from and where the Decision goes, so a finding reads the same in a
PR, an audit and an admission response.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from webhook.core.inventory import Inventory
from webhook.core.paths import Path
from webhook.core.policy import Action, PolicySet
from webhook.core.text import clip
from webhook.core.workloads import api_group, pod_views

StaleAction = Literal["deny", "warn", "allow"]
# Checks whose verdict rests on the node inventory; when it is too old these follow the
# server's stale-inventory setting instead of their own action.
INVENTORY_RULES = frozenset(
    {
        "unknown-resource",
        "insufficient-capacity",
        "no-candidate-node",
        "exceeds-device-memory",
        "unknown-device-memory",
        "sharing-mode-not-accepted",
    }
)


# Subject, Finding and Decision are NamedTuples rather than frozen dataclasses: every
# admission request makes some, and a tuple is several times cheaper to build.
class Subject(NamedTuple):
    """One object to judge, with the facts of its request."""

    obj: Mapping[str, Any]
    namespace: str = "default"
    operation: str = "CREATE"

    @property
    def kind(self) -> str:
        kind = self.obj.get("kind")
        return kind if isinstance(kind, str) else ""


class Finding(NamedTuple):
    policy: str
    rule: str
    action: Action
    message: str
    path: Path


@dataclass(frozen=True, slots=True)
class Staleness:
    """The inventory is older than allowed: inventory-based findings follow `action`."""

    age_seconds: float
    max_age_seconds: float
    action: StaleAction = "warn"


class Decision(NamedTuple):
    findings: tuple[Finding, ...] = ()
    skipped: str | None = None  # why nothing was judged: no pod spec, no matching policy
    pod_specs: int = 0

    @property
    def evaluated(self) -> bool:
        return self.skipped is None

    @property
    def denied(self) -> bool:
        return any(f.action == "deny" for f in self.findings)

    def by_action(self, action: Action) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.action == action)


def evaluate(
    policy_set: PolicySet, subject: Subject, inventory: Inventory, *, stale: Staleness | None = None
) -> Decision:
    kind, namespace = subject.kind, subject.namespace
    pods = pod_views(subject.obj, custom=policy_set.custom_kinds)
    if pods is None:
        return Decision(skipped=_not_a_workload(subject.obj, kind))
    findings: list[Finding] = []
    matched = False
    for policy in policy_set.policies:
        if not policy.matches_object(kind, namespace):
            continue
        matched = True
        selector = policy.match.labelSelector
        for pod in pods:
            if selector is not None and not selector.matches(pod.labels):
                continue
            for v in policy.check.run(pod, inventory, policy.params):
                message = policy.message_prefix + v.message if policy.message_prefix else v.message
                message = clip(message)  # bounded whatever a check embedded
                action = "warn" if v.advisory and policy.action == "deny" else policy.action
                finding = Finding(policy.name, v.rule, action, message, v.path)
                if stale is not None and v.rule in INVENTORY_RULES:
                    downgraded = _as_stale(finding, stale)
                    if downgraded is None:
                        continue
                    finding = downgraded
                findings.append(finding)
    if not matched:
        return Decision(skipped=f"no policy matches {kind} in namespace {namespace}")
    return Decision(tuple(findings), pod_specs=len(pods))


def _as_stale(finding: Finding, stale: Staleness) -> Finding | None:
    """An inventory-based finding on an inventory too old to trust: `stale.action` rules."""
    if stale.action == "allow":
        return None
    action = "warn" if finding.action == "deny" and stale.action == "warn" else finding.action
    note = (
        f" (node inventory is {stale.age_seconds:.0f}s old, over the "
        f"{stale.max_age_seconds:.0f}s limit: reported as {action})"
    )
    return finding._replace(action=action, message=finding.message + note)


def _not_a_workload(obj: Mapping[str, Any], kind: str) -> str:
    api_version = obj.get("apiVersion")
    group = api_group(api_version)
    # Kubernetes' own groups have no dot (apps, policy) or end in .k8s.io; SIG projects'
    # custom resources (jobset.x-k8s.io) and everyone else's have a domain of their own.
    builtin = "." not in group or (group.endswith(".k8s.io") and not group.endswith("x-k8s.io"))
    if not builtin:
        # A custom resource: say how to teach us where its pod templates are.
        return f"kind {kind} ({api_version}) is not a configured workload kind (WorkloadKinds)"
    return f"kind {kind or '(none)'} holds no pod spec"
