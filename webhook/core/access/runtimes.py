"""How container runtimes read the variables a pod sets: which values hand out devices.

Each rule follows the runtime's own code (docs/runtime-access.md has the details):

- NVIDIA container toolkit (NVIDIA/nvidia-container-toolkit, commit
  d34b3046758cb1a5db606b2a39519c731bbf9f56, internal/config/image/cuda_image.go
  devicesFromEnvvars and devices.go NewVisibleDevices): the value is split on ",", each
  item trimmed, empty items dropped; `void` anywhere, or nothing left, is no device; else
  the first of `all` / `none` decides (all GPUs / none); else the items are device names.
  IMEX channels are read the same way, but `all` is ignored (imexChannelsFromEnvVar).
  The feature variables NVIDIA_GDS, NVIDIA_MOFED, NVIDIA_GDRCOPY and NVIDIA_NVSWITCH
  inject their devices when they are exactly `enabled` (internal/modifier/cdi.go
  gatedDevices). An image is "legacy" when CUDA_VERSION is non-empty and
  NVIDIA_REQUIRE_CUDA is empty or unset (IsLegacy), and a legacy image with no device
  variable set gets every GPU.
- AMD container toolkit (ROCm/container-toolkit, commit
  192fe8e9e7044562440ae99ba44f913f7ebb81c9, internal/oci/oci.go getAMDEnv and
  internal/gpu-tracker/gpu-tracker.go parseGPUsList): AMD_VISIBLE_DEVICES or any
  DOCKER_RESOURCE_* variable; `all` (or `All`, `ALL`) is every GPU; else each
  comma-separated item (not trimmed) is a GPU when it is a hex unique id (`0x...`, or
  more than 8 hex digits), an index range `a-b`, or an index; anything else is ignored.
"""

from __future__ import annotations

import re
from typing import Literal

Vendor = Literal["NVIDIA", "AMD"]

NVIDIA_DEVICE_LISTS = frozenset({"NVIDIA_VISIBLE_DEVICES"})
IMEX_CHANNELS = "NVIDIA_IMEX_CHANNELS"
AMD_DEVICE_LISTS = frozenset({"AMD_VISIBLE_DEVICES"})
AMD_PREFIX = "DOCKER_RESOURCE_"
CUDA_VERSION = "CUDA_VERSION"
REQUIRE_CUDA = "NVIDIA_REQUIRE_CUDA"
# What each feature variable makes the toolkit inject (internal/discover gds.go, mofed.go,
# gdrcopy.go, nvswitch.go at the commit above).
FEATURE_DEVICES = {
    "NVIDIA_GDS": "the GPUDirect Storage devices /dev/nvidia-fs*",
    "NVIDIA_MOFED": "the InfiniBand devices /dev/infiniband/uverbs* and rdma_cm",
    "NVIDIA_GDRCOPY": "the GDRCopy device /dev/gdrdrv",
    "NVIDIA_NVSWITCH": "the NVSwitch devices /dev/nvidia-nvswitchctl and /dev/nvidia-nvswitch*",
}
FEATURE_ON = "enabled"

_GO_INT = re.compile(r"[+-]?[0-9]{1,18}")  # strconv.Atoi's syntax, within int64
_HEX = re.compile(r"[0-9a-fA-F]+")


def vendor_of(name: str) -> Vendor:
    """Whose runtime reads a device-list variable (NVIDIA's for any name it does not know)."""
    return "AMD" if name in AMD_DEVICE_LISTS or name.startswith(AMD_PREFIX) else "NVIDIA"


def nvidia_devices(value: str, *, imex: bool = False) -> tuple[str, ...]:
    """The devices an NVIDIA device-list value names; () for none (void, none, empty)."""
    items = [t for t in (s.strip() for s in value.split(",")) if t]
    if not items or "void" in items:
        return ()
    for item in items:
        if item == "all":
            return () if imex else ("all",)
        if item == "none":
            return ()
    return tuple(items)


def amd_devices(value: str) -> tuple[str, ...]:
    """The items of an AMD device-list value that name GPUs; () for none."""
    if value in ("all", "All", "ALL"):
        return ("all",)
    return tuple(c for c in value.split(",") if _amd_gpu(c))


def _amd_gpu(item: str) -> bool:
    if item.startswith(("0x", "0X")) or (len(item) > 8 and _HEX.fullmatch(item)):
        return True  # a unique id: whether the node has it is not known here
    if "-" in item:
        start, _, end = item.partition("-")
        if not (_GO_INT.fullmatch(start) and _GO_INT.fullmatch(end)):
            return False
        return 0 <= int(start) <= int(end)
    return _GO_INT.fullmatch(item) is not None and int(item) >= 0


def devices_named(name: str, value: str) -> tuple[str, ...]:
    """What a device-list variable's value hands out, by the runtime that reads it; a name
    neither toolkit knows (a policy may add one) is read as the NVIDIA list."""
    if vendor_of(name) == "AMD":
        return amd_devices(value)
    return nvidia_devices(value, imex=name == IMEX_CHANNELS)
