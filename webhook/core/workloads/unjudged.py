"""GPU workloads no policy would judge: findings about the shapes, not the pods.

Two ways an object's pods escape every check: a WorkloadKinds path that matches
nothing in it (a typo, or an API version that moved the field), and a custom kind no
WorkloadKinds entry names although it requests GPUs (RayService before it was shipped,
an in-house operator's CRD). Both are findings with the fix, never a silent pass.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from webhook.core.kit.paths import Path, format_path
from webhook.core.kit.text import brief, shown
from webhook.core.workloads.pods import CONTAINER_FIELDS, count_of
from webhook.core.workloads.shapes import KindShape, PodShape, unmatched_hint

UNMATCHED_RULE = "shape-path-unmatched"
UNCONFIGURED_RULE = "unconfigured-gpu-kind"
UNCONFIGURED_POLICY = "workload-kinds"
# Resource names that are GPUs whatever the policies say (docs/gpu-facts.md section 2):
# the scan runs before any policy, so it cannot use their parameters.
GPU_PREFIXES = ("nvidia.com/", "amd.com/", "gpu.intel.com/", "volcano.sh/vgpu", "aliyun.com/gpu")
NOT_GPUS = ("nvidia.com/hostdev",)  # an RDMA device the NVIDIA network operator names
BARE_GPU = "gpu"  # a ResourceItem's count (Dynamo, vLLM production-stack): nvidia.com/gpu
SCAN_BUDGET = 20_000  # values one scan visits: bounded whatever the object holds
_SKIP_TOP = frozenset({"metadata", "status"})


class Unjudged(NamedTuple):
    policy: str
    rule: str
    message: str
    path: Path


class GpuRequest(NamedTuple):
    path: Path  # the field holding the count
    resource: str
    raw: object
    gpu_field: bool  # a {name, quantity} mapping (SparkApplication), not a limits map


def unmatched(obj: Mapping[str, Any], rule: KindShape, shape: PodShape) -> Unjudged:
    """A required shape path found nothing: say where the object diverges from it."""
    at, hint = unmatched_hint(obj, shape.path)
    what = {"template": "pod templates", "pod": "pod specs", "containers": "containers"}
    dotted = ".".join(shape.path)
    return Unjudged(
        rule.source,
        UNMATCHED_RULE,
        f'WorkloadKinds "{rule.source}" reads the {what[shape.form]} of {rule.kind} '
        f"({rule.group}) at {dotted}, but this object has nothing there ({hint}): those "
        f"pods go unjudged; correct the path, or mark it optional: true if {rule.kind} "
        "may leave it out",
        at,
    )


def unconfigured(obj: Mapping[str, Any], *, kind: str, group: str) -> Unjudged | None:
    """A custom kind no WorkloadKinds entry names that requests GPUs somewhere."""
    found = gpu_request_in(obj)
    if found is None:
        return None
    version = shown(brief(obj.get("apiVersion")), 80)
    return Unjudged(
        UNCONFIGURED_POLICY,
        UNCONFIGURED_RULE,
        f"{kind} ({version}) requests {shown(found.resource, 80)}: {shown(brief(found.raw), 20)} "
        f"at {format_path(found.path)}, but {kind} is not a configured workload kind, so no "
        "policy judges the pods it creates; add it to a WorkloadKinds document: "
        + suggested_entry(group=group, kind=kind, found=found),
        found.path,
    )


def is_gpu(name: object) -> bool:
    return isinstance(name, str) and name.startswith(GPU_PREFIXES) and name not in NOT_GPUS


def gpu_request_in(obj: Mapping[str, Any]) -> GpuRequest | None:
    """The first GPU count above zero under a `limits`/`requests` map or in a
    {name, quantity} mapping, in at most SCAN_BUDGET values; None if there is none."""
    stack: list[tuple[Path, Any]] = [
        ((k,), v) for k, v in reversed(list(obj.items())) if k not in _SKIP_TOP and type(k) is str
    ]
    budget = SCAN_BUDGET
    while stack and budget > 0:
        path, node = stack.pop()
        budget -= 1
        if isinstance(node, Mapping):
            hit = _hit(path, node)
            if hit is not None:
                return hit
            stack.extend(((*path, k), v) for k, v in reversed(list(node.items())) if _deep(v))
        elif isinstance(node, list):
            stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(node))) if _deep(v))
    return None


def _deep(value: object) -> bool:
    return isinstance(value, Mapping | list)


def _hit(path: Path, node: Mapping[str, Any]) -> GpuRequest | None:
    name = node.get("name")
    if is_gpu(name) and _positive(node.get("quantity")):
        return GpuRequest((*path, "quantity"), str(name), node.get("quantity"), True)
    for key in ("limits", "requests"):
        amounts = node.get(key)
        if isinstance(amounts, Mapping):
            for resource, raw in amounts.items():
                if is_gpu(resource) and _positive(raw):
                    return GpuRequest((*path, key, resource), resource, raw, False)
                if resource == BARE_GPU and path[-1:] == ("resources",) and _positive(raw):
                    return GpuRequest((*path, key, resource), resource, raw, False)
    # A bare count in a `resources` mapping: the ResourceItem of Dynamo's and vLLM
    # production-stack's kinds, which their operators make nvidia.com/gpu.
    if path[-1:] == ("resources",) and _positive(node.get(BARE_GPU)):
        return GpuRequest((*path, BARE_GPU), BARE_GPU, node.get(BARE_GPU), False)
    return None


def _positive(raw: object) -> bool:
    count = count_of(raw)
    return count is not None and count > 0


def suggested_entry(*, group: str, kind: str, found: GpuRequest) -> str:
    """The WorkloadKinds entry that would read the pod holding `found`: list items
    become "*"; a PodTemplateSpec, an inline pod spec or a container of its own."""
    head = f"{{group: {group}, kind: {kind}, "
    if found.resource == BARE_GPU:
        flat = found.path[-2:-1] == ("resources",)
        container = found.path[:-2] if flat else found.path[:-3]
        form = "item" if flat else "requirements"
        return head + (
            f"containers: [{{path: {_dotted(container) or '.'}, gpuCount: {{form: {form}}}}}]}}"
        )
    if found.gpu_field:
        container = found.path[:-2]
        return head + f"containers: [{{path: {_dotted(container)}, gpu: {found.path[-2]}}}]}}"
    container, field = found.path[:-3], found.path[-3]
    if len(container) >= 2 and container[-2] in CONTAINER_FIELDS:
        pod = container[:-2]
        if len(pod) >= 2 and pod[-1] == "spec":
            return head + f"templates: [{_dotted(pod[:-1])}]}}"
        return head + f"podSpecs: [{{path: {_dotted(pod) or '.'}}}]}}"
    extra = "" if field == "resources" else f", resources: {field}"
    return head + f"containers: [{{path: {_dotted(container) or '.'}{extra}}}]}}"


def _dotted(path: Path) -> str:
    return ".".join("*" if isinstance(s, int) else str(s) for s in path)


def shape_findings(
    obj: Mapping[str, Any], missing: tuple[tuple[KindShape, PodShape], ...]
) -> Iterator[Unjudged]:
    for rule, shape in missing:
        yield unmatched(obj, rule, shape)
