"""Pod specs inside any workload object, and what a pod asks of a node.

Checks never see kinds: a Deployment, a CronJob and a PyTorchJob all come down to one
or more `PodView`s, each with the path of its spec in the object, so a finding on a
controller names the same rule as the finding its Pods would get at admission.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from webhook.core.kit.dicts import api_group, as_dict, str_map
from webhook.core.kit.paths import Path, format_path
from webhook.core.kit.quantity import MAX_VALUE, quantity_or_none
from webhook.core.kit.text import shown
from webhook.core.workloads.requests import Count, effective_requests, role_of
from webhook.core.workloads.shapes import MAX_FAN_OUT as MAX_FAN_OUT  # re-exported
from webhook.core.workloads.shapes import ROOT, ContainerShape, KindShape, PodShape, walk

CONTAINER_FIELDS = ("initContainers", "containers", "ephemeralContainers")
# The longest resource name the apiserver takes: a qualified name, a DNS subdomain of
# 253 characters, "/", and 63 more. A longer one is cut for messages and comparisons
# (it is advertised by no node, and the apiserver rejects it anyway).
MAX_RESOURCE_NAME = 317
# PodView.memo keys the engine and pod_views fill: the subject's namespace (what a DRA
# claim reference resolves in), and the ResourceClaim(Template) a view stands for.
NAMESPACE = "subject-namespace"
CLAIM_OBJECT = "dra-claim-object"
# A Namespace that sets the DRA admin-access label; REQUEST: the Subject, when it
# carries a request's userInfo and oldObject (the engine puts it there).
NAMESPACE_OBJECT = "dra-namespace-object"
REQUEST = "subject-request"
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"  # k8s.io/api resource/v1

# Where core kinds keep their pod template (a PodTemplateSpec: metadata + spec).
# Keyed by (API group, kind); custom resources come from the WorkloadKinds config.
BUILTIN_TEMPLATES: dict[tuple[str, str], tuple[tuple[str, ...], ...]] = {
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
    # Containers of a custom kind's own shape keep their counts elsewhere: the
    # ResourceRequirements' path (Trainer's resourcesPerNode), or the path of the one
    # count of a {name, quantity} field (SparkApplication's gpu).
    resources_path: Path | None = None
    count_path: Path | None = None

    @property
    def name(self) -> str:
        name = self.spec.get("name")
        return name if isinstance(name, str) else f"#{self.position}"

    @property
    def label(self) -> str:
        kind = {"initContainers": "init container", "ephemeralContainers": "ephemeral container"}
        return f'{kind.get(self.field, "container")} "{shown(self.name, 63)}"'

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
        "object_labels",
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
        extra: tuple[ContainerRef, ...] = (),
    ) -> None:
        self.spec = spec
        self.path = path
        self.labels = labels
        self.annotations = annotations
        self.metadata_path = metadata_path
        # The enclosing object's own labels where the pod's come from a template: a
        # label put there instead (a Deployment's metadata) is named in the fix.
        self.object_labels: Mapping[str, str] = {}
        self.containers = _containers(spec, path) + extra if extra else _containers(spec, path)
        self.amounts = _amounts(self.containers)
        self._effective: dict[str, Count] | None = None
        # Facts derived once per pod for several checks: scheduling constraints by name,
        # the GPU access model (webhook.core.access.model) by the policy rules that shaped it.
        self.memo: dict[Hashable, Any] = {}

    def where(self, *rel: str | int) -> Path:
        return (*self.path, *rel)

    def describe(self, *rel: str | int) -> str:
        return format_path(self.where(*rel))

    @property
    def effective_requests(self) -> dict[str, Count]:
        """Kubernetes' effective request: max(any init step, sum of the running set)."""
        if self._effective is None:
            self._effective = effective_requests(
                (role_of(a.container.field, a.container.spec), a.resource, a.amount)
                for a in self.amounts
                if a.amount is not None
            )
        return self._effective


def _containers(spec: Mapping[str, Any], path: Path) -> tuple[ContainerRef, ...]:
    out: list[ContainerRef] = []
    for fname in CONTAINER_FIELDS:
        items = spec.get(fname)
        if type(items) is not list:
            continue
        for index, container in enumerate(items):
            if type(container) is dict or isinstance(container, Mapping):  # ABC check: slow
                out.append(ContainerRef(fname, index, container, (*path, fname, index)))
    return tuple(out)


def _extended(limits: Mapping[Any, Any], requests: Mapping[Any, Any]) -> list[Any]:
    """The extended resource names of limits, then those only in requests (cpu, memory,
    hugepages-* have no "/")."""
    names = [n for n in limits if isinstance(n, str) and "/" in n]
    if requests:
        names += [n for n in requests if isinstance(n, str) and "/" in n and n not in limits]
    return names


def _amounts(containers: tuple[ContainerRef, ...]) -> tuple[ResourceAmount, ...]:
    """Every extended resource each container asks for (limits, else requests)."""
    out: list[ResourceAmount] = []
    for ref in containers:
        resources = as_dict(ref.spec.get("resources"))
        limits, requests = as_dict(resources.get("limits")), as_dict(resources.get("requests"))
        for name in _extended(limits, requests):
            source = "limits" if name in limits else "requests"
            raw = limits.get(name, requests.get(name))
            if ref.count_path is not None:
                path = ref.count_path
            elif ref.resources_path is not None:
                path = (*ref.resources_path, source, name)
            else:
                path = (*ref.path, "resources", source, name)
            resource = name if len(name) <= MAX_RESOURCE_NAME else shown(name, MAX_RESOURCE_NAME)
            out.append(ResourceAmount(ref, resource, count_of(raw), raw, path))
    return tuple(out)


def count_of(raw: object) -> Count | None:
    """A resource count: an int when whole (nearly always), else the exact Fraction."""
    if type(raw) is int:
        return raw if -MAX_VALUE <= raw <= MAX_VALUE else None
    if type(raw) is str and len(raw) <= 18 and raw.isdigit() and raw.isascii():
        return int(raw)  # at most 18 ASCII digits: within range, and int() cannot fail
    value = quantity_or_none(raw)
    if value is not None and value.denominator == 1:
        return value.numerator
    return value


class Workload(NamedTuple):
    """The pod specs of one object, and the shape paths that found nothing in it."""

    pods: list[PodView]
    unmatched: tuple[tuple[KindShape, PodShape], ...] = ()
    shape: KindShape | None = None  # the WorkloadKinds entry that read it, if any


def pod_views(obj: Mapping[str, Any], *, custom: Sequence[KindShape] = ()) -> list[PodView] | None:
    """The pod specs of a workload object; None when the kind holds no pods."""
    found = workload_of(obj, custom=custom)
    return None if found is None else found.pods


def workload_of(obj: Mapping[str, Any], *, custom: Sequence[KindShape] = ()) -> Workload | None:
    """The pod specs of a workload object, with the configured paths that matched
    nothing; None when the kind is neither a core workload nor a configured one."""
    kind = obj.get("kind")
    group = api_group(obj.get("apiVersion"))
    if kind == "Pod" and group == "":
        meta = as_dict(obj.get("metadata"))
        labels, annotations = str_map(meta.get("labels")), str_map(meta.get("annotations"))
        spec = as_dict(obj.get("spec"))
        return Workload([PodView(spec, ("spec",), labels, annotations, ("metadata",))])
    if group == "resource.k8s.io" and kind in ("ResourceClaim", "ResourceClaimTemplate"):
        # A DRA claim holds no pod, but the dra-claims check judges it: one view without
        # containers (no other check finds anything in it) that carries the object.
        meta = as_dict(obj.get("metadata"))
        view = PodView({}, ("spec",), str_map(meta.get("labels")), {}, ("metadata",))
        view.memo[CLAIM_OBJECT] = obj
        return Workload([view])
    if kind == "Namespace" and group == "":
        # Judged only when it carries the admin-access label (dra-guardrails): any other
        # Namespace holds nothing a check reads, and stays "not a workload".
        meta = as_dict(obj.get("metadata"))
        labels = str_map(meta.get("labels"))
        if labels.get(ADMIN_ACCESS_LABEL) != "true":
            return None
        view = PodView({}, ("spec",), labels, {}, ("metadata",))
        view.memo[NAMESPACE_OBJECT] = obj
        return Workload([view])
    builtin = BUILTIN_TEMPLATES.get((group, kind if type(kind) is str else ""))
    if builtin is not None:
        return Workload([v for p in builtin for v in _templates_at(obj, p)])
    for rule in custom:
        if rule.kind == kind and rule.group == group:
            return _custom(obj, rule)
    return None


def _custom(obj: Mapping[str, Any], rule: KindShape) -> Workload:
    pods: list[PodView] = []
    unmatched: list[tuple[KindShape, PodShape]] = []
    for shape in rule.pods:
        matches = walk(obj, shape.path)
        if not matches and not shape.optional:
            unmatched.append((rule, shape))
        for path, value in matches:
            if isinstance(value, Mapping):
                pods.extend(_shaped(obj, shape, path, value))
    return Workload(pods, tuple(unmatched), rule)


def _shaped(
    obj: Mapping[str, Any], shape: PodShape, path: Path, value: Mapping[str, Any]
) -> Iterator[PodView]:
    if shape.form == "template":
        yield from _templates_at(obj, (), at=(path, value))
        return
    holders = [_holder(obj, path, value, at) for at in shape.labels] or [((*path,), {})]
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    for _, holder in holders:
        labels.update(str_map(holder.get("labels")))
        annotations.update(str_map(holder.get("annotations")))
    spec: Mapping[str, Any] = value if shape.form == "pod" else {}
    extra = _extra_containers(spec, path, value, shape)
    yield PodView(spec, path, labels, annotations, holders[-1][0], extra)


def _holder(
    obj: Mapping[str, Any], path: Path, value: Mapping[str, Any], at: tuple[str, ...]
) -> tuple[Path, Mapping[str, Any]]:
    """The mapping that holds labels and annotations: relative to the match, or from
    the object's root when the path starts with "$"."""
    if at[:1] == (ROOT,):
        found = walk(obj, at[1:])
        return (at[1:], as_dict(found[0][1])) if found else (at[1:], {})
    found = walk(value, at, path)
    return (found[0][0], as_dict(found[0][1])) if found else ((*path, *at), {})


def _extra_containers(
    spec: Mapping[str, Any], path: Path, value: Mapping[str, Any], shape: PodShape
) -> tuple[ContainerRef, ...]:
    """Containers in fields of the kind's own (InferenceService's `model`, the Spark
    driver itself, the Trainer's `trainer`), after the pod spec's usual lists."""
    out: list[ContainerRef] = []
    position = sum(len(spec[f]) for f in CONTAINER_FIELDS if type(spec.get(f)) is list)
    for cshape in shape.containers:
        for cpath, found in walk(value, cshape.path, path):
            items = enumerate(found) if isinstance(found, list) else [(None, found)]
            for index, item in items:
                if not isinstance(item, Mapping):
                    continue
                at = cpath if index is None else (*cpath, index)
                out.append(_container_ref(item, at, position, cshape))
                position += 1
    return tuple(out)


def _container_ref(
    item: Mapping[str, Any], at: Path, position: int, cshape: ContainerShape
) -> ContainerRef:
    """A container of the kind's own shape, read as a core container: its resources
    moved to `resources` (a ResourceRequirements) so every check reads them one way."""
    spec = dict(item)
    if not isinstance(spec.get("name"), str):
        named = [s for s in at if isinstance(s, str)]
        spec["name"] = named[-1] if named else f"#{position}"
    if cshape.gpu is not None:
        gpu = as_dict(_get(item, cshape.gpu))
        name, quantity = gpu.get("name"), gpu.get("quantity")
        spec["resources"] = {"limits": {name: quantity}} if isinstance(name, str) else {}
        return ContainerRef("containers", position, spec, at, None, (*at, *cshape.gpu, "quantity"))
    if cshape.resources != ("resources",):
        spec["resources"] = as_dict(_get(item, cshape.resources))
        return ContainerRef("containers", position, spec, at, (*at, *cshape.resources))
    return ContainerRef("containers", position, spec, at)


def _get(node: Mapping[str, Any], steps: tuple[str, ...]) -> object:
    value: object = node
    for step in steps:
        value = as_dict(value).get(step)
    return value


def _templates_at(
    obj: Mapping[str, Any],
    pattern: Sequence[str],
    *,
    at: tuple[Path, Any] | None = None,
) -> Iterator[PodView]:
    for path, template in [at] if at is not None else walk(obj, tuple(pattern)):
        if isinstance(template, Mapping):
            meta = as_dict(template.get("metadata"))
            view = PodView(
                as_dict(template.get("spec")),
                (*path, "spec"),
                str_map(meta.get("labels")),
                str_map(meta.get("annotations")),
                (*path, "metadata"),
            )
            view.object_labels = str_map(as_dict(obj.get("metadata")).get("labels"))
            yield view
