"""DRA device taints and the tolerations of a request (KEP-5055).

A device in a ResourceSlice may carry taints ({key, value, effect}); the NVIDIA DRA
driver sets `gpu.nvidia.com/gpu-lost`, `gpu.nvidia.com/xid` (value: the XID) and
`gpu.nvidia.com/unmonitored`, with effect NoSchedule when the event is critical and None
otherwise. The scheduler allocates a device with a NoSchedule or NoExecute taint only to
a request that tolerates it; effect None is informational.

Matching, as k8s.io/api resource/v1 DeviceToleration says: an empty key (operator must
be Exists) matches every key; an empty effect every effect; operator Exists any value,
Equal (the default) the same value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.core.dra.model import Device, DeviceTaint

BLOCKING = frozenset({"NoSchedule", "NoExecute"})


def blocking(device: Device) -> tuple[DeviceTaint, ...]:
    return tuple(t for t in device.taints if t.effect in BLOCKING)


def tolerates(toleration: Mapping[str, Any], taint: DeviceTaint) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    if key and key != taint.key:
        return False
    if (toleration.get("operator") or "Equal") == "Exists":
        return True
    return (toleration.get("value") or "") == taint.value


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
