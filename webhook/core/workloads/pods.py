"""Pod specs inside any workload object, and what a pod asks of a node.

Checks never see kinds: a Deployment, a CronJob and a PyTorchJob all come down to one
or more `PodView`s, each with the path of its spec in the object, so a finding on a
controller names the same rule as the finding its Pods would get at admission.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from webhook.core.kit.dicts import as_dict
from webhook.core.kit.paths import Path, format_path
from webhook.core.kit.quantity import MAX_VALUE, quantity_or_none
from webhook.core.kit.text import shown
from webhook.core.workloads.requests import Count, container_role, effective_requests
from webhook.core.workloads.shapes import MAX_FAN_OUT as MAX_FAN_OUT  # re-exported

if TYPE_CHECKING:
    from webhook.core.workloads.podfields import Aliases

CONTAINER_FIELDS = ("initContainers", "containers", "ephemeralContainers")
# The longest resource name the apiserver takes: a qualified name, a DNS subdomain of
# 253 characters, "/", and 63 more. A longer one is cut for messages and comparisons
# (it is advertised by no node, and the apiserver rejects it anyway).
MAX_RESOURCE_NAME = 317


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
        "aliases",
        "amounts",
        "annotations",
        "containers",
        "labels",
        "memo",
        "metadata_path",
        "object_labels",
        "path",
        "spec",
        "tolerations_added",
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
        # The cluster's ExtendedResourceToleration admission plugin adds a toleration per
        # extended resource before the scheduler sees the Pod (the cluster profile says
        # whether it runs: webhook.core.supply.profiles.placement_spec reads this).
        self.tolerations_added = False
        # A cache, nothing else: facts derived once per pod for several checks (scheduling
        # constraints, the GPU access model by the policy rules that shaped it). What a
        # check is given to judge comes in its target and its Context, never in here.
        self.memo: dict[Hashable, Any] = {}
        # Items a custom kind's podFields added, and where they really are in the object
        # (webhook.core.workloads.podfields): the engine restores findings' paths by it.
        self.aliases: Aliases | None = None

    def where(self, *rel: str | int) -> Path:
        return (*self.path, *rel)

    def describe(self, *rel: str | int) -> str:
        return format_path(self.where(*rel))

    @property
    def effective_requests(self) -> dict[str, Count]:
        """Kubernetes' effective request: max(any init step, sum of the running set)."""
        if self._effective is None:
            self._effective = effective_requests(
                [
                    (container_role(a.container.field, a.container.spec), a.resource, a.amount)
                    for a in self.amounts
                    if a.amount is not None
                ]
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
