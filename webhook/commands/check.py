"""`check`: manifest files through the engine, each finding placed at its file and line."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from webhook.core.dra.model import CLAIM_KINDS, DRA_KINDS
from webhook.core.dra.model import GROUP as DRA_GROUP
from webhook.core.engine.evaluation import Finding, evaluate, problem
from webhook.core.engine.policy import PolicySet
from webhook.core.engine.subject import DEFAULT_NAMESPACE, subject_of
from webhook.core.kit.paths import Path
from webhook.core.queues.model import KUEUE_GROUP, is_queue_object
from webhook.core.supply.inventory import Inventory
from webhook.core.workloads.identity import namespace_of
from webhook.errors import InventoryError, ManifestError
from webhook.sources.files import SourceObject, expand_paths, iter_objects, read_text
from webhook.sources.yamlsource import Document

if TYPE_CHECKING:
    from webhook.sources.dumpsplit import Part


def check_paths(
    paths: Sequence[str],
    *,
    policy_set: PolicySet,
    inventory: Inventory,
    input_dra: bool = True,
    expanded: bool = False,
    dump_workers: int = 1,
) -> CheckRun:
    """Every object of every file, judged one file at a time (memory: one file's parse).

    A Pod and the ResourceClaimTemplate it names may come in the same PR: unless the
    caller has done it (`input_dra=False`), the DRA objects of the input join the
    inventory first. That costs a byte search per file; only files that name the DRA
    group are parsed twice. Stdin is read once and kept for both passes. `expanded`: the
    paths are files already (what expand_paths gave), not to be looked at again. A big
    JSON dump is streamed instead, across `dump_workers` processes (checkdump)."""
    run = CheckRun()
    names = list(paths) if expanded else list(expand_paths(paths))
    stdin = read_text("-") if "-" in names else None
    if input_dra and policy_set.reads_input_supply:  # what a check reads (engine.reads)
        inventory = with_supply_of_files(inventory, names, stdin=stdin)
    for name in names:
        run.files += 1
        parts = _dump_parts(name, workers=dump_workers)
        done = _check_dump(parts, policy_set=policy_set, inventory=inventory) if parts else None
        if done is not None:
            run.found.add(name)
            run.results += done.results
            run.errors += done.errors
            run.objects += done.objects
            run.evaluated += done.evaluated
            run.skipped.update(done.skipped)
            continue
        try:
            data = stdin if name == "-" and stdin is not None else read_text(name)
            if not_kubernetes(data):  # a JSON file that is not Kubernetes: package-lock.json
                run.found.add(name)
                run.skipped["not a Kubernetes file"] += 1
                continue
            told: Document | None = None
            for item in iter_objects(name, data):
                run.found.add(name)
                document = item.document if isinstance(item, SourceObject) else item
                if document.repeats and document is not told:  # once per document
                    told = document
                    run.errors += document.repeats
                if isinstance(item, SourceObject):
                    check_object(item, run, policy_set, inventory)
                else:
                    run.objects += 1
                    run.skipped["not an object"] += 1
        except ManifestError as exc:  # the file is named; the other files go on
            run.found.add(name)
            run.errors.append(str(exc))
    run.results = placed(run.results)
    return run


def not_kubernetes(data: bytes) -> bool:
    """A JSON file no Kubernetes object can be in, told without parsing it: it never says
    `"apiVersion"` (package-lock.json, tsconfig.json). A big lock file costs a byte search
    instead of seconds of parsing. YAML is parsed: a document without apiVersion/kind is
    skipped as such, and a broken one is still reported."""
    head = data[:64].lstrip(b" \t\r\n\xef\xbb\xbf")
    return head[:1] in (b"{", b"[") and b'"apiVersion"' not in data


def empty_inputs(
    paths: Sequence[str], run: CheckRun, *, expanded: Mapping[str, Sequence[str]] | None = None
) -> list[str]:
    """An input (a file, a directory, stdin) in which the run found nothing at all: a
    newcomer's mistake (a wrong directory, an empty pipe), never a silent pass.
    `expanded`: each input's files, when the caller has listed them already."""
    return [
        f"no Kubernetes objects found in {'<stdin>' if raw == '-' else raw}"
        for raw in paths
        if not any(
            name in run.found
            for name in (expanded[raw] if expanded is not None else expand_paths([raw]))
        )
    ]


def with_supply_of_files(
    inventory: Inventory, names: Sequence[str], *, stdin: bytes | None = None
) -> Inventory:
    """The DRA and queue objects of any of these files joined to the inventory, before any
    file is judged: a claim template or a LocalQueue in one file (or one part of a
    parallel check) resolves for a Pod or a job in another."""
    return with_supply_objects(inventory, supply_objects(names, stdin=stdin))


def supply_objects(names: Sequence[str], *, stdin: bytes | None = None) -> list[Mapping[str, Any]]:
    """The DRA and queue objects of these files, in their order. Only files that name the
    DRA group, Kueue's group or a ResourceQuota are parsed; a big JSON dump one item at a
    time, keeping only those objects."""
    found: list[Mapping[str, Any]] = []
    for name in names:
        try:
            parts = _dump_parts(name, workers=1)  # a big dump: never held whole
            if parts is not None:
                from webhook.commands.checkdump import dump_objects, file_holds

                holds = any(file_holds(name, needle) for needle in _NEEDLES)
                streamed = dump_objects(parts, keep=_is_supply) if holds else []
                if streamed is not None:
                    found += streamed
                    continue
            data = stdin if name == "-" and stdin is not None else read_text(name)
            if any(needle in data for needle in _NEEDLES):
                found += [  # all or nothing: a file that breaks off adds none
                    item.obj
                    for item in iter_objects(name, data)
                    if isinstance(item, SourceObject) and _is_supply(item.obj)
                ]
        except ManifestError:
            continue  # reported by the part that holds the file
    return found


def _dump_parts(name: str, *, workers: int) -> list[Part] | None:
    """checkdump.dump_parts, which YAML and stdin never need: a pull request's manifests
    do not import the dump reader (its module, byte-range splitter and token scanner)."""
    if name == "-" or name.endswith((".yaml", ".yml")):
        return None
    from webhook.commands.checkdump import dump_parts

    return dump_parts(name, workers=workers)


def _check_dump(
    parts: list[Part], *, policy_set: PolicySet, inventory: Inventory
) -> CheckRun | None:
    from webhook.commands.checkdump import check_dump

    return check_dump(parts, policy_set=policy_set, inventory=inventory)


# A DRA or Kueue object names its group; a Namespace (whose labels say whether its claims
# may set adminAccess, and which tenant it is) and a ResourceQuota their kind.
_NEEDLES = (DRA_GROUP.encode(), b"Namespace", KUEUE_GROUP.encode(), b"ResourceQuota")


def _is_supply(obj: Mapping[str, Any]) -> bool:
    kind = obj.get("kind")
    if kind == "Namespace":
        return obj.get("apiVersion") == "v1"
    if is_queue_object(obj):
        return True
    return kind in DRA_KINDS and str(obj.get("apiVersion", "")).startswith(DRA_GROUP + "/")


def with_supply_objects(inventory: Inventory, found: Sequence[Mapping[str, Any]]) -> Inventory:
    """The input's DRA and queue objects joined to the inventory. A namespaced one
    without a namespace is in `default`, where kubectl would create it. A queue object
    that cannot be read joins as unreadable: judged as a target it is invalid, and a job
    it would judge says it could not be judged."""
    if not found:
        return inventory
    supply, queues = inventory.dra, inventory.queues
    for obj in found:
        if obj.get("kind") in NAMESPACED and not namespace_of(obj):
            meta = {**dict(obj.get("metadata") or {}), "namespace": DEFAULT_NAMESPACE}
            obj = {**obj, "metadata": meta}
        if is_queue_object(obj):
            try:
                queues = queues.with_object(obj)
            except InventoryError as exc:
                queues = queues.with_unreadable(obj, str(exc))
        else:
            supply = supply.with_object(obj)
    return inventory.with_dra(supply).with_queues(queues)


NAMESPACED = frozenset(CLAIM_KINDS | {"LocalQueue", "ResourceQuota"})


class Placed(Protocol):
    """An object and where its fields are: a SourceObject, or an item of a dump."""

    @property
    def source(self) -> str: ...
    @property
    def obj(self) -> Mapping[str, Any]: ...
    @property
    def document_line(self) -> int: ...
    def line_of(self, field: Path) -> int: ...


def check_object(item: Placed, run: CheckRun, policy_set: PolicySet, inventory: Inventory) -> None:
    run.objects += 1
    obj = item.obj
    if not isinstance(obj.get("apiVersion"), str) or not isinstance(obj.get("kind"), str):
        run.skipped["without apiVersion/kind"] += 1
        return
    subject = subject_of(obj)
    decision = evaluate(policy_set, subject, inventory, prefilter=True)  # most hold no GPU
    trouble = problem(decision, subject)
    if trouble is not None:  # invalid input, or a bug in a check: exit 2, the rest goes on
        line = item.line_of(()) if decision.invalid is not None else item.document_line
        run.errors.append(f"{item.source}:{line}: {trouble}")
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
                subject.namespace,
                subject.name,
                f,
            )
        )


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
class CheckRun:
    """Everything one `check` run saw."""

    results: list[Result] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    files: int = 0
    objects: int = 0
    evaluated: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    # Files that held something to report (a document, or an error): see empty_inputs.
    found: set[str] = field(default_factory=set)

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


def merged_in_order(runs: Sequence[CheckRun]) -> CheckRun:
    """Runs of consecutive files, in their order, as one run over all of them: results
    placed as `check_paths` places them, errors and skip reasons in first-seen order."""
    total = CheckRun()
    for run in runs:
        total.results.extend(run.results)
        total.errors.extend(run.errors)
        total.files += run.files
        total.objects += run.objects
        total.evaluated += run.evaluated
        total.skipped.update(run.skipped)
        total.found |= run.found
    total.results = placed(total.results)
    return total
