"""Workload shapes: where a custom resource keeps the pods it will create.

A WorkloadKinds entry says, as data, where the pod-level and container-level fields of
a kind live: PodTemplateSpecs (metadata + spec), pod specs held inline (KServe's
predictor), and containers of their own shape (NIMService's `spec`, Spark's
`spec.driver` with `gpu: {name, quantity}`, Kubeflow Trainer's `spec.trainer` with
`resourcesPerNode`). `webhook.core.workloads.pods` turns each match into a PodView.

Paths are patterns of steps ("*" is any map key or list item). Label paths are relative
to the match unless they start with "$" (the object's root).

Each place is a role (webhook.core.workloads.kinds.Role) with a name and a Pod count the
entry may give as data: a literal name or a field naming it, and the count as a product
of factors read from the object (a PyTorchJob's `replicas`, a LeaderWorkerSet's
`replicas` x (`size` - 1)), each with the default its upstream API gives when absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from webhook.core.kit.paths import Path, format_path
from webhook.core.kit.text import brief, shown
from webhook.errors import WorkloadError

Pattern = tuple[str, ...]
Form = Literal["template", "pod", "containers"]
# How a field of the object joins a pod spec (webhook.core.workloads.podfields).
Joining = Literal["items", "envMap", "hostPathVolume"]
# Which pod-spec field it joins: the pod's, or the role's main container's (its first
# container shape: the container the operator fills, Spark's findContainer).
PodTarget = Literal["volumes", "container.env", "container.envFrom", "container.volumeMounts"]
ROOT = "$"  # a label path that starts here is read from the object's root
# What one "*" of a shape path may match in one object. No workload kind has more
# than a few dozen replica groups; an object with more is refused, not judged in part.
MAX_FAN_OUT = 1000


@dataclass(frozen=True, slots=True)
class GpuCount:
    """Resources that count GPUs as a bare `key: "1"` (a ResourceItem of Dynamo's or vLLM
    production-stack's), the resource named at `name_key`, else `default`; `custom_key`
    holds more resources by their Kubernetes names. `form` "requirements": requests and
    limits each a ResourceItem (Dynamo); "item": the mapping is one, for both (vLLM)."""

    form: Literal["requirements", "item"] = "requirements"
    key: str = "gpu"
    name_key: str | None = "gpuType"
    default: str = "nvidia.com/gpu"
    custom_key: str | None = "custom"


@dataclass(frozen=True, slots=True)
class ContainerShape:
    """Container-shaped mappings (or lists of them) at `path`, relative to the pod spec
    they join; () is the pod mapping itself (Spark's driver is pod and container)."""

    path: Pattern = ()
    resources: Pattern = ("resources",)  # a ResourceRequirements: limits, requests
    gpu: Pattern | None = None  # a {name, quantity} field instead (SparkApplication)
    gpu_count: GpuCount | None = None  # a bare GPU count in the resources (Dynamo, vLLM)


@dataclass(frozen=True, slots=True)
class Factor:
    """One factor of a role's Pod count. Without a `path`, the constant `default`; else
    the whole number at `path` (relative to the role's holder, from the object's root
    when it starts with "$"), `default` when the field is absent (None: unknown), minus
    `less` (a LeaderWorkerSet's group holds `size - 1` workers)."""

    path: Pattern | None = None
    default: int | None = 1
    less: int = 0


@dataclass(frozen=True, slots=True)
class PodField:
    """A field of the object the operator makes into a pod-spec field of this role's
    Pods (Spark's top-level `volumes` mounted by the driver, its `envVars` map, a
    NIMService's `storage.hostPath`). `source` is relative to the match, or from the
    object's root after "$".

    items: a list of the target field's own items, after the pod's; with `only_mounted`
    a volume joins only when a container of the role mounts it (Spark's addVolumes).
    envMap: a map of name -> value, each an env variable (a value that is no string, a
    reference such as Spark's envSecretKeyRefs, as a `valueFrom`); keys filtered by `key_prefix`
    and `key_suffix`, the name what lies between (Spark's `spark.executorEnv.X`).
    hostPathVolume: a host path (a string: the volume `name`, mounted at `mount_path` in
    the main container when given), or a map of them filtered as envMap's keys, the
    volume named by what lies between (Spark's `spark.kubernetes.driver.volumes.hostPath.
    NAME.options.path`)."""

    source: Pattern
    target: PodTarget
    joining: Joining = "items"
    only_mounted: bool = False
    key_prefix: str = ""
    key_suffix: str = ""
    name: str | None = None
    mount_path: str | None = None


@dataclass(frozen=True, slots=True)
class PodShape:
    """One place pods come from: `form` says what sits at `path`.

    template: a PodTemplateSpec; pod: a pod spec inline; containers: container-shaped
    mappings with no pod spec of their own (the pod-level fields come from elsewhere)."""

    form: Form
    path: Pattern
    containers: tuple[ContainerShape, ...] = ()
    labels: tuple[Pattern, ...] = ()  # mappings holding labels and annotations, merged
    optional: bool = False  # a required path that matches nothing is a finding
    role: str | None = None  # the role's name, as the kind's API names it ("head")
    role_at: Pattern | None = None  # else a string field naming it (a JobSet's `name`)
    replicas: tuple[Factor, ...] | None = None  # Pods = their product; None: unknown
    # templates: a PodTemplateSpec that serves this role when `path` matches nothing (a
    # LeaderWorkerSet without leaderTemplate makes its leader from workerTemplate).
    fallback: Pattern | None = None
    # podSpecs and containers: fields of the object that join this role's pod spec.
    fields: tuple[PodField, ...] = ()
    # The role's own gang minimum (a Volcano task's `minAvailable`), read from its
    # holder as a replica count, its replicas when absent (webhook.core.jobs.model).
    minimum: Pattern | None = None


@dataclass(frozen=True, slots=True)
class GangField:
    """A field of the kind's own that asks its operator for a gang (a PodGroup): present
    at `path` (from the object's root), with the Pods that must start together at
    `min_available` (relative to it). Absent (or 0 where `zero_is_unset`: an int32 with
    omitempty), that count is the job's Pods (`unset` worldSize) or the sum of its
    roles' own minimums (`roleMinimums`: Volcano's patchDefaultMinAvailable)."""

    path: Pattern
    min_available: Pattern | None = None
    unset: Literal["worldSize", "roleMinimums"] = "worldSize"
    zero_is_unset: bool = False


@dataclass(frozen=True, slots=True)
class PodLabels:
    """The labels a kind's operator sets on the Pods it makes: the `job` keys' values
    name one gang of Pods, `role` and `index` a rank in it (webhook.core.jobs.members)."""

    job: tuple[str, ...]
    role: str | None = None
    index: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class JobShape:
    """A kind whose roles are the ranks of one distributed job (webhook.core.jobs):
    its gang fields, the Pods one gang holds (`group`: a LeaderWorkerSet's group of
    `size`; None: every Pod of the object), its processes per node and the roles that
    run them, and whether its roles are meant alike (a RayCluster's worker groups are
    not: Ray schedules tasks onto unlike groups on purpose)."""

    gang: tuple[GangField, ...] = ()
    group: tuple[Factor, ...] | None = None
    nproc_per_node: Pattern | None = None
    nproc_roles: tuple[str, ...] = ()  # () every role
    ranks_alike: bool = True
    pod_labels: PodLabels | None = None


@dataclass(frozen=True, slots=True)
class KindShape:
    """Every place one custom kind keeps pods, from one WorkloadKinds document."""

    group: str
    kind: str
    pods: tuple[PodShape, ...]
    source: str = "workload-kinds"  # the WorkloadKinds document: a finding names it
    unmatched_action: Literal["deny", "warn", "dryrun"] = "warn"
    job: JobShape | None = None  # a distributed job's gang and process fields


def walk(node: Any, pattern: Pattern, at: Path = ()) -> list[tuple[Path, Any]]:
    """Every value at `pattern` ("*": any key or item) in document order, level by level:
    no recursion, and a "*" that matches more than MAX_FAN_OUT entries is a WorkloadError."""
    if "*" not in pattern:  # every core kind: plain lookups
        for step in pattern:
            if not isinstance(node, Mapping) or step not in node:
                return []
            node = node[step]
        return [((*at, *pattern), node)]
    level: list[tuple[Path, Any]] = [(at, node)]
    for step in pattern:
        found: list[tuple[Path, Any]] = []
        for path, value in level:
            if step != "*":
                if isinstance(value, Mapping) and step in value:
                    found.append(((*path, step), value[step]))
            elif isinstance(value, Mapping):
                found.extend(((*path, _step(key)), item) for key, item in value.items())
            elif isinstance(value, list):
                found.extend(((*path, index), item) for index, item in enumerate(value))
            if len(found) > MAX_FAN_OUT:
                where = format_path(path) or "the object"
                raise WorkloadError(
                    f"{where}: more than {MAX_FAN_OUT} entries match the pod template path "
                    f"{'.'.join(pattern)}: too many pod templates to judge"
                )
        level = found
    return level


def _step(key: object) -> str | int:
    # JSON keys are strings; YAML's may be numbers, booleans or null, which
    # kubectl writes as strings when it sends the object.
    return key if type(key) is str else brief(key)


def unmatched_hint(obj: Mapping[str, Any], pattern: Pattern) -> tuple[Path, str]:
    """Where a pattern stops matching, and what is there instead: the deepest prefix
    that matches, and the keys it holds (`spec has: pytorchReplicaSpecs, runPolicy`)."""
    for depth in range(len(pattern) - 1, -1, -1):
        found = walk(obj, pattern[:depth])
        if not found:
            continue
        path, value = found[0]
        where = format_path(path) or "the object"
        if isinstance(value, Mapping):
            keys = [shown(str(k), 40) for k in list(value)[:8]]
            more = ", ..." if len(value) > 8 else ""
            return path, f"{where} has: {', '.join(keys) or 'nothing'}{more}"
        return path, f"{where} is a {type(value).__name__}, not a mapping"
    return (), "the object has nothing there"
