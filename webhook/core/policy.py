"""Policy files: Kubernetes-style YAML documents, validated with pydantic.

A policy names one built-in check, its parameters, what it matches and what happens on
a violation. A directory of them (plus WorkloadKinds documents) makes a PolicySet,
which is immutable: the server swaps a whole new set in on reload.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from webhook.core.check import Check, CheckParams
from webhook.core.profiles import GENERIC, ClusterProfile, Mechanism, ProfileName
from webhook.core.shapes import KindShape
from webhook.core.text import glob_matcher

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
    kinds: list[str] = Field(default=[], description="empty: every workload kind")
    namespaces: list[str] = Field(default=[], description="globs; empty: all")
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


_DOTTED = r"^(\$\.)?[^.\s]+(\.[^.\s]+)*$|^\.$|^\$$"  # a.b.*.c; "." the match itself


class TemplatePath(_Strict):
    path: str = Field(pattern=_DOTTED, description="dotted path; * is any key or item")
    optional: bool = Field(False, description="true: an object may lack it (no finding)")


class ContainerPath(_Strict):
    path: str = Field(".", pattern=_DOTTED, description="relative to the pod spec; . itself")
    resources: str = Field("resources", pattern=_DOTTED, description="its ResourceRequirements")
    gpu: str | None = Field(None, pattern=_DOTTED, description="a {name, quantity} field")


class PodSpecPath(TemplatePath):
    """A pod spec held inline (nodeSelector, tolerations, containers... at `path`)."""

    containers: list[ContainerPath | str] = []
    labelsAt: list[str] = Field(
        default=[], description="mappings holding labels/annotations; $. is the root"
    )


class ContainersPath(TemplatePath):
    """Container-shaped mappings (or lists of them) with no pod spec of their own."""

    resources: str = Field("resources", pattern=_DOTTED)
    gpu: str | None = Field(None, pattern=_DOTTED)
    labelsAt: list[str] = []


class CustomKind(_Strict):
    group: str
    kind: str
    templates: list[TemplatePath | str] = Field(
        default=[], description="PodTemplateSpecs (metadata + spec)"
    )
    podSpecs: list[PodSpecPath] = []
    containers: list[ContainersPath] = []

    @model_validator(mode="after")
    def _some_path(self) -> CustomKind:
        if not (self.templates or self.podSpecs or self.containers):
            raise ValueError("give at least one of templates, podSpecs, containers")
        return self


class WorkloadKindsSpec(_Strict):
    customResources: list[CustomKind] = []
    # A configured path that matches nothing in an object: its pods go unjudged.
    unmatchedPathAction: Action = "warn"
    # An object of no configured kind that requests GPUs anywhere: "ignore" skips it.
    unconfiguredGpuKinds: Action | Literal["ignore"] | None = None


class WorkloadKindsDocument(_Strict):
    apiVersion: Literal["gpu-admission.io/v1alpha1"]
    kind: Literal["WorkloadKinds"]
    metadata: Metadata
    spec: WorkloadKindsSpec


class ClusterProfileSpec(_Strict):
    """What the cluster adds at admission (webhook.core.profiles); unset fields follow
    the named built-in profile."""

    profile: ProfileName = "generic"
    extendedResourceToleration: bool | None = None
    sharing: list[Mechanism] | None = Field(default=None, max_length=16)


class ClusterProfileDocument(_Strict):
    apiVersion: Literal["gpu-admission.io/v1alpha1"]
    kind: Literal["ClusterProfile"]
    metadata: Metadata
    spec: ClusterProfileSpec = ClusterProfileSpec()


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
