"""Policy test suites: YAML files of cases (object, inventory, expected outcome).

A suite is loaded whole before any case runs: every file it names is read, every
pattern compiled and every expected rule looked up, so a malformed suite is reported
(file, case, field, line) instead of failing cases one by one. The format is in
docs/policy-tests.md.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from webhook.core.engine.policy import PolicySet
from webhook.core.kit.dicts import as_dict, as_list
from webhook.core.supply.inventory import Inventory, nodes_from_document
from webhook.errors import GpuAdmissionError, ManifestError
from webhook.sources.files import SourceObject, iter_objects, read_inventory, read_text
from webhook.sources.policy_files import load_policy_dir
from webhook.sources.yamlsource import Document, iter_documents

API_VERSION = "gpu-admission.io/v1alpha1"
KIND = "PolicyTest"


class SuiteError(GpuAdmissionError):
    """A suite is malformed: names the file, the case and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# The engine's closed set but `invalid`: an object that cannot be judged is an input
# error of the suite (exit 2), never an expectation that passes.
Expected = Literal["allow", "warn", "deny", "skip", "error"]


class Expect(_Strict):
    outcome: Expected  # `allow` is met by a skip too (see `met`)
    rules: list[str] | None = None  # exactly these policy/rule ids fire; None: not checked
    messageMatches: str | None = None  # a regex some finding's message must contain


class CaseSpec(_Strict):
    name: str = Field(min_length=1)
    object: dict[str, Any] | None = None
    file: str | None = None
    namespace: str | None = None
    inventory: str | dict[str, Any] | None = None
    # The admission request's facts, for what is judged by who asks (a Namespace's
    # admin-access label): request.userInfo, and oldObject with operation UPDATE.
    userInfo: dict[str, Any] | None = None
    oldObject: dict[str, Any] | None = None
    operation: Literal["CREATE", "UPDATE"] = "CREATE"
    expect: Expect

    @model_validator(mode="after")
    def _one_object(self) -> CaseSpec:
        if (self.object is None) == (self.file is None):
            raise ValueError("give exactly one of `object` (inline) or `file`")
        return self


class SuiteSpec(_Strict):
    policies: str | None = None  # relative to the suite file; default: the shipped policies
    policyNames: list[str] = []  # only these policies of the directory; default: all
    inventory: str | None = None
    cases: list[CaseSpec] = Field(min_length=1)


class SuiteMeta(_Strict):
    name: str = Field(min_length=1)


class SuiteDocument(_Strict):
    apiVersion: Literal["gpu-admission.io/v1alpha1"]
    kind: Literal["PolicyTest"]
    metadata: SuiteMeta
    spec: SuiteSpec


@dataclass(frozen=True, slots=True)
class Case:
    """A case ready to run: its object, namespace, inventory and expectations resolved."""

    name: str
    obj: Mapping[str, Any]
    namespace: str | None  # the case's own; None: the object's, else default (subject_of)
    inventory: Inventory
    expect: Expect
    pattern: re.Pattern[str] | None
    user: Mapping[str, Any] | None = None
    old: Mapping[str, Any] | None = None
    operation: str = "CREATE"


@dataclass(frozen=True, slots=True)
class Suite:
    file: str
    name: str
    policies: PolicySet
    cases: tuple[Case, ...]


def is_suite_file(path: Path) -> bool:
    """Whether the first document of a YAML file is a PolicyTest (for directory walks)."""
    try:
        head = path.read_bytes()[:4096].decode("utf-8", "replace")
    except OSError:
        return False
    return re.search(r"(?m)^kind:\s*PolicyTest\s*$", head) is not None


PolicyCache = dict[Path, PolicySet]


def load_suites(path: Path, *, default_policies: str, cache: PolicyCache) -> Iterator[Suite]:
    """Every PolicyTest document of a file; SuiteError on the first malformed one.

    `cache` keeps policy directories loaded once across suites."""
    try:
        docs = list(iter_documents(read_text(str(path)), source=str(path)))
    except ManifestError as exc:
        raise SuiteError(str(exc)) from None
    if not docs:
        raise SuiteError(f"{path}: empty file, expected a PolicyTest document")
    for doc in docs:
        yield _Loader(path, doc, default_policies, cache).suite()


class _Loader:
    """Turns one PolicyTest document into a Suite, or raises SuiteError."""

    def __init__(
        self, path: Path, doc: Document, default_policies: str, cache: PolicyCache
    ) -> None:
        self.path, self.doc, self.base = path, doc, path.parent
        self.default_policies = default_policies
        self._policy_cache = cache

    def suite(self) -> Suite:
        try:
            parsed = SuiteDocument.model_validate(self.doc.data)
        except ValidationError as exc:
            raise SuiteError("\n".join(self._explain(exc))) from None
        spec = parsed.spec
        policies = self._policies(spec)
        default_inventory = self._inventory(spec.inventory, ("spec", "inventory"))
        cases = tuple(
            self._case(i, c, policies, default_inventory) for i, c in enumerate(spec.cases)
        )
        return Suite(str(self.path), parsed.metadata.name, policies, cases)

    # -- errors ---------------------------------------------------------------------

    def _where(self, path: Sequence[str | int]) -> str:
        line = self.doc.line_of(tuple(path))
        where = f"{self.path}:{line}"
        if len(path) >= 3 and path[:2] == ("spec", "cases") and isinstance(path[2], int):
            where += f": case {self._case_name(path[2])}"
        field = _dotted(path)
        return f"{where}, field {field}" if field else where

    def _case_name(self, index: int) -> str:
        cases = as_list(as_dict(as_dict(self.doc.data).get("spec")).get("cases"))
        name = as_dict(cases[index]).get("name") if index < len(cases) else None
        return f'"{name}"' if isinstance(name, str) and name else f"#{index + 1}"

    def _fail(self, path: Sequence[str | int], problem: str) -> SuiteError:
        return SuiteError(f"{self._where(path)}: {problem}")

    def _explain(self, exc: ValidationError) -> Iterator[str]:
        for err in exc.errors():
            loc = tuple(p for p in err["loc"] if isinstance(p, str | int))
            msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
            msg = msg.removeprefix("Value error, ")
            got = (
                "" if err["type"] in ("missing", "value_error") else f" (got {err['input']!r:.60})"
            )
            yield f"{self._where(loc)}: {msg}{got}"

    # -- parts ----------------------------------------------------------------------

    def _policies(self, spec: SuiteSpec) -> PolicySet:
        directory = (self.base / spec.policies) if spec.policies else Path(self.default_policies)
        directory = directory.resolve()
        if directory not in self._policy_cache:
            try:
                self._policy_cache[directory] = load_policy_dir(directory)
            except GpuAdmissionError as exc:
                raise self._fail(("spec", "policies"), f"policies did not load: {exc}") from None
        loaded = self._policy_cache[directory]
        if not spec.policyNames:
            return loaded
        known = {p.name for p in loaded.policies}
        for i, name in enumerate(spec.policyNames):
            if name not in known:
                raise self._fail(
                    ("spec", "policyNames", i),
                    f"no policy {name!r} in {directory}; it has: {', '.join(sorted(known))}",
                )
        kept = tuple(p for p in loaded.policies if p.name in spec.policyNames)
        return dataclasses.replace(loaded, policies=kept)

    def _inventory(
        self, value: str | dict[str, Any] | None, at: tuple[str | int, ...]
    ) -> Inventory:
        try:
            if isinstance(value, dict):
                return Inventory.from_nodes(nodes_from_document(value, source="inline inventory"))
            return read_inventory(str(self.base / value) if value is not None else None)
        except GpuAdmissionError as exc:
            raise self._fail(at, f"inventory did not load: {exc}") from None

    def _case(self, index: int, spec: CaseSpec, policies: PolicySet, default: Inventory) -> Case:
        at: tuple[str | int, ...] = ("spec", "cases", index)
        obj = spec.object if spec.object is not None else self._file_object(spec.file, at)
        inventory = (
            self._inventory(spec.inventory, (*at, "inventory"))
            if "inventory" in spec.model_fields_set
            else default
        )
        self._check_rules(spec.expect, policies, at)
        pattern = self._pattern(spec, at)
        return Case(
            spec.name,
            obj,
            spec.namespace,
            inventory,
            spec.expect,
            pattern,
            spec.userInfo,
            spec.oldObject,
            spec.operation,
        )

    def _file_object(self, name: str | None, at: tuple[str | int, ...]) -> Mapping[str, Any]:
        assert name is not None
        path = self.base / name
        try:
            found = list(iter_objects(str(path), read_text(str(path))))
        except ManifestError as exc:
            raise self._fail((*at, "file"), str(exc)) from None
        objects = [o.obj for o in found if isinstance(o, SourceObject)]
        if len(objects) != 1 or len(found) != 1:
            raise self._fail(
                (*at, "file"), f"{path} must hold exactly one object, it has {len(found)}"
            )
        return objects[0]

    def _check_rules(self, expect: Expect, policies: PolicySet, at: tuple[str | int, ...]) -> None:
        known = {f"{p.name}/{r}" for p in policies.policies for r in p.check.rules}
        for i, rule in enumerate(expect.rules or ()):
            if rule not in known:
                raise self._fail(
                    (*at, "expect", "rules", i),
                    f"{rule!r} is not a rule of the suite's policies (policy/rule, e.g. "
                    f"{min(known)})",
                )

    def _pattern(self, spec: CaseSpec, at: tuple[str | int, ...]) -> re.Pattern[str] | None:
        if spec.expect.messageMatches is None:
            return None
        try:
            return re.compile(spec.expect.messageMatches)
        except re.error as exc:
            raise self._fail((*at, "expect", "messageMatches"), f"not a regex: {exc}") from None


def _dotted(path: Sequence[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out
