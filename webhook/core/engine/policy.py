"""Policies as the engine reads them: what a GPUPolicy document becomes once validated.

A policy names one built-in check, its parameters, what it matches and what happens on
a violation. A directory of them (plus WorkloadKinds documents) makes a PolicySet,
which is immutable: the server swaps a whole new set in on reload. The documents'
schema is webhook.sources.policy_schema; nothing here imports pydantic, so that a set
read back from the policy cache is built without it (webhook.sources.policy_cache).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from webhook.core.engine.check import Check, CheckParams
from webhook.core.kit.text import glob_matcher
from webhook.core.supply.profiles import GENERIC, ClusterProfile
from webhook.core.workloads.shapes import KindShape

API_VERSION = "gpu-admission.io/v1alpha1"
Action = Literal["deny", "warn", "dryrun"]


# What pydantic checks in these, where policy files are read (webhook.sources.policy_schema).
_STRICT: dict[str, Any] = {"extra": "forbid"}


# Default factories as Python functions, not `list` and `dict`: pydantic takes the
# signature of each factory, and a builtin's is parsed from its text with tokenize
# (~1 ms each, on every cold start).
def _none() -> list[Any]:
    return []


def _no_labels() -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class SelectorRequirement:
    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = field(default_factory=_none)


@dataclass(frozen=True)
class LabelSelector:
    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT

    matchLabels: dict[str, str] = field(default_factory=_no_labels)
    matchExpressions: list[SelectorRequirement] = field(default_factory=_none)

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


@dataclass(frozen=True)
class Match:
    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT

    kinds: list[str] = field(default_factory=_none)  # empty: every workload kind
    namespaces: list[str] = field(default_factory=_none)  # globs; empty: all
    excludedNamespaces: list[str] = field(default_factory=_none)
    labelSelector: LabelSelector | None = None


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
    # The match compiled once at load: it runs for every policy on every request.
    matches_object: Callable[[str, str], bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "matches_object", compile_match(self.match))

    def __reduce__(self) -> tuple[Any, ...]:
        # The compiled match is a closure, which does not pickle: compiled again on load.
        return (
            Policy,
            (
                self.name,
                self.action,
                self.match,
                self.check,
                self.params,
                self.message_prefix,
                self.description,
                self.source,
            ),
        )


@dataclass(frozen=True, slots=True)
class PolicySet:
    policies: tuple[Policy, ...]
    custom_kinds: tuple[KindShape, ...]
    digest: str  # sha256 of the files' bytes: which policy set judged a request
    # An object of no configured kind that requests GPUs: a finding with this action.
    unconfigured_gpu_action: Action | Literal["ignore"] = "warn"
    profile: ClusterProfile = GENERIC  # what the cluster adds at admission


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
