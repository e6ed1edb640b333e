"""Pod specs inside any workload object, and what a pod asks of a node.

Checks never see kinds: a Deployment, a CronJob and a PyTorchJob all come down to one
or more `PodView`s, each with the path of its spec in the object, so a finding on a
controller names the same rule as the finding its Pods would get at admission.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

from webhook.quantity import quantity_or_none
from webhook.yamlsource import Path, format_path

CONTAINER_FIELDS = ("initContainers", "containers", "ephemeralContainers")

# Where core kinds keep their pod template (a PodTemplateSpec: metadata + spec).
# Keyed by (API group, kind); custom resources come from the WorkloadKinds config.
BUILTIN_TEMPLATES: dict[tuple[str, str], tuple[Path, ...]] = {
    ("apps", "Deployment"): (("spec", "template"),),
    ("apps", "ReplicaSet"): (("spec", "template"),),
    ("apps", "StatefulSet"): (("spec", "template"),),
    ("apps", "DaemonSet"): (("spec", "template"),),
    ("", "ReplicationController"): (("spec", "template"),),
    ("batch", "Job"): (("spec", "template"),),
    ("batch", "CronJob"): (("spec", "jobTemplate", "spec", "template"),),
    ("", "PodTemplate"): (("template",),),
}


@dataclass(frozen=True, slots=True)
class ContainerRef:
    """A container and where it sits: `field` is containers, initContainers, ..."""

    field: str
    index: int
    spec: Mapping[str, Any]
    path: Path

    @property
    def name(self) -> str:
        name = self.spec.get("name")
        return name if isinstance(name, str) else f"#{self.index}"

    @property
    def label(self) -> str:
        kind = {"initContainers": "init container", "ephemeralContainers": "ephemeral container"}
        return f'{kind.get(self.field, "container")} "{self.name}"'

    @property
    def is_sidecar(self) -> bool:
        return self.field == "initContainers" and self.spec.get("restartPolicy") == "Always"


@dataclass(frozen=True, slots=True)
class ResourceAmount:
    """One container's count of one resource, as the apiserver would see it."""

    container: ContainerRef
    resource: str
    amount: Fraction | None  # None: the value is not a quantity at all
    raw: object
    path: Path  # the field that holds the amount (limits, else requests)


@dataclass(eq=False)
class PodView:
    """A pod spec with its labels and its path in the enclosing object."""

    spec: Mapping[str, Any]
    path: Path
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    metadata_path: Path

    def where(self, *rel: str | int) -> Path:
        return (*self.path, *rel)

    def describe(self, *rel: str | int) -> str:
        return format_path(self.where(*rel))

    @cached_property
    def containers(self) -> tuple[ContainerRef, ...]:
        out: list[ContainerRef] = []
        for fname in CONTAINER_FIELDS:
            for index, spec in enumerate(as_list(self.spec.get(fname))):
                if isinstance(spec, Mapping):
                    out.append(ContainerRef(fname, index, spec, self.where(fname, index)))
        return tuple(out)

    @cached_property
    def amounts(self) -> tuple[ResourceAmount, ...]:
        """Every extended resource each container asks for (limits, else requests)."""
        out: list[ResourceAmount] = []
        for ref in self.containers:
            resources = as_dict(ref.spec.get("resources"))
            limits, requests = as_dict(resources.get("limits")), as_dict(resources.get("requests"))
            for name in dict.fromkeys([*limits, *requests]):
                if not isinstance(name, str) or "/" not in name:
                    continue  # cpu, memory, hugepages-*: not extended resources
                source = "limits" if name in limits else "requests"
                raw = limits.get(name, requests.get(name))
                out.append(
                    ResourceAmount(
                        ref,
                        name,
                        quantity_or_none(raw),
                        raw,
                        (*ref.path, "resources", source, name),
                    )
                )
        return tuple(out)

    @cached_property
    def effective_requests(self) -> dict[str, Fraction]:
        """Kubernetes' effective request: max(any init step, sum of the running set)."""
        return effective_requests(self.amounts)

    def requested(self, prefixes: Sequence[str]) -> dict[str, Fraction]:
        return {r: n for r, n in self.effective_requests.items() if r.startswith(tuple(prefixes))}


def effective_requests(amounts: Sequence[ResourceAmount]) -> dict[str, Fraction]:
    # Sidecars (init containers with restartPolicy Always) keep running, so they add to
    # the regular containers and to every init container that starts after them.
    running: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    sidecars_so_far: dict[str, Fraction] = {}
    for a in amounts:
        if a.amount is None or a.container.field == "ephemeralContainers":
            continue
        r = a.resource
        if a.container.is_sidecar:
            sidecars_so_far[r] = sidecars_so_far.get(r, Fraction(0)) + a.amount
            running[r] = running.get(r, Fraction(0)) + a.amount
        elif a.container.field == "initContainers":
            step = a.amount + sidecars_so_far.get(r, Fraction(0))
            init_peak[r] = max(init_peak.get(r, Fraction(0)), step)
        else:
            running[r] = running.get(r, Fraction(0)) + a.amount
    return {
        r: max(running.get(r, Fraction(0)), init_peak.get(r, Fraction(0)))
        for r in dict.fromkeys([*running, *init_peak])
    }


@dataclass(frozen=True, slots=True)
class TemplateRule:
    """Where a custom resource keeps its pod templates (from a WorkloadKinds file)."""

    group: str
    kind: str
    templates: tuple[tuple[str, ...], ...]  # dotted paths; "*" is any key or item


def pod_views(
    obj: Mapping[str, Any], *, custom: Sequence[TemplateRule] = ()
) -> list[PodView] | None:
    """The pod specs of a workload object; None when the kind holds no pods."""
    kind = obj.get("kind")
    group = api_group(obj.get("apiVersion"))
    if kind == "Pod" and group == "":
        meta = as_dict(obj.get("metadata"))
        return [
            PodView(
                as_dict(obj.get("spec")),
                ("spec",),
                str_map(meta.get("labels")),
                str_map(meta.get("annotations")),
                ("metadata",),
            )
        ]
    builtin = BUILTIN_TEMPLATES.get((group, str(kind)))
    if builtin is not None:
        return [v for p in builtin for v in _templates_at(obj, p)]
    for rule in custom:
        if rule.kind == kind and rule.group == group:
            return [v for p in rule.templates for v in _templates_at(obj, p)]
    return None


def _templates_at(obj: Mapping[str, Any], pattern: Sequence[str | int]) -> Iterator[PodView]:
    for path, template in _walk(obj, tuple(pattern), ()):
        if isinstance(template, Mapping):
            meta = as_dict(template.get("metadata"))
            yield PodView(
                as_dict(template.get("spec")),
                (*path, "spec"),
                str_map(meta.get("labels")),
                str_map(meta.get("annotations")),
                (*path, "metadata"),
            )


def _walk(node: Any, pattern: tuple[str | int, ...], at: Path) -> Iterator[tuple[Path, Any]]:
    if not pattern:
        yield at, node
        return
    head, rest = pattern[0], pattern[1:]
    if head == "*":
        if isinstance(node, Mapping):
            for key in node:
                yield from _walk(node[key], rest, (*at, key))
        elif isinstance(node, list):
            for index, item in enumerate(node):
                yield from _walk(item, rest, (*at, index))
    elif isinstance(node, Mapping) and head in node:
        yield from _walk(node[head], rest, (*at, head))


def api_group(api_version: object) -> str:
    if not isinstance(api_version, str) or "/" not in api_version:
        return ""
    return api_version.split("/", 1)[0]


def as_dict(value: object) -> Mapping[str, Any]:
    if type(value) is dict:  # the common case, without the cost of an ABC check
        return value
    return value if isinstance(value, Mapping) else {}


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def str_map(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    # A null value (`key:` with nothing after it) decodes to "" in Kubernetes, not "None".
    return {
        str(k): v if isinstance(v, str) else "" if v is None else str(v) for k, v in value.items()
    }
