"""`check`: manifest files through the engine, each finding placed at its file and line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.engine import Subject, evaluate
from webhook.errors import ManifestError
from webhook.inventory import Inventory
from webhook.policies import PolicySet
from webhook.report import Result, Run, placed
from webhook.sources import SourceObject, expand_paths, iter_objects, read_text


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
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or meta.get("generateName") or "")
    try:
        decision = evaluate(policy_set, Subject(obj, namespace), inventory)
    except Exception as exc:  # a bug must not hide the other files' findings
        run.errors.append(
            f"{item.source}:{item.document.line}: internal error while "
            f"evaluating {obj['kind']} {name}: {type(exc).__name__}: {exc}"
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
