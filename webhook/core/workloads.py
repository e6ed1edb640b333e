"""Pod specs inside any workload object, and what a pod asks of a node.

Checks never see kinds: a Deployment, a CronJob and a PyTorchJob all come down to one
or more `PodView`s, each with the path of its spec in the object, so a finding on a
controller names the same rule as the finding its Pods would get at admission.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple

from webhook.core.paths import Path, format_path
from webhook.core.quantity import quantity_or_none

Count = int | Fraction  # resource counts: whole in practice, exact when not

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


class ContainerRef(NamedTuple):
    """A container and where it sits: `field` is containers, initContainers, ...

    A NamedTuple, not a frozen dataclass: every admission request builds a few of these,
    and a tuple is several times cheaper to make."""

    field: str
    position: int  # in its list (`index` would shadow tuple.index)
    spec: Mapping[str, Any]
    path: Path

    @property
    def name(self) -> str:
        name = self.spec.get("name")
        return name if isinstance(name, str) else f"#{self.position}"

    @property
    def label(self) -> str:
        kind = {"initContainers": "init container", "ephemeralContainers": "ephemeral container"}
        return f'{kind.get(self.field, "container")} "{self.name}"'

    @property
    def is_sidecar(self) -> bool:
        return self.field == "initContainers" and self.spec.get("restartPolicy") == "Always"


class ResourceAmount(NamedTuple):
    """One container's count of one resource, as the apiserver would see it."""

    container: ContainerRef
    resource: str
    amount: Count | None  # None: the value is not a quantity at all
    raw: object
    path: Path  # the field that holds the amount (limits, else requests)


class PodView:
    """A pod spec with its labels and its path in the enclosing object.

    Containers and their resource amounts are worked out once, up front: every check
    needs them, and (unlike functools.cached_property, which takes a lock on 3.11)
    plain attributes cost nothing to read on the admission path."""

    __slots__ = (
        "_effective",
        "amounts",
        "annotations",
        "containers",
        "labels",
        "memo",
        "metadata_path",
        "path",
        "spec",
    )

    def __init__(
        self,
        spec: Mapping[str, Any],
        path: Path,
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        metadata_path: Path,
    ) -> None:
        self.spec = spec
        self.path = path
        self.labels = labels
        self.annotations = annotations
        self.metadata_path = metadata_path
        self.containers = _containers(spec, path)
        self.amounts = _amounts(self.containers)
        self._effective: dict[str, Count] | None = None
        # Facts derived once per pod for several checks: scheduling constraints by name,
        # the GPU access model (webhook.core.access) by the policy rules that shaped it.
        self.memo: dict[Hashable, Any] = {}

    def where(self, *rel: str | int) -> Path:
        return (*self.path, *rel)

    def describe(self, *rel: str | int) -> str:
        return format_path(self.where(*rel))

    @property
    def effective_requests(self) -> dict[str, Count]:
        """Kubernetes' effective request: max(any init step, sum of the running set)."""
        if self._effective is None:
            self._effective = effective_requests(self.amounts)
        return self._effective


def _containers(spec: Mapping[str, Any], path: Path) -> tuple[ContainerRef, ...]:
    out: list[ContainerRef] = []
    for fname in CONTAINER_FIELDS:
        items = spec.get(fname)
        if type(items) is not list:
            continue
        for index, container in enumerate(items):
            if isinstance(container, Mapping):
                out.append(ContainerRef(fname, index, container, (*path, fname, index)))
    return tuple(out)


def _amounts(containers: tuple[ContainerRef, ...]) -> tuple[ResourceAmount, ...]:
    """Every extended resource each container asks for (limits, else requests)."""
    out: list[ResourceAmount] = []
    for ref in containers:
        resources = as_dict(ref.spec.get("resources"))
        limits, requests = as_dict(resources.get("limits")), as_dict(resources.get("requests"))
        for name in dict.fromkeys([*limits, *requests]) if requests else limits:
            if not isinstance(name, str) or "/" not in name:
                continue  # cpu, memory, hugepages-*: not extended resources
            source = "limits" if name in limits else "requests"
            raw = limits.get(name, requests.get(name))
            path = (*ref.path, "resources", source, name)
            out.append(ResourceAmount(ref, name, count_of(raw), raw, path))
    return tuple(out)


def effective_requests(amounts: Sequence[ResourceAmount]) -> dict[str, Count]:
    # Sidecars (init containers with restartPolicy Always) keep running, so they add to
    # the regular containers and to every init container that starts after them.
    running: dict[str, Count] = {}
    init_peak: dict[str, Count] = {}
    sidecars_so_far: dict[str, Count] = {}
    for a in amounts:
        if a.amount is None or a.container.field == "ephemeralContainers":
            continue
        r = a.resource
        if a.container.is_sidecar:
            sidecars_so_far[r] = sidecars_so_far.get(r, 0) + a.amount
            running[r] = running.get(r, 0) + a.amount
        elif a.container.field == "initContainers":
            step = a.amount + sidecars_so_far.get(r, 0)
            init_peak[r] = max(init_peak.get(r, 0), step)
        else:
            running[r] = running.get(r, 0) + a.amount
    if not init_peak:
        return running
    return {
        r: max(running.get(r, 0), init_peak.get(r, 0))
        for r in dict.fromkeys([*running, *init_peak])
    }


def count_of(raw: object) -> Count | None:
    """A resource count: an int when whole (nearly always), else the exact Fraction."""
    if type(raw) is int:
        return raw
    if type(raw) is str and raw.isdigit():
        return int(raw)
    value = quantity_or_none(raw)
    if value is not None and value.denominator == 1:
        return value.numerator
    return value


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
    fixed = _walk_fixed(obj, tuple(pattern))
    for path, template in fixed if fixed is not None else _walk(obj, tuple(pattern), ()):
        if isinstance(template, Mapping):
            meta = as_dict(template.get("metadata"))
            yield PodView(
                as_dict(template.get("spec")),
                (*path, "spec"),
                str_map(meta.get("labels")),
                str_map(meta.get("annotations")),
                (*path, "metadata"),
            )


def _walk_fixed(node: Any, pattern: tuple[str | int, ...]) -> list[tuple[Path, Any]] | None:
    """A pattern without "*" (every core kind) by plain lookups; None for a wildcard."""
    if "*" in pattern:
        return None
    for step in pattern:
        if not isinstance(node, Mapping) or step not in node:
            return []
        node = node[step]
    return [(pattern, node)]


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


def str_map(value: object) -> Mapping[str, str]:
    if type(value) is dict and all(type(v) is str for v in value.values()):
        return value  # labels as the apiserver sends them: no copy needed
    if not isinstance(value, Mapping):
        return {}
    return {
        str(k): "" if v is None else v if isinstance(v, str) else str(v) for k, v in value.items()
    }
