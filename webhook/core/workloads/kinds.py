"""Where each kind keeps the pods it creates, by role, and how many of each.

A workload object (a Deployment, a Job, a PyTorchJob, a LeaderWorkerSet...) creates Pods
from one or more templates. Each template is a role (a PyTorchJob's Master and Worker, a
LeaderWorkerSet's leader and workers, a JobSet's replicated jobs, a RayCluster's head
and worker groups) with a replica count: `WorkloadView` holds them all, so a check can
judge a job's ranks together, and each role's `PodView` is what the pod checks judge.

Core kinds are written here (their API types are fixed); custom resources come from
WorkloadKinds documents (webhook.core.workloads.shapes), as data.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from webhook.core.kit.dicts import as_dict, str_map
from webhook.core.kit.paths import Path
from webhook.core.kit.text import brief
from webhook.core.workloads.podfields import Aliases, Budget, merged
from webhook.core.workloads.pods import CONTAINER_FIELDS, ContainerRef, PodView
from webhook.core.workloads.shapes import (
    ROOT,
    ContainerShape,
    Factor,
    GpuCount,
    KindShape,
    Pattern,
    PodShape,
    walk,
)

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
_PATHS: dict[tuple[str, str], tuple[tuple[str, ...], ...] | None] = {}
_PATHS_MAX = 256  # (apiVersion, kind) pairs remembered: a hostile input may name many


def template_paths(api_version: object, kind: object) -> tuple[tuple[str, ...], ...] | None:
    """BUILTIN_TEMPLATES of an object's apiVersion and kind, without parsing the group on
    every call (every admission request and every audited object asks)."""
    if type(api_version) is not str or type(kind) is not str:
        return None
    key = (api_version, kind)
    try:
        return _PATHS[key]
    except KeyError:
        group = api_version.split("/", 1)[0] if "/" in api_version else ""
        found = BUILTIN_TEMPLATES.get((group, kind))
        if len(_PATHS) < _PATHS_MAX:
            _PATHS[key] = found
        return found


# Kinds whose `spec.replicas` counts their Pods, defaulted to 1 by the apiserver
# (k8s.io/kubernetes pkg/apis/apps/v1/defaults.go SetDefaults_Deployment,
# SetDefaults_ReplicaSet, SetDefaults_StatefulSet; pkg/apis/core/v1/defaults.go
# SetDefaults_ReplicationController).
_SPEC_REPLICAS = frozenset(
    {("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet")}
    | {("", "ReplicationController")}
)


class Role(NamedTuple):
    """One kind of Pod a workload creates: its template, and how many of it."""

    name: str  # "" for a kind with one template (a Deployment); else as the object names it
    pod: PodView
    # Pods of this role the object asks for at once; None when the object does not fix
    # it (a DaemonSet: one per node; a custom kind whose WorkloadKinds entry gives no count).
    replicas: int | None
    path: Path  # where the role is declared (the template's holder, () for the object)
    # The role's own gang minimum where its kind has one (a Volcano task's minAvailable,
    # its replicas when absent); None otherwise.
    minimum: int | None = None


class WorkloadView(NamedTuple):
    """Every pod template of one object with its role and replica count: the `workload`
    target. `pods` are the distinct templates (two roles may share one: a
    LeaderWorkerSet without a leader template makes its leader from the worker's)."""

    obj: Mapping[str, Any]
    kind: str
    group: str
    roles: tuple[Role, ...]
    pods: list[PodView]
    unmatched: tuple[tuple[KindShape, PodShape], ...] = ()  # configured paths that found nothing
    shape: KindShape | None = None  # the WorkloadKinds entry that read it, if any

    @property
    def labels(self) -> Mapping[str, str]:
        """The object's own labels (what a policy's labelSelector is matched against)."""
        return str_map(as_dict(self.obj.get("metadata")).get("labels"))

    @property
    def aliases(self) -> Aliases | None:
        """Where the items its roles' podFields added really are (None: no such item)."""
        found = [p.aliases for p in self.pods if p.aliases is not None]
        if not found:
            return None
        return found[0] if len(found) == 1 else Aliases.joined(found)

    @property
    def replicas(self) -> int | None:
        """Pods of every role together; None if any role's count is not fixed."""
        total = 0
        for role in self.roles:
            if role.replicas is None:
                return None
            total += role.replicas
        return total


def pod_view(obj: Mapping[str, Any]) -> PodView:
    """A Pod object's own spec."""
    meta = as_dict(obj.get("metadata"))
    labels, annotations = str_map(meta.get("labels")), str_map(meta.get("annotations"))
    return PodView(as_dict(obj.get("spec")), ("spec",), labels, annotations, ("metadata",))


def builtin_pods(obj: Mapping[str, Any], patterns: tuple[tuple[str, ...], ...]) -> list[PodView]:
    """A core kind's pod templates (BUILTIN_TEMPLATES[kind])."""
    return [view for pattern in patterns for _, view in _templates_at(obj, pattern)]


def builtin(obj: Mapping[str, Any], key: tuple[str, str], pods: list[PodView]) -> WorkloadView:
    """A core kind's one role, from its pod templates."""
    replicas = _builtin_replicas(obj, key)
    roles = tuple(Role("", view, replicas, ()) for view in pods)
    return WorkloadView(obj, key[1], key[0], roles, pods)


def _builtin_replicas(obj: Mapping[str, Any], key: tuple[str, str]) -> int | None:
    spec = as_dict(obj.get("spec"))
    if key in _SPEC_REPLICAS:
        return count(spec.get("replicas"), 1)
    if key == ("batch", "Job"):
        return job_pods(spec)
    if key == ("batch", "CronJob"):
        return job_pods(as_dict(as_dict(spec.get("jobTemplate")).get("spec")))
    return None  # a DaemonSet (one per eligible node), a PodTemplate (creates nothing)


def job_pods(spec: Mapping[str, Any]) -> int | None:
    """The Pods a Job runs at once: `parallelism` (default 1), never more than the
    `completions` still to go (k8s.io/kubernetes pkg/controller/job: `wantActive`)."""
    parallelism = count(spec.get("parallelism"), 1)
    completions = count(spec.get("completions"), None)
    if parallelism is None or completions is None:
        return parallelism
    return min(parallelism, completions)


def count(value: object, default: int | None) -> int | None:
    """A replica count as the apiserver would take it: a whole number at least 0; a
    missing one is `default`; anything else (a string, a negative number) is unknown."""
    if value is None:
        return default
    if type(value) is int and value >= 0:
        return value
    return None


def configured(obj: Mapping[str, Any], rule: KindShape) -> WorkloadView:
    """A custom kind's roles, as its WorkloadKinds entry places them. Roles made from one
    template (a LeaderWorkerSet's leader from its worker template) share its PodView, and
    `pods` holds it once: a pod check judges each template once, whatever its roles."""
    roles: list[Role] = []
    unmatched: list[tuple[KindShape, PodShape]] = []
    templates: dict[Path, PodView] = {}
    budget = Budget()
    for shape in rule.pods:
        pattern, matches = shape.path, walk(obj, shape.path)
        if shape.fallback is not None and not any(isinstance(v, Mapping) for _, v in matches):
            pattern, matches = shape.fallback, walk(obj, shape.fallback)
        if not matches and not shape.optional:
            unmatched.append((rule, shape))
        for path, value in matches:
            if isinstance(value, Mapping):
                name, replicas, holder = role_of(obj, shape, path, pattern=pattern)
                views = _shaped(obj, shape, path, value, templates, budget)
                least = _minimum(obj, holder, shape, replicas)
                roles += [Role(name, v, replicas, holder, least) for v in views]
    pods = list({id(r.pod): r.pod for r in roles}.values())
    return WorkloadView(obj, rule.kind, rule.group, tuple(roles), pods, tuple(unmatched), rule)


def role_of(
    obj: Mapping[str, Any], shape: PodShape, path: Path, *, pattern: Pattern | None = None
) -> tuple[str, int | None, Path]:
    """The role a template matched at `path` stands for: its name, replica count and
    holder. `pattern` is what matched: the shape's path (the default) or its fallback,
    whose holder then holds the fields `role_at` and `replicas` name.

    The holder is what the pattern's last "*" matched (a PyTorchJob's
    `spec.pytorchReplicaSpecs.Worker`, a JobSet's `spec.replicatedJobs[0]`), else the
    object. The name is the shape's `role`, else the string at its `role_at`, else that
    "*"'s key, else the last step of the shape's path that names it. The count is the
    product of the shape's `replicas` factors: None (unknown) without any, or when one
    is unknown."""
    pattern = shape.path if pattern is None else pattern
    stars = [i for i, step in enumerate(pattern) if step == "*"]
    holder: Path = path[: stars[-1] + 1] if stars else ()
    held = _value_at(obj, holder)
    if shape.role is not None:
        return shape.role, _replicas(obj, held, shape.replicas), holder
    named = _get_from(obj, held, shape.role_at) if shape.role_at is not None else None
    if not (isinstance(named, str) and named):  # absent or not a name: as if not configured
        # found through the fallback, the role is still the one its own path names
        named = (
            _default_name(path, stars) if pattern == shape.path else _default_name(shape.path, [])
        )
    return named, _replicas(obj, held, shape.replicas), holder


def _minimum(
    obj: Mapping[str, Any], holder: Path, shape: PodShape, replicas: int | None
) -> int | None:
    """A role's own gang minimum (PodShape.minimum), its replica count when absent."""
    if shape.minimum is None:
        return None
    return count(_get_from(obj, _value_at(obj, holder), shape.minimum), replicas)


def _default_name(path: Path | Pattern, stars: list[int]) -> str:
    if stars:
        step = path[stars[-1]]
        if isinstance(step, str):
            return step
        before = path[stars[-1] - 1] if stars[-1] > 0 else ""
        return f"{before}[{step}]"
    named = [s for s in path if isinstance(s, str) and s not in ("template", "spec", "*")]
    return named[-1] if named else ""


def _replicas(
    obj: Mapping[str, Any], held: object, factors: tuple[Factor, ...] | None
) -> int | None:
    """The product of the factors, each read as `count` reads a replica count: a value
    that is not a whole number at least 0 (nor at least `less`) makes it unknown."""
    if factors is None:
        return None
    total = 1
    for factor in factors:
        value = factor.default
        if factor.path is not None:
            value = count(_get_from(obj, held, factor.path), factor.default)
        if value is None or value < factor.less:
            return None
        total *= value - factor.less
    return total


def _get_from(obj: Mapping[str, Any], held: object, steps: Pattern) -> object:
    """The value at `steps` (plain keys, no "*"): from the holder, or after "$" the root."""
    if steps[:1] == (ROOT,):
        return _get(obj, steps[1:])
    return _get(as_dict(held), steps)


def _value_at(obj: Mapping[str, Any], path: Path) -> object:
    """The value at a path `walk` found: list indexes are ints, map keys strings."""
    node: object = obj
    for step in path:
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and 0 <= step < len(node) else None
            continue
        found = as_dict(node).get(step)
        if found is None and isinstance(node, Mapping):
            # walk names a YAML key that is no string (1, true) as kubectl would send it
            odd = (v for k, v in node.items() if type(k) is not str and brief(k) == step)
            found = next(odd, None)
        node = found
    return node


def _shaped(
    obj: Mapping[str, Any],
    shape: PodShape,
    path: Path,
    value: Mapping[str, Any],
    templates: dict[Path, PodView],
    budget: Budget,
) -> Iterator[PodView]:
    if shape.form == "template":
        # one view per template, however many roles it makes (a fallback's, its own)
        if path not in templates:
            templates[path] = next(view for _, view in _templates_at(obj, (), at=(path, value)))
        yield templates[path]
        return
    holders = [_holder(obj, path, value, at) for at in shape.labels] or [((*path,), {})]
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    for _, holder in holders:
        labels.update(str_map(holder.get("labels")))
        annotations.update(str_map(holder.get("annotations")))
    spec: Mapping[str, Any] = value if shape.form == "pod" else {}
    extra = _extra_containers(spec, path, value, shape)
    if not shape.fields:
        yield PodView(spec, path, labels, annotations, holders[-1][0], extra)
        return
    spec, extra, aliases = merged(obj, shape, path, value, spec, extra, budget)
    view = PodView(spec, path, labels, annotations, holders[-1][0], extra)
    view.aliases = aliases or None
    yield view


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
    if cshape.gpu_count is not None:
        spec["resources"] = item_resources(as_dict(_get(item, cshape.resources)), cshape.gpu_count)
        return ContainerRef("containers", position, spec, at, (*at, *cshape.resources))
    if cshape.resources != ("resources",):
        spec["resources"] = as_dict(_get(item, cshape.resources))
        return ContainerRef("containers", position, spec, at, (*at, *cshape.resources))
    return ContainerRef("containers", position, spec, at)


def item_resources(resources: Mapping[str, Any], how: GpuCount) -> dict[str, Any]:
    """A ResourceRequirements from the kind's ResourceItems, as its operator builds one:
    `gpu` becomes the resource `gpuType` names (nvidia.com/gpu by default), `custom`
    entries keep their names (ai-dynamo/dynamo deploy/operator controller_common
    resource.go GetResourcesConfig, getGPUResourceName; vllm-project/production-stack
    operator/internal/controller/resources.go buildResourceRequirements, which puts the
    GPU count in both requests and limits)."""
    out: dict[str, Any] = {}
    if how.form == "item":  # one ResourceItem for both sides; requests/limits override
        flat = _item({k: v for k, v in resources.items() if k not in _SIDES}, how)
        for side in _SIDES:
            extra = resources.get(side)
            out[side] = {**flat, **(_item(extra, how) if isinstance(extra, Mapping) else {})}
        return out
    for side in _SIDES:
        item = resources.get(side)
        if isinstance(item, Mapping):
            out[side] = _item(item, how)
    return out


_SIDES = ("requests", "limits")


def _item(item: Mapping[str, Any], how: GpuCount) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in item.items():
        if key == how.key:
            name = item.get(how.name_key) if how.name_key else None
            out[name if isinstance(name, str) and name else how.default] = value
        elif key == how.custom_key and isinstance(value, Mapping):
            out.update(value)
        elif key != how.name_key:
            out[key] = value
    return out


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
) -> Iterator[tuple[Path, PodView]]:
    """Each PodTemplateSpec at `pattern` (or the one at `at`), with its path."""
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
            yield path, view
