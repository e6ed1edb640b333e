"""The one evaluation every shell calls: policies x subject x inventory -> Decision.

Pure: no I/O, no clock. The webhook, `check`, `audit`, `diff` and `test` differ only in
where the object comes from (each builds its Subject with `subject.subject_of`) and where
the Decision goes, so a finding reads the same in a PR, an audit and an admission
response. `evaluate` never raises for what the object holds: a Decision says whether it
was judged (its findings), skipped (why), could not be read as it is (`invalid`: too
large to judge) or met a fault of ours (`error`), and `problem` words the last two the
same way for every shell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, get_args

from webhook.core.engine.context import Context
from webhook.core.engine.policy import Action, Policy, PolicySet
from webhook.core.engine.subject import Subject as Subject  # re-exported: the engine's input
from webhook.core.kit.dicts import api_group
from webhook.core.kit.paths import Path
from webhook.core.kit.text import clip
from webhook.core.supply.gpu_placement import plain_node_names
from webhook.core.supply.inventory import Inventory
from webhook.core.workloads.targets import NamespaceView, Target, Targets, targets_of
from webhook.core.workloads.unjudged import shape_findings, unconfigured
from webhook.errors import GpuAdmissionError, UnreadableObject

StaleAction = Literal["deny", "warn", "allow"]
# The closed set every shell renders: what admission does (allow, warn, deny), that no
# policy judged the object (skip), that a check failed on it (error: never an allow;
# exit 2 in the CLIs, HTTP 500 at the webhook so its failurePolicy decides), or that the
# object cannot be judged as it is (invalid: exit 2, HTTP 400).
Outcome = Literal["allow", "warn", "deny", "skip", "error", "invalid"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
ERROR_TEXT_LIMIT = 200  # characters of an exception's text kept in Decision.error
_NO_RULES: frozenset[str] = frozenset()
_PODS = ("pod",)
_NONE: frozenset[str] = frozenset()


# Finding and Decision are NamedTuples rather than frozen dataclasses: every admission
# request makes some, and a tuple is several times cheaper to build.
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
    # A check raised: which policy and what (bounded). `findings` holds the other
    # policies' findings; the outcome is "error" whatever they are.
    error: str | None = None
    # The object cannot be judged as it is (more pod templates than are judged): the
    # request's fault, not ours; nothing else is said of it.
    invalid: str | None = None

    @property
    def outcome(self) -> Outcome:
        """Invalid beats error beats skip beats deny beats warn; dryrun findings allow."""
        if self.invalid is not None:
            return "invalid"
        if self.error is not None:
            return "error"
        if self.skipped is not None:
            return "skip"
        if not self.findings:  # nearly every request: no set to build
            return "allow"
        actions = {f.action for f in self.findings}
        return "deny" if "deny" in actions else "warn" if "warn" in actions else "allow"

    @property
    def evaluated(self) -> bool:
        return self.skipped is None and self.invalid is None and self.error is None

    @property
    def denied(self) -> bool:
        return any(f.action == "deny" for f in self.findings)

    def by_action(self, action: Action) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.action == action)


def problem(decision: Decision, subject: Subject) -> str | None:
    """Why the object was not judged, naming it, in the words every shell uses: invalid
    input (exit 2, HTTP 400) or a fault of ours (exit 2, HTTP 500); None when judged or
    skipped. The shell puts where it found the object in front."""
    if decision.invalid is None and decision.error is None:
        return None
    ref = f"{subject.kind or '(no kind)'} {subject.namespace}/{subject.name or '(unnamed)'}"
    if decision.invalid is not None:
        return f"{ref} not judged: {decision.invalid}"
    return f"internal error while evaluating {ref}: {decision.error}"


def evaluate(
    policy_set: PolicySet,
    subject: Subject,
    inventory: Inventory,
    *,
    stale: Staleness | None = None,
    prefilter: bool = False,
) -> Decision:
    """Every matching policy's findings on every target of the subject it judges.

    A check that raises makes the outcome "error" (the other policies still report),
    never an allow; an object too large to judge is "invalid".

    `prefilter=True`: a pod without any field a loaded check reads gets its Decision
    without building its targets (webhook.core.engine.prefilter): the same Decision, for
    ~1 us instead of ~25. The shells that see every object of a repository or a cluster
    (check, audit, diff) ask for it; the webhook does not, since its matchConditions send
    it only objects that hold a GPU channel, where the filter would be one more walk."""
    obj = subject.obj
    plain = policy_set.prefilter if prefilter else None
    if plain is not None and type(obj) is dict:
        pods = plain.plain_pods(obj, plain_node_names(inventory) if plain.placement else _NONE)
        if pods is not None:
            return _plain(policy_set, subject, pods)
    kind = subject.kind
    profile = policy_set.profile
    try:
        targets = targets_of(
            obj,
            custom=policy_set.custom_kinds,
            tolerations_added=profile.extended_resource_toleration,
            workload=policy_set.judges_workloads,
        )
        if targets is None:
            return _unconfigured(policy_set, subject)
        if targets.namespace is not None and not _read_namespace(policy_set, targets.namespace):
            return Decision(skipped="Namespace carries no label a policy reads")
        findings = _unmatched(obj, targets) if targets.unmatched else []
    except GpuAdmissionError as exc:  # the object is the problem (too large to judge)
        return Decision(invalid=str(exc))
    except Exception as exc:  # a bug in reading pod specs: could not evaluate
        return Decision(error=f"reading the pod specs of {kind or '(no kind)'}: {_text(exc)}")
    # The offers as the cluster profile reads the nodes (the same snapshot when the
    # shell built it so, as serve and check do).
    context = Context.of(subject, inventory.reading(profile.node_facts), profile)
    errors: list[str] = []
    matched = False
    namespace = subject.namespace
    # A custom kind's pod views with items its podFields joined: findings name the real
    # field (webhook.core.workloads.podfields). No Pod and no core controller has any.
    merged = (
        targets.workload is not None
        and targets.workload.shape is not None
        and any(p.aliases is not None for p in targets.pods)
    )
    # The policies whose checks judge a kind of target the object makes, and take it.
    for policy, kinds in policy_set.judging[targets.kinds]:
        if not policy.matches_object(kind, namespace):
            continue
        matched = True
        start = len(findings)
        try:
            judged = targets.pods if kinds == _PODS else targets.among(kinds)
            _run_policy(policy, judged, context, stale, findings, merged=merged)
        except UnreadableObject as exc:  # the request's fault: nothing else is said of it
            return Decision(invalid=str(exc))
        except Exception as exc:  # one broken check must not silence the others
            del findings[start:]  # a partial run says nothing reliable
            errors.append(f"policy {policy.name} (check {policy.check.name}): {_text(exc)}")
    if not matched and not findings:
        return Decision(skipped=f"no policy matches {kind} in namespace {namespace}")
    error = "; ".join(errors) if errors else None
    return Decision(tuple(findings), None, len(targets.pods), error)


def _read_namespace(policy_set: PolicySet, namespace: NamespaceView) -> bool:
    """A Namespace carries a label some check that judges Namespaces reads."""
    reads = policy_set.reads.get("namespace")
    if reads is None or reads.every_field:
        return True
    return not reads.labels.isdisjoint(namespace.labels)


def _plain(policy_set: PolicySet, subject: Subject, pods: int) -> Decision:
    """The decision on a pod the pre-filter passed: judged with nothing found when some
    policy that judges pods takes its kind and namespace, else skipped."""
    kind, namespace = subject.kind, subject.namespace
    skipped = policy_set.plain_skip(kind, namespace)
    if skipped is None:
        return Decision((), None, pods)
    return Decision(skipped=skipped)


def _unmatched(obj: Mapping[str, Any], targets: Targets) -> list[Finding]:
    """A WorkloadKinds path that matched nothing: the pods it names go unjudged."""
    missing = targets.unmatched
    if not missing:
        return []
    actions = {id(shape): rule.unmatched_action for rule, shape in missing}
    return [
        Finding(u.policy, u.rule, actions[id(shape)], clip(u.message), u.path)
        for u, (_, shape) in zip(shape_findings(obj, tuple(missing)), missing, strict=True)
    ]


def _unconfigured(policy_set: PolicySet, subject: Subject) -> Decision:
    """Not a workload kind we know: skipped, unless it is a custom resource that
    requests GPUs somewhere (then a finding: its pods would pass unjudged)."""
    obj, kind = subject.obj, subject.kind
    skipped = _not_a_workload(obj, kind)
    action = policy_set.unconfigured_gpu_action
    if action == "ignore" or not skipped.endswith("(WorkloadKinds)"):
        return Decision(skipped=skipped)
    found = unconfigured(obj, kind=kind, group=api_group(obj.get("apiVersion")))
    if found is None:
        return Decision(skipped=skipped)
    finding = Finding(found.policy, found.rule, action, clip(found.message), found.path)
    return Decision((finding,), None, 0)


def _run_policy(
    policy: Policy,
    targets: Sequence[Target],
    context: Context,
    stale: Staleness | None,
    findings: list[Finding],
    *,
    merged: bool = False,
) -> None:
    selector = policy.match.labelSelector
    prefix = policy.message_prefix
    stale_rules = policy.check.inventory_rules if stale is not None else _NO_RULES
    run, params = policy.check.run, policy.params
    for target in targets:
        if selector is not None and not selector.matches(target.labels):
            continue
        aliases = getattr(target, "aliases", None) if merged else None
        for v in run(target, context=context, params=params):
            if aliases is not None:
                v = aliases.restore(v)
            action = "warn" if v.advisory and policy.action == "deny" else policy.action
            message = clip(prefix + v.message if prefix else v.message)  # whatever it embeds
            finding = Finding(policy.name, v.rule, action, message, v.path)
            if v.rule in stale_rules:
                assert stale is not None
                downgraded = _as_stale(finding, stale)
                if downgraded is None:
                    continue
                finding = downgraded
            findings.append(finding)


def _text(exc: Exception) -> str:
    """`TypeError: message`, cut to a bounded length: a check's exception may quote input."""
    text = str(exc)
    if len(text) > ERROR_TEXT_LIMIT:
        text = text[: ERROR_TEXT_LIMIT - 3] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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
