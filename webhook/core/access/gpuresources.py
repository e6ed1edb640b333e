"""Which extended resources are GPUs, and what a pod requests of them.

The resource channel of the access model (webhook.core.access.model): a request is a count
above zero, because a zero count asks the device plugin for nothing and the scheduler
skips it (NodeResourcesFit). Worked out once per pod view and selection.
"""

from __future__ import annotations

import glob
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from webhook.core.kit.text import glob_matcher
from webhook.core.workloads.pods import PodView, ResourceAmount

# The device-plugin resources that are whole GPUs or MIG slices, by vendor: the default
# selection of device-injection, memory-fit and slo-class (one selection, so the three
# share its memo). Names: NVIDIA's device plugin, AMD's ROCm/k8s-device-plugin, Intel's
# GPU plugin (i915, and xe for the newer kernel driver).
DEVICE_PLUGIN_GPUS: tuple[str, ...] = (
    "nvidia.com/gpu",
    "nvidia.com/gpu.shared",
    "nvidia.com/mig-*",
    "amd.com/gpu",
    "gpu.intel.com/i915",
    "gpu.intel.com/xe",
)


@dataclass(frozen=True, slots=True, eq=False)
class GpuResources:
    """Which extended resource names are GPUs. Identity-hashed: a cheap memo key."""

    include: tuple[str, ...]  # globs
    exclude: tuple[str, ...]
    is_gpu: Callable[[str], bool]


@lru_cache(maxsize=64)  # keyed by policy parameters, never by what a request carries
def gpu_resources(
    *, include: tuple[str, ...] = (), prefixes: tuple[str, ...] = (), exclude: tuple[str, ...] = ()
) -> GpuResources:
    """Names matching a glob of `include` or starting with one of `prefixes`, but no glob
    of `exclude`. One shared object per selection: checks with equal parameters share
    the memo."""
    globs = include + tuple(glob.escape(p) + "*" for p in prefixes)
    if not exclude and not include:
        return GpuResources(globs, exclude, lambda name: name.startswith(prefixes))
    included, excluded = glob_matcher(globs), glob_matcher(exclude)
    if not exclude:
        return GpuResources(globs, exclude, included)
    if not include:  # prefixes and exclusions (resource-names): the C startswith first
        return GpuResources(
            globs, exclude, lambda name: name.startswith(prefixes) and not excluded(name)
        )
    return GpuResources(globs, exclude, lambda name: included(name) and not excluded(name))


def gpu_amounts(pod: PodView, *, gpus: GpuResources) -> tuple[ResourceAmount, ...]:
    """Every GPU resource amount as written: zero and malformed ones too."""
    return _gpu_amounts(pod, gpus)[0]


def gpu_requests(pod: PodView, *, gpus: GpuResources) -> tuple[ResourceAmount, ...]:
    """The GPU resources the pod's containers request: counts above zero only."""
    return _gpu_amounts(pod, gpus)[1]


def _gpu_amounts(
    pod: PodView, gpus: GpuResources
) -> tuple[tuple[ResourceAmount, ...], tuple[ResourceAmount, ...]]:
    found: tuple[tuple[ResourceAmount, ...], tuple[ResourceAmount, ...]] | None
    found = pod.memo.get(gpus)
    if found is None:
        is_gpu = gpus.is_gpu
        amounts: list[ResourceAmount] = []
        requests: list[ResourceAmount] = []
        for a in pod.amounts:
            if is_gpu(a.resource):
                amounts.append(a)
                if a.amount is not None and a.amount > 0:
                    requests.append(a)
        found = pod.memo[gpus] = (tuple(amounts), tuple(requests))
    return found
