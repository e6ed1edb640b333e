"""`diff`: what a policy change does to a corpus of manifests or an audit dump.

Every object is evaluated under the base and the head policy set with the same
inventory; an object becomes denied, becomes allowed (no longer denied), or keeps its
outcome with different findings (a message, rule or action changed). A pull request
that changes policies shows, in review, what it would break.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from webhook.core.engine.evaluation import Decision, Finding, Outcome, evaluate, problem
from webhook.core.engine.policy import PolicySet
from webhook.core.engine.subject import subject_of
from webhook.core.kit.paths import format_path
from webhook.core.supply.inventory import Inventory
from webhook.sources.dumps import Sourced

Change = Literal["became-denied", "became-allowed", "changed"]


class EvaluationFailed(Exception):
    """The object was not judged under one of the two policy sets: it cannot be judged
    as it is (too large), or a check raised on it. Either is exit 2, never "unchanged"."""


def outcome(decision: Decision) -> Outcome:
    """The core's outcome: error, skip (no policy of the set judged it), deny, warn, allow."""
    return decision.outcome


@dataclass(frozen=True, slots=True)
class ObjectDiff:
    location: str
    api_version: str
    kind: str
    namespace: str
    name: str
    change: Change
    before: Outcome
    after: Outcome
    removed: tuple[Finding, ...]
    added: tuple[Finding, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "location": self.location,
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "change": self.change,
            "before": self.before,
            "after": self.after,
            "removed": [_finding_json(f) for f in self.removed],
            "added": [_finding_json(f) for f in self.added],
        }


@dataclass
class DiffReport:
    diffs: list[ObjectDiff] = field(default_factory=list)
    objects: int = 0
    evaluated: int = 0
    errors: list[str] = field(default_factory=list)

    def of(self, change: Change) -> list[ObjectDiff]:
        return [d for d in self.diffs if d.change == change]

    @property
    def exit_code(self) -> int:
        if self.errors:
            return 2
        return 1 if self.of("became-denied") else 0

    def summary(self) -> dict[str, int]:
        counts = {c: len(self.of(c)) for c in HEADINGS}
        return {
            "objects": self.objects,
            "evaluated": self.evaluated,
            "becameDenied": counts["became-denied"],
            "becameAllowed": counts["became-allowed"],
            "changed": counts["changed"],
            "unchanged": self.evaluated - len(self.diffs),
            "errors": len(self.errors),
        }


def diff_objects(
    items: Iterable[Sourced], *, base: PolicySet, head: PolicySet, inventory: Inventory
) -> DiffReport:
    report = DiffReport()
    for item in items:
        report.objects += 1
        obj = item.obj
        if not isinstance(obj, Mapping) or not isinstance(obj.get("kind"), str):
            continue
        try:
            diff = _diff_one(obj, item.location, base, head, inventory)
        except EvaluationFailed as exc:  # exit 2; the other objects go on
            report.errors.append(f"{item.location}: {exc}")
            continue
        if diff is not False:
            report.evaluated += 1
        if isinstance(diff, ObjectDiff):
            report.diffs.append(diff)
    return report


def _diff_one(
    obj: Mapping[str, Any], location: str, base: PolicySet, head: PolicySet, inv: Inventory
) -> ObjectDiff | bool:
    """The object's diff; True if it is unchanged; False if neither set judged it."""
    subject = subject_of(obj)
    before = evaluate(base, subject, inv, prefilter=True)  # a corpus: most hold no GPU
    after = evaluate(head, subject, inv, prefilter=True)
    for which, decision in (("base", before), ("head", after)):
        trouble = problem(decision, subject)
        if trouble is not None:
            raise EvaluationFailed(f"{trouble} (under the {which} policies)")
    if before.skipped is not None and after.skipped is not None:
        return False
    old, new = set(before.findings), set(after.findings)
    was, now = outcome(before), outcome(after)
    change: Change | None = (
        "became-denied"
        if now == "deny" != was
        else "became-allowed"
        if was == "deny" != now
        else "changed"
        if old != new
        else None
    )
    if change is None:
        return True
    return ObjectDiff(
        location,
        str(obj.get("apiVersion") or ""),
        str(obj["kind"]),
        subject.namespace,
        subject.name,
        change,
        was,
        now,
        tuple(f for f in before.findings if f not in new),
        tuple(f for f in after.findings if f not in old),
    )


def _finding_json(f: Finding) -> dict[str, str]:
    return {
        "policy": f.policy,
        "rule": f.rule,
        "action": f.action,
        "message": f.message,
        "field": format_path(f.path),
    }


HEADINGS: dict[Change, str] = {
    "became-denied": "Became denied",
    "became-allowed": "Became allowed",
    "changed": "Findings changed",
}
