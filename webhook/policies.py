"""Policy files: Kubernetes-style YAML documents, validated with pydantic.

A policy names one built-in check, its parameters, what it matches and what happens on
a violation. A directory of them (plus WorkloadKinds documents) makes a PolicySet,
which is immutable: the server swaps a whole new set in on reload.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from webhook.checks import Check, CheckParams, registry
from webhook.checks._text import glob_matcher
from webhook.errors import ManifestError, PolicyError
from webhook.workloads import TemplateRule
from webhook.yamlsource import Document, iter_documents

API_VERSION = "gpu-admission.io/v1alpha1"
Action = Literal["deny", "warn", "dryrun"]
_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Metadata(_Strict):
    name: str = Field(pattern=_NAME, max_length=253)
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class SelectorRequirement(_Strict):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = []


class LabelSelector(_Strict):
    matchLabels: dict[str, str] = {}
    matchExpressions: list[SelectorRequirement] = []

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.matchLabels.items()):
            return False
        for req in self.matchExpressions:
            present = req.key in labels
            ok = {
                "In": present and labels.get(req.key) in req.values,
                "NotIn": not present or labels.get(req.key) not in req.values,
                "Exists": present,
                "DoesNotExist": not present,
            }[req.operator]
            if not ok:
                return False
        return True


class Match(_Strict):
    kinds: list[str] = Field(default_factory=list, description="empty: every workload kind")
    namespaces: list[str] = Field(default_factory=list, description="globs; empty: all")
    excludedNamespaces: list[str] = []
    labelSelector: LabelSelector | None = None


class PolicySpec(_Strict):
    description: str = ""
    enforcementAction: Action
    match: Match = Match()
    check: str
    parameters: dict[str, Any] = {}
    messagePrefix: str = ""


class PolicyDocument(_Strict):
    apiVersion: Literal["gpu-admission.io/v1alpha1"]
    kind: Literal["GPUPolicy"]
    metadata: Metadata
    spec: PolicySpec


class CustomKind(_Strict):
    group: str
    kind: str
    templates: list[str] = Field(min_length=1, description="dotted paths; * is any key/item")


class WorkloadKindsSpec(_Strict):
    customResources: list[CustomKind] = []


class WorkloadKindsDocument(_Strict):
    apiVersion: Literal["gpu-admission.io/v1alpha1"]
    kind: Literal["WorkloadKinds"]
    metadata: Metadata
    spec: WorkloadKindsSpec


@dataclass(frozen=True, slots=True)
class Policy:
    """A loaded policy: its check resolved and its parameters validated."""

    name: str
    action: Action
    match: Match
    check: Check
    params: CheckParams
    message_prefix: str
    description: str
    source: str
    # The match compiled once at load: it runs for every policy on every request, and
    # reading pydantic attributes (private ones above all) costs more than the test.
    matches_object: Callable[[str, str], bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "matches_object", compile_match(self.match))


@dataclass(frozen=True, slots=True)
class PolicySet:
    policies: tuple[Policy, ...]
    custom_kinds: tuple[TemplateRule, ...]
    digest: str  # sha256 of the files' bytes: which policy set judged a request


TESTS_DIR = "tests"  # `gpu-admission test` suites and their Node lists: not policies


def compile_match(match: Match) -> Callable[[str, str], bool]:
    """Whether a Match takes an object of this kind in this namespace: kinds in a
    frozenset and the namespace globs in one regex each, built once per policy."""
    kinds = frozenset(match.kinds) if match.kinds and "*" not in match.kinds else None
    include = glob_matcher(tuple(match.namespaces)) if match.namespaces else None
    exclude = glob_matcher(tuple(match.excludedNamespaces)) if match.excludedNamespaces else None

    def matches(kind: str, namespace: str) -> bool:
        if kinds is not None and kind not in kinds:
            return False
        if include is not None and not include(namespace):
            return False
        return exclude is None or not exclude(namespace)

    return matches


def load_policy_dir(directory: str | FsPath) -> PolicySet:
    """Every policy file below `directory`; all errors at once, in one PolicyError."""
    root = FsPath(directory)
    if not root.is_dir():
        raise PolicyError(f"{root}: policy directory not found")
    return load_policy_files(policy_files(root), root=root)


def policy_files(root: FsPath) -> list[FsPath]:
    """*.yaml/*.yml/*.json below `root`, sorted; a `tests/` directory holds test suites,
    not policies, and ConfigMap mounts hold each file twice (the ..data internals)."""
    return sorted(
        p
        for p in root.rglob("*")
        if p.suffix in (".yaml", ".yml", ".json")
        and p.is_file()
        and not any(part.startswith("..") for part in p.relative_to(root).parts)
        and TESTS_DIR not in p.relative_to(root).parts[:-1]
    )


def files_digest(files: Sequence[tuple[str, bytes]]) -> str:
    """sha256 over (name, content) pairs: which policy set this is, and whether it changed."""
    digest = hashlib.sha256()
    for name, data in files:
        digest.update(name.encode() + b"\0" + data)
    return digest.hexdigest()


def read_files(files: Sequence[FsPath], root: FsPath | None) -> list[tuple[str, bytes]]:
    """(name relative to root, content) of each file; OSError for one that cannot be read."""
    return [(str(p.relative_to(root) if root else p), p.read_bytes()) for p in files]


def load_policy_files(files: Sequence[FsPath], *, root: FsPath | None = None) -> PolicySet:
    policies: list[Policy] = []
    kinds: list[TemplateRule] = []
    errors: list[str] = []
    checks = registry()
    contents: list[tuple[str, bytes]] = []
    for path in files:
        try:
            data = path.read_bytes()
        except OSError as exc:
            errors.append(f"{path}: cannot read: {exc.strerror or exc}")
            continue
        contents.append((str(path.relative_to(root) if root else path), data))
        try:
            for doc in iter_documents(data, source=str(path)):
                _load_document(doc, str(path), checks, policies, kinds, errors)
        except ManifestError as exc:
            errors.append(str(exc))
    errors += _duplicates(policies)
    if errors:
        raise PolicyError("\n".join(errors))
    if not policies:
        raise PolicyError(f"{root or 'policy files'}: no GPUPolicy documents found")
    return PolicySet(tuple(policies), tuple(kinds), files_digest(contents)[:16])


def _duplicates(policies: list[Policy]) -> list[str]:
    sources: dict[str, list[str]] = {}
    for policy in policies:
        sources.setdefault(policy.name, []).append(policy.source)
    return [
        f"policy name {name!r} is defined more than once: in {', '.join(where)}"
        for name, where in sorted(sources.items())
        if len(where) > 1
    ]


def _load_document(
    doc: Document,
    source: str,
    checks: Mapping[str, Check],
    policies: list[Policy],
    kinds: list[TemplateRule],
    errors: list[str],
) -> None:
    data = doc.data
    kind = data.get("kind") if isinstance(data, Mapping) else None
    where = f"{source}: document {doc.index} (line {doc.line})"
    model: type[PolicyDocument] | type[WorkloadKindsDocument]
    if kind == "GPUPolicy":
        model = PolicyDocument
    elif kind == "WorkloadKinds":
        model = WorkloadKindsDocument
    else:
        errors.append(f"{where}: kind must be GPUPolicy or WorkloadKinds, got {kind!r}")
        return
    try:
        parsed = model.model_validate(data)
    except ValidationError as exc:
        errors.extend(_explain(exc, where, doc))
        return
    if isinstance(parsed, WorkloadKindsDocument):
        kinds.extend(
            TemplateRule(c.group, c.kind, tuple(tuple(t.split(".")) for t in c.templates))
            for c in parsed.spec.customResources
        )
        return
    where = f'{source}: document {doc.index} (GPUPolicy "{parsed.metadata.name}")'
    check = checks.get(parsed.spec.check)
    if check is None:
        line = doc.line_of(("spec", "check"))
        errors.append(
            f"{where}, line {line}, field spec.check: unknown check "
            f"{parsed.spec.check!r}; built-in checks: {', '.join(sorted(checks))}"
        )
        return
    try:
        params = check.params.model_validate(parsed.spec.parameters)
    except ValidationError as exc:
        errors.extend(_explain(exc, where, doc, prefix=("spec", "parameters")))
        return
    spec = parsed.spec
    policies.append(
        Policy(
            parsed.metadata.name,
            spec.enforcementAction,
            spec.match,
            check,
            params,
            spec.messagePrefix,
            spec.description,
            source,
        )
    )


def _explain(
    exc: ValidationError, where: str, doc: Document, prefix: tuple[str, ...] = ()
) -> list[str]:
    out = []
    for err in exc.errors():
        loc = (*prefix, *err["loc"])
        field = ".".join(str(p) for p in loc) or "(document)"
        line = doc.line_of(tuple(p for p in loc if isinstance(p, str | int)))
        got = err.get("input")
        shown = "" if err["type"] == "missing" else f" (got {got!r:.60})"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        out.append(f"{where}, line {line}, field {field}: {msg}{shown}")
    return out
