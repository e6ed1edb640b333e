"""What every finding of the check says: the fix, the risk, a user value cut short."""

from __future__ import annotations

from webhook.core.kit.text import shown

FIX = (
    "request GPUs through resources.limits (e.g. nvidia.com/gpu: 1) so the device plugin "
    "allocates them"
)
BYPASS = (
    "the container reaches GPUs the device plugin never allocated, so the scheduler can "
    "hand the same GPU to another Pod"
)
LATER = "an ephemeral container kubectl debug adds under that name would get them"
# What a host path of another vendor's GPU is replaced with (webhook.core.access.hostpaths
# device_vendors): that vendor's device plugin mounts the device nodes itself.
VENDOR_FIX = {
    ("AMD",): "request GPUs through resources.limits (amd.com/gpu: 1) so the AMD device "
    "plugin allocates them (it mounts /dev/kfd and the GPU's /dev/dri render node itself)",
    ("Intel",): "request GPUs through resources.limits (gpu.intel.com/i915: 1, or "
    "gpu.intel.com/xe: 1 on nodes with the xe driver) so the Intel GPU plugin allocates them",
    ("AMD", "Intel"): "request GPUs through resources.limits so the device plugin allocates "
    "them: amd.com/gpu: 1 for an AMD GPU, gpu.intel.com/i915: 1 (or gpu.intel.com/xe: 1) for "
    "an Intel GPU (/dev/dri alone does not say whose GPU the node has)",
}


def text(value: object, limit: int = 100) -> str:
    """A user value for a message: cut before `shown` walks it (a path may be 1 MB)."""
    return shown(value[: limit + 1] if isinstance(value, str) else value, limit)
