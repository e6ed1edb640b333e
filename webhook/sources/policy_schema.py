"""What a policy file may say: the schema of its documents, checked with pydantic.

GPUPolicy, WorkloadKinds and ClusterProfile documents are validated here, and only
here, as webhook.sources.policy_files reads them; what the engine keeps of them (a
Policy's Match, its check's Params) are plain dataclasses of webhook.core, validated
as fields of these models. A set read back from the policy cache never imports this
module, nor pydantic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, model_validator

from webhook.core.engine.policy import Action, Match
from webhook.core.supply.profiles import DeviceListStrategy, Mechanism, ProfileName
from webhook.core.workloads.shapes import Joining, PodTarget

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
_KEYS = r"[^.\s*$][^.\s*]*(\.[^.\s*]+)*"  # a.b.c: one field, not a pattern (no "*")


def _one_field(dotted: str) -> str:
    """From the role's holder (a.b), or from the object's root ($.a.b)."""
    if re.fullmatch(r"(\$\.)?" + _KEYS, dotted) is None:
        raise ValueError("give a dotted path to one field (a.b, or $.a.b from the root): no *")
    return dotted


def _from_root(dotted: str) -> str:
    if re.fullmatch(_KEYS, dotted) is None:
        raise ValueError("give a dotted path from the object's root (a.b): no *, no $.")
    return dotted


_FieldPath = Annotated[str, AfterValidator(_one_field)]
_RootPath = Annotated[str, AfterValidator(_from_root)]
_FACTOR = "a factor is a whole number, a dotted path to one field, or {path, default, less}"


class ReplicaField(_Strict):
    """A factor of a role's Pod count: the whole number at `path` (relative to the
    role's holder; $. from the root), `default` when absent (the upstream default; null:
    unknown), minus `less`. A plain number is a constant (`path` None), a plain string
    the path of a factor with the default default."""

    path: _FieldPath | None = None
    default: StrictInt | None = Field(1, ge=0, description="the value when absent; null: unknown")
    less: StrictInt = Field(0, ge=0, description="subtracted from the value (size - 1)")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        # Read here rather than as a union, so a wrong factor is one error at its entry.
        if type(data) is int:
            if data < 0:
                raise ValueError("a count is a whole number, 0 or more")
            return {"default": data}
        if isinstance(data, str):
            return {"path": data}
        if not isinstance(data, Mapping):
            raise ValueError(_FACTOR)
        if data.get("path") is None:
            raise ValueError("give path (a constant factor is a plain number)")
        return data


class _PodPath(_Strict):
    """Where one role's pods come from, with its name and Pod count."""

    path: str = Field(pattern=_DOTTED, description="dotted path; * is any key or item")
    optional: bool = Field(False, description="true: an object may lack it (no finding)")
    role: str | None = Field(None, min_length=1, description="the role's name (head, leader)")
    roleAt: _FieldPath | None = Field(None, description="a string naming the role")
    replicas: list[ReplicaField] | None = Field(
        None, max_length=8, description="factors whose product is the role's Pod count"
    )
    minAvailable: _FieldPath | None = Field(
        None, description="the role's own gang minimum (its replicas when absent)"
    )

    @model_validator(mode="after")
    def _one_name(self) -> Self:
        if self.role is not None and self.roleAt is not None:
            raise ValueError("give role or roleAt, not both")
        return self


class TemplatePath(_PodPath):
    """A PodTemplateSpec (metadata + spec) at `path`; a plain string is its path."""

    fallback: _RootPath | None = Field(None, description="used when path matches nothing")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"path": data} if isinstance(data, str) else data


class GpuCountSpec(_Strict):
    """The kind counts GPUs in its resources as a bare `key: "1"` (Dynamo's, vLLM
    production-stack's ResourceItem), naming the resource at `nameKey`, else `default`;
    `customKey` holds more resources by their Kubernetes names."""

    form: Literal["requirements", "item"] = Field(
        "requirements", description="requests/limits of items (Dynamo), or one item (vLLM)"
    )
    key: str = Field("gpu", max_length=63)
    nameKey: str | None = Field("gpuType", max_length=63)
    default: str = Field("nvidia.com/gpu", max_length=253)
    customKey: str | None = Field("custom", max_length=63)


class ContainerPath(_Strict):
    path: str = Field(".", pattern=_DOTTED, description="relative to the pod spec; . itself")
    resources: str = Field("resources", pattern=_DOTTED, description="its ResourceRequirements")
    gpu: str | None = Field(None, pattern=_DOTTED, description="a {name, quantity} field")
    gpuCount: GpuCountSpec | None = Field(None, description="resources with a bare GPU count")


class PodField(_Strict):
    """A field of the object the operator makes into a pod-spec field of this role's
    Pods (webhook.core.workloads.podfields): `from` (relative to the match, $. from the
    root) joins `to` (a pod field, or `container.<field>` of the role's main container:
    its first container path), as `as` says."""

    source: _FieldPath = Field(alias="from", description="the object's field")
    to: PodTarget
    joining: Joining = Field("items", alias="as")
    onlyMounted: bool = Field(False, description="items joining volumes: only mounted ones")
    keyPrefix: str = Field("", max_length=253, description="envMap, hostPathVolume maps")
    keySuffix: str = Field("", max_length=253)
    name: str | None = Field(None, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)
    mountPath: str | None = Field(None, pattern=r"^/", max_length=4096)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        made = {"envMap": "container.env", "hostPathVolume": "volumes"}.get(self.joining)
        if made is not None and self.to != made:
            raise ValueError(f"as: {self.joining} makes {made}: give to: {made}")
        if self.onlyMounted and (self.joining != "items" or self.to != "volumes"):
            raise ValueError("onlyMounted is for items that join volumes")
        if self.joining == "items" and (self.keyPrefix or self.keySuffix):
            raise ValueError("keyPrefix and keySuffix filter a map's keys (envMap, hostPathVolume)")
        if self.joining != "hostPathVolume" and (self.name or self.mountPath):
            raise ValueError("name and mountPath are for as: hostPathVolume")
        if (
            self.joining == "hostPathVolume"
            and self.name is None
            and not (self.keyPrefix or self.keySuffix)
        ):
            raise ValueError(
                "as: hostPathVolume needs name (the volume made from a host path string) or "
                "keyPrefix/keySuffix (a map of host paths, each named by what lies between)"
            )
        return self


class PodSpecPath(_PodPath):
    """A pod spec held inline (nodeSelector, tolerations, containers... at `path`)."""

    containers: list[ContainerPath | str] = []
    labelsAt: list[str] = Field(
        default=[], description="mappings holding labels/annotations; $. is the root"
    )
    podFields: list[PodField] = Field(default=[], max_length=16)

    @model_validator(mode="after")
    def _main_container(self) -> Self:
        if not self.containers and any(f.to.startswith("container.") for f in self.podFields):
            raise ValueError(
                "podFields into container.* fill the main container: give containers "
                "(the first is the main one)"
            )
        return self


class ContainersPath(_PodPath):
    """Container-shaped mappings (or lists of them) with no pod spec of their own."""

    resources: str = Field("resources", pattern=_DOTTED)
    gpu: str | None = Field(None, pattern=_DOTTED)
    gpuCount: GpuCountSpec | None = Field(None, description="resources with a bare GPU count")
    labelsAt: list[str] = []
    podFields: list[PodField] = Field(default=[], max_length=16)


class GangField(_Strict):
    """A field of the kind's own that asks its operator for a gang (webhook.core.jobs)."""

    path: _RootPath = Field(description="present: the kind asks for a gang")
    minAvailable: _RootPath | None = Field(None, description="relative to path")
    unset: Literal["worldSize", "roleMinimums"] = "worldSize"
    zeroIsUnset: bool = Field(False, description="0 means unset (an int32 with omitempty)")


class PodLabelSpec(_Strict):
    """The labels the kind's operator sets on every Pod it makes: together the `job` keys'
    values name one gang of Pods (webhook.core.jobs.members); `role` and `index` name a
    rank in it."""

    job: list[str] = Field(min_length=1, max_length=3, description="label keys naming the gang")
    role: str | None = Field(None, description="label key naming the rank's role")
    index: list[str] = Field(default=[], max_length=3, description="label keys of the rank index")


class JobSpec(_Strict):
    """The kind's roles are the ranks of one distributed job (webhook.core.jobs)."""

    gang: list[GangField] = Field(default=[], max_length=8)
    group: list[ReplicaField] | None = Field(
        None, max_length=8, description="Pods of one gang (default: every Pod of the object)"
    )
    nprocPerNode: _RootPath | None = Field(None, description="processes per Pod")
    nprocRoles: list[str] = Field(default=[], max_length=16, description="[]: every role")
    ranksAlike: bool = Field(True, description="false: roles may differ on purpose")
    podLabels: PodLabelSpec | None = Field(None, description="how its Pods name their job")


class CustomKind(_Strict):
    group: str
    kind: str
    job: JobSpec | None = None
    templates: list[TemplatePath] = Field(
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


_KEY = r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"


class GpuNodeTaint(_Strict):
    """A taint every GPU node carries; without a value, any value."""

    key: str = Field(pattern=_KEY, max_length=317)
    value: str | None = Field(None, max_length=63)
    effect: Literal["NoSchedule", "NoExecute"]


class GpuNodesSpec(_Strict):
    """What every GPU node carries, now and after an autoscaler adds one."""

    taints: list[GpuNodeTaint] = Field(default=[], max_length=32)
    labels: list[str] = Field(
        default=[], max_length=32, description="a label key (any value) or key=value"
    )

    @model_validator(mode="after")
    def _label_keys(self) -> Self:
        for label in self.labels:
            key, _, value = label.partition("=")
            if re.fullmatch(_KEY, key) is None or len(key) > 317 or len(value) > 63:
                raise ValueError(f"labels: {label[:100]!r} is not a label key or key=value")
        return self


class ContainerToolkitSpec(_Strict):
    """The NVIDIA container toolkit's and device plugin's settings on the GPU nodes."""

    acceptEnvvarUnprivileged: bool = True
    deviceListStrategy: DeviceListStrategy = "envvar"


class KubeletSpec(_Strict):
    seccompDefault: bool = False


class ClusterProfileSpec(_Strict):
    """What the cluster adds at admission and what it is (webhook.core.supply.profiles);
    unset fields follow the named built-in profile."""

    profile: ProfileName = "generic"
    extendedResourceToleration: bool | None = None
    sharing: list[Mechanism] | None = Field(default=None, max_length=16)
    gpuNodes: GpuNodesSpec | None = None
    containerToolkit: ContainerToolkitSpec | None = None
    kubelet: KubeletSpec | None = None


class ClusterProfileDocument(_Strict):
    apiVersion: Literal["gpu-admission.io/v1alpha1"]
    kind: Literal["ClusterProfile"]
    metadata: Metadata
    spec: ClusterProfileSpec = ClusterProfileSpec()
