"""GPU shares: fractional and vGPU requests, which put a pod on a GPU others use too.

A share is demand for part of a GPU that the device plugin does not count as a whole
device: the scheduler of the sharing system packs several pods onto one physical GPU
and they take turns on its compute. What each system reads (docs/policies.md, "GPU
shares", has the sources):

- KAI scheduler: pod annotations `gpu-fraction` (of one device's memory, 0 < f < 1) or
  `gpu-memory` (MiB), per device however many `gpu-fraction-num-devices` asks for, and
  `mps: "true"` (the share runs under MPS); the container is the one
  `gpu-fraction-container-name` names, else the first (NVIDIA/KAI-Scheduler
  docs/gpu-sharing/README.md, pkg/common/constants/constants.go,
  pkg/binder/plugins/gpusharing/gpu-request).
- HAMi: container resources `nvidia.com/gpumem` (MiB per device),
  `nvidia.com/gpumem-percentage`, `nvidia.com/gpucores` beside `nvidia.com/gpu`;
  `gpucores: 100` asks for a device of its own, and so does a bare `nvidia.com/gpu` or
  `gpumem-percentage: 100` without gpucores (Project-HAMi/HAMi examples/nvidia,
  pkg/device/nvidia/device.go: defaultExclusiveCoreIfNeeded, "Coresreq=100 indicates it
  want this card exclusively"). The pod annotation `nvidia.com/vgpu-mode: mig` asks for
  a MIG slice of at least that memory instead. Hygon's vDCU is the same with
  `hygon.com/dcunum|dcumem|dcucores` (HAMi examples/hygon).
- Volcano vGPU (HAMi-core): `volcano.sh/vgpu-number`, `volcano.sh/vgpu-memory` (MiB),
  `volcano.sh/vgpu-memory-percentage`, `volcano.sh/vgpu-cores`, annotation
  `volcano.sh/vgpu-mode: mig` (volcano docs/user-guide/how_to_use_volcano_vgpu.md,
  pkg/scheduler/api/devices/config/vgpu.go); the older GPU share,
  `volcano.sh/gpu-memory` in MiB (docs/user-guide/how_to_use_gpu_sharing.md).

Worked out once per pod view (memoised in `PodView.memo`); a pod with none of these
names costs three annotation lookups and one pass over its resource amounts. Values are
parsed with bounded patterns: nothing here is cached by user text or grows with it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Literal, NamedTuple

from webhook.core.kit.paths import Path
from webhook.core.kit.text import shown
from webhook.core.workloads.pods import ContainerRef, PodView, ResourceAmount

ShareMode = Literal["time-slicing", "mps", "mig"]
Mechanism = Literal["KAI scheduler", "HAMi", "Volcano vGPU", "Volcano GPU share"]


class Share(NamedTuple):
    """One container's request for part of a GPU, and the field that asks for it."""

    mechanism: Mechanism
    container: ContainerRef | None  # None: the annotation names a container the pod lacks
    path: Path  # the field that makes it a share (annotation or resource)
    field: str  # that field in a message's words: 'annotation gpu-fraction="0.5"'
    resource: str  # what the nodes it lands on advertise (its devices' memory is there)
    mode: ShareMode
    memory_mib: Fraction | None  # per device, when the request says it in MiB
    memory_field: str  # the field that gives memory_mib or fraction, in words
    fraction: Fraction | None  # of one device's memory, when it says that instead
    problem: str = ""  # why a value the memory depends on cannot be read, in words


_MIB = re.compile(r"[0-9]{1,12}")  # a whole number of MiB, as the systems parse it
_DECIMAL = re.compile(r"[0-9]{0,6}(?:\.[0-9]{1,12})?")
_MEMO = "gpu-shares"  # the memo key: a constant, never user text
# The pod annotations that make a KAI share (it requests no resource at all): whatever
# skips pods without a GPU channel (webhook.core.engine.prefilter) must read these too.
SHARE_ANNOTATIONS = frozenset({"gpu-fraction", "gpu-memory"})


def gpu_shares(pod: PodView) -> tuple[Share, ...]:
    """Every GPU share the pod asks for (memoised per pod view)."""
    found: tuple[Share, ...] | None = pod.memo.get(_MEMO)
    if found is None:
        shares: list[Share] = []
        annotations = pod.annotations
        if annotations and not SHARE_ANNOTATIONS.isdisjoint(annotations):
            shares.append(_kai(pod, annotations))
        by_container: dict[int, dict[str, ResourceAmount]] = {}
        for a in pod.amounts:
            if a.resource in _SHARE_NAMES:
                by_container.setdefault(id(a.container), {})[a.resource] = a
        for amounts in by_container.values():
            shares.extend(_vgpu(pod, amounts))
        found = pod.memo[_MEMO] = tuple(shares)
    return found


def _kai(pod: PodView, annotations: Mapping[str, str]) -> Share:
    meta = (*pod.metadata_path, "annotations")
    wanted = annotations.get("gpu-fraction-container-name")
    regular = [c for c in pod.containers if c.field == "containers"]
    if wanted is not None:
        container = next((c for c in pod.containers if c.name == wanted), None)
    else:
        container = regular[0] if regular else None
    mode: ShareMode = "mps" if annotations.get("mps") == "true" else "time-slicing"
    key = "gpu-memory" if "gpu-memory" in annotations else "gpu-fraction"
    raw = annotations[key]
    words = f'annotation {key}="{shown(raw, 40)}"'
    memory = fraction = None
    problem = ""
    if key == "gpu-memory":
        memory = _mib(raw)
        if memory is None:
            problem = f"{words} is not a whole number of MiB above zero"
    else:
        fraction = _decimal(raw)
        if fraction is None or not 0 < fraction < 1:
            fraction, problem = None, f"{words} is not a number between 0 and 1"
    return Share(
        "KAI scheduler",
        container,
        (*meta, key),
        words,
        "nvidia.com/gpu",
        mode,
        memory,
        words,
        fraction,
        problem,
    )


class _Names(NamedTuple):
    mechanism: Mechanism
    number: str  # the device count
    memory: str
    percentage: str
    cores: str
    mode_annotation: str
    bare_is_exclusive: bool  # a count alone asks for a device of its own


_FAMILIES = (
    _Names(
        "HAMi",
        "nvidia.com/gpu",
        "nvidia.com/gpumem",
        "nvidia.com/gpumem-percentage",
        "nvidia.com/gpucores",
        "nvidia.com/vgpu-mode",
        True,
    ),
    _Names("HAMi", "hygon.com/dcunum", "hygon.com/dcumem", "", "hygon.com/dcucores", "", True),
    _Names(
        "Volcano vGPU",
        "volcano.sh/vgpu-number",
        "volcano.sh/vgpu-memory",
        "volcano.sh/vgpu-memory-percentage",
        "volcano.sh/vgpu-cores",
        "volcano.sh/vgpu-mode",
        False,
    ),
)
_GPU_SHARE = "volcano.sh/gpu-memory"
# The names that make a share (a bare nvidia.com/gpu does not; a bare vgpu-number does).
_SHARE_NAMES = frozenset(
    {n for f in _FAMILIES for n in (f.memory, f.percentage, f.cores) if n}
    | {"volcano.sh/vgpu-number", _GPU_SHARE}
)


def _vgpu(pod: PodView, amounts: dict[str, ResourceAmount]) -> list[Share]:
    out = []
    for names in _FAMILIES:
        share = _family(pod, amounts, names)
        if share is not None:
            out.append(share)
    gpu_share = amounts.get(_GPU_SHARE)
    if gpu_share is not None and _positive(gpu_share):
        words = f"{_GPU_SHARE}: {shown(gpu_share.raw, 20)}"
        out.append(
            Share(
                "Volcano GPU share",
                gpu_share.container,
                gpu_share.path,
                words,
                _GPU_SHARE,
                "time-slicing",
                Fraction(gpu_share.amount) if gpu_share.amount is not None else None,
                words,
                None,
            )
        )
    return out


def _family(pod: PodView, amounts: dict[str, ResourceAmount], names: _Names) -> Share | None:
    memory, percentage = amounts.get(names.memory), amounts.get(names.percentage)
    cores = amounts.get(names.cores)
    count = amounts.get(names.number)
    if not any(a is not None and _positive(a) for a in (memory, percentage, cores, count)):
        return None
    if memory is None and percentage is None and cores is None and names.bare_is_exclusive:
        return None  # a bare nvidia.com/gpu: a whole device
    if cores is not None and cores.amount == 100:
        return None  # a device of its own (its memory may still be capped: not a share)
    pct = percentage.amount if percentage is not None else None
    if cores is None and names.bare_is_exclusive and pct == 100:
        return None  # HAMi adds gpucores: 100 to it (defaultExclusiveCoreIfNeeded)
    anchor = next(a for a in (memory, percentage, cores, count) if a is not None)
    mode: ShareMode = "time-slicing"
    if names.mode_annotation and pod.annotations.get(names.mode_annotation) == "mig":
        mode = "mig"
    mib = fraction = None
    memory_field = ""
    if memory is not None and memory.amount is not None and memory.amount > 0:
        mib, memory_field = Fraction(memory.amount), _words(memory)
    elif percentage is not None and percentage.amount is not None and percentage.amount > 0:
        fraction = Fraction(min(percentage.amount, 100), 100)  # HAMi clamps to 100
        memory_field = _words(percentage)
    else:
        fraction = Fraction(1)  # no memory asked: the whole device's (HAMi's default)
    return Share(
        names.mechanism,
        anchor.container,
        anchor.path,
        _words(anchor),
        names.number,
        mode,
        mib,
        memory_field,
        fraction,
    )


def _words(a: ResourceAmount) -> str:
    return f"{a.resource}: {shown(a.raw, 20)}"


def _positive(a: ResourceAmount) -> bool:
    return a.amount is not None and a.amount > 0


def _mib(raw: object) -> Fraction | None:
    if type(raw) is not str or _MIB.fullmatch(raw) is None:
        return None
    value = int(raw)
    return Fraction(value) if value > 0 else None


def _decimal(raw: object) -> Fraction | None:
    if type(raw) is not str or not raw or _DECIMAL.fullmatch(raw) is None or raw == ".":
        return None
    return Fraction(raw)


def asks(share: Share) -> str:
    """`container "app" asks for part of a GPU (annotation gpu-fraction="0.5", KAI
    scheduler)`: the subject of a message about the share."""
    who = share.container.label if share.container is not None else "the pod"
    return f"{who} asks for part of a GPU ({share.field}, {share.mechanism})"


_OWN_DEVICE = {
    "KAI scheduler": "remove the gpu-fraction and gpu-memory annotations and request "
    "nvidia.com/gpu: 1",
    "Volcano GPU share": "request volcano.sh/gpu-number instead of volcano.sh/gpu-memory",
}
_CORES = {f.number: f.cores for f in _FAMILIES}
_MIG_ANNOTATION = {f.number: f.mode_annotation for f in _FAMILIES if f.mode_annotation}


def own_device(share: Share) -> str:
    """What the pod changes to get a GPU of its own from the same system, in words."""
    fixed = _OWN_DEVICE.get(share.mechanism)
    if fixed is not None:
        return fixed
    return f"set {_CORES[share.resource]}: 100 ({share.mechanism} then gives it a GPU of its own)"


def mig_option(share: Share) -> str | None:
    """The annotation that turns the share into a MIG slice, where the system has one."""
    key = _MIG_ANNOTATION.get(share.resource) if share.mechanism != "KAI scheduler" else None
    return f"annotate the pod {key}: mig for a MIG slice" if key else None


_MEMORY_KEY = {f.number: f.memory for f in _FAMILIES}


def memory_request(share: Share, mib: int) -> str:
    """The field that asks the share's system for `mib` MiB per device, as written."""
    if share.mechanism == "KAI scheduler":
        return f'annotation gpu-memory: "{mib}"'
    return f"{_MEMORY_KEY.get(share.resource, _GPU_SHARE)}: {mib}"
