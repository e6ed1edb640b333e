"""`check`: manifest files through the engine, each finding placed at its file and line."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.core.engine import Finding, evaluate
from webhook.core.inventory import Inventory
from webhook.core.policy import PolicySet
from webhook.core.subject import subject_of
from webhook.errors import ManifestError
from webhook.sources.files import SourceObject, expand_paths, iter_objects, read_text


def check_paths(paths: Sequence[str], *, policy_set: PolicySet, inventory: Inventory) -> Run:
    run = Run()
    for name in expand_paths(paths):
        run.files += 1
        try:
            for item in iter_objects(name, read_text(name)):
                if isinstance(item, SourceObject):
                    _check_object(item, run, policy_set, inventory)
                else:
                    run.objects += 1
                    run.skipped["not an object"] += 1
        except ManifestError as exc:
            run.errors.append(str(exc))
    run.results = placed(run.results)
    return run


def _check_object(
    item: SourceObject, run: Run, policy_set: PolicySet, inventory: Inventory
) -> None:
    run.objects += 1
    obj = item.obj
    if not isinstance(obj.get("apiVersion"), str) or not isinstance(obj.get("kind"), str):
        run.skipped["without apiVersion/kind"] += 1
        return
    meta = _meta(obj)
    subject = subject_of(obj)
    namespace = subject.namespace
    name = str(meta.get("name") or meta.get("generateName") or "")
    decision = evaluate(policy_set, subject, inventory)
    if decision.error is not None:  # a bug in a check: exit 2, the other files go on
        run.errors.append(
            f"{item.source}:{item.document.line}: internal error while "
            f"evaluating {obj['kind']} {namespace}/{name}: {decision.error}"
        )
        return
    if decision.skipped is not None:
        run.skipped[decision.skipped] += 1
        return
    run.evaluated += 1
    for f in decision.findings:
        run.results.append(
            Result(
                item.source,
                item.line_of(f.path),
                obj["apiVersion"],
                obj["kind"],
                namespace,
                name,
                f,
            )
        )


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


@dataclass(frozen=True, slots=True)
class Result:
    """A finding placed in a file: what `check --output json` prints per entry."""

    file: str
    line: int
    api_version: str
    kind: str
    namespace: str
    name: str
    finding: Finding

    def as_json(self) -> dict[str, Any]:
        f = self.finding
        return {
            "file": self.file,
            "line": self.line,
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "policy": f.policy,
            "rule": f.rule,
            "action": f.action,
            "message": f.message,
        }


@dataclass
class Run:
    """Everything one `check` run saw."""

    results: list[Result] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    files: int = 0
    objects: int = 0
    evaluated: int = 0
    skipped: Counter[str] = field(default_factory=Counter)

    def summary(self) -> dict[str, Any]:
        actions = Counter(r.finding.action for r in self.results)
        return {
            "files": self.files,
            "objects": self.objects,
            "evaluated": self.evaluated,
            "skipped": sum(self.skipped.values()),
            "skippedReasons": dict(self.skipped),
            "deny": actions["deny"],
            "warn": actions["warn"],
            "dryrun": actions["dryrun"],
            "errors": len(self.errors),
        }

    @property
    def exit_code(self) -> int:
        if self.errors:
            return 2
        return 1 if any(r.finding.action == "deny" for r in self.results) else 0


def placed(results: Sequence[Result]) -> list[Result]:
    return sorted(results, key=lambda r: (r.file, r.line, r.finding.policy, r.finding.rule))
