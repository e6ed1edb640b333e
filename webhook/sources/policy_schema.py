"""What a policy file may say: the schema of its documents, checked with pydantic.

GPUPolicy, WorkloadKinds and ClusterProfile documents are validated here, and only
here, as webhook.sources.policy_files reads them; what the engine keeps of them (a
Policy's Match, its check's Params) are plain dataclasses of webhook.core, validated
as fields of these models. A set read back from the policy cache never imports this
module, nor pydantic.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from webhook.core.engine.policy import Action, Match
from webhook.core.supply.profiles import Mechanism, ProfileName

_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Metadata(_Strict):
    name: str = Field(pattern=_NAME, max_length=253)
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class PolicySpec(_Strict):
    description: str = ""
    enforcementAction: Action
    match: Match = Field(default_factory=Match)
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
    """What the cluster adds at admission (webhook.core.supply.profiles); unset fields follow
    the named built-in profile."""

    profile: ProfileName = "generic"
    extendedResourceToleration: bool | None = None
    sharing: list[Mechanism] | None = Field(default=None, max_length=16)


class ClusterProfileDocument(_Strict):
    apiVersion: Literal["gpu-admission.io/v1alpha1"]
    kind: Literal["ClusterProfile"]
    metadata: Metadata
    spec: ClusterProfileSpec = ClusterProfileSpec()
