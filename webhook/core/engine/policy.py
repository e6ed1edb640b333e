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
from webhook.core.engine.prefilter import Prefilter
from webhook.core.engine.reads import NOTHING, Reads, union
from webhook.core.kit.text import glob_matcher
from webhook.core.supply.profiles import GENERIC, ClusterProfile
from webhook.core.workloads.shapes import KindShape
from webhook.core.workloads.targets import KIND_SETS, TARGET_KINDS, TargetKind

API_VERSION = "gpu-admission.io/v1alpha1"
_MAX_PLAIN = 4096
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
    # What the check judges and reads under these parameters (webhook.core.engine.reads).
    reads: Mapping[TargetKind, Reads] = field(init=False, repr=False, compare=False)
    targets: tuple[TargetKind, ...] = field(init=False, repr=False, compare=False)
    judged: frozenset[TargetKind] = field(init=False, repr=False, compare=False)
    judges_pods: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "matches_object", compile_match(self.match))
        reads = self.check.reads(self.params)
        object.__setattr__(self, "reads", reads)
        object.__setattr__(self, "targets", tuple(reads))
        object.__setattr__(self, "judged", frozenset(reads))
        object.__setattr__(self, "judges_pods", "pod" in reads or "workload" in reads)

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
    # Derived once from what the policies' checks declare: what the set reads of each
    # kind of target, and the pre-filter of pods that hold none of it (None: none).
    reads: Mapping[TargetKind, Reads] = field(init=False, repr=False, compare=False)
    prefilter: Prefilter | None = field(init=False, repr=False, compare=False)
    judges_workloads: bool = field(init=False, repr=False, compare=False)
    _reads_by_kinds: dict[frozenset[TargetKind], Reads] = field(
        init=False, repr=False, compare=False
    )
    # The policies whose checks judge one of the kinds of target an object makes (every
    # object makes one of targets.KIND_SETS), each with the kinds it judges among them.
    judging: Mapping[frozenset[TargetKind], tuple[tuple[Policy, tuple[TargetKind, ...]], ...]] = (
        field(init=False, repr=False, compare=False)
    )
    # plain_skip by (kind, namespace): it reads nothing else, and an audit has few of them
    # (at most _MAX_PLAIN are kept, whatever it holds).
    _plain: dict[tuple[str, str], str | None] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        reads = {
            kind: union(p.reads[kind] for p in self.policies if kind in p.reads)
            for kind in TARGET_KINDS
            if any(kind in p.reads for p in self.policies)
        }
        object.__setattr__(self, "reads", reads)
        pods = union(reads.get(kind, NOTHING) for kind in ("pod", "workload"))
        object.__setattr__(self, "prefilter", Prefilter.of(pods, self.profile))
        object.__setattr__(self, "judges_workloads", "workload" in reads)
        object.__setattr__(self, "_reads_by_kinds", {})
        object.__setattr__(self, "_plain", {})
        judging = {
            kinds: tuple(
                (p, tuple(k for k in p.targets if k in kinds))
                for p in self.policies
                if not p.judged.isdisjoint(kinds)
            )
            for kinds in KIND_SETS
        }
        object.__setattr__(self, "judging", judging)

    def __reduce__(self) -> tuple[Any, ...]:
        # The derived fields are computed again on load (the policy cache pickles sets).
        fields = (self.policies, self.custom_kinds, self.digest)
        return (PolicySet, (*fields, self.unconfigured_gpu_action, self.profile))

    def reads_of(self, kinds: frozenset[TargetKind]) -> Reads:
        """What the policies read of an object that makes these kinds of target."""
        found = self._reads_by_kinds.get(kinds)
        if found is None:  # an object makes one of a handful of kind sets
            found = union(self.reads[kind] for kind in kinds if kind in self.reads)
            self._reads_by_kinds[kinds] = found
        return found

    def plain_skip(self, kind: str, namespace: str) -> str | None:
        """Why a pod of this kind and namespace that holds nothing the checks read is
        skipped (no policy that judges pods takes it); None: it is judged, and passes."""
        key = (kind, namespace)
        if key in self._plain:
            return self._plain[key]
        found: str | None = f"no policy matches {kind} in namespace {namespace}"
        for policy in self.policies:
            if policy.judges_pods and policy.matches_object(kind, namespace):
                found = None
                break
        if len(self._plain) < _MAX_PLAIN:
            self._plain[key] = found
        return found

    @property
    def reads_dra_supply(self) -> bool:
        return any(r.dra_supply for r in self.reads.values())

    @property
    def reads_queue_supply(self) -> bool:
        return any(r.queue_supply for r in self.reads.values())

    @property
    def reads_input_supply(self) -> bool:
        """A check reads what `check` joins from its own input: DRA or queue objects."""
        return self.reads_dra_supply or self.reads_queue_supply


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
