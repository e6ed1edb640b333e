"""DRA device taints and the tolerations of a request (KEP-5055).

A device in a ResourceSlice may carry taints ({key, value, effect}); the NVIDIA DRA
driver sets `gpu.nvidia.com/gpu-lost`, `gpu.nvidia.com/xid` (value: the XID) and
`gpu.nvidia.com/unmonitored`, with effect NoSchedule when the event is critical and None
otherwise. The scheduler allocates a device with a NoSchedule or NoExecute taint only to
a request that tolerates it; effect None is informational.

Matching is the one toleration rule of webhook.core.kit.tolerations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.core.dra.model import Device, DeviceTaint
from webhook.core.kit.tolerations import BLOCKING, tolerates


def blocking(device: Device) -> tuple[DeviceTaint, ...]:
    return tuple(t for t in device.taints if t.effect in BLOCKING)


def untolerated(
    device: Device, tolerations: Iterable[Mapping[str, Any]]
) -> tuple[DeviceTaint, ...]:
    """The device's NoSchedule/NoExecute taints that none of the tolerations matches."""
    given = tuple(tolerations)
    return tuple(t for t in blocking(device) if not any(tolerates(x, t) for x in given))


def tolerates_every_key(toleration: Mapping[str, Any]) -> bool:
    """`operator: Exists` with no key: every taint (of its effect, if it names one),
    whatever it says: a lost GPU as well as a harmless one."""
    return toleration.get("operator") == "Exists" and not toleration.get("key")


def describe(taint: DeviceTaint) -> str:
    value = f"={taint.value}" if taint.value else ""
    return f"{taint.key}{value}:{taint.effect}"
