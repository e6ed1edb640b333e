"""Resource amounts as whole numbers in one unit per resource, and back to text.

The scheduler compares requests with allocatable in the resource's base unit: CPU in
millicores (`resource.Quantity.MilliValue`), everything else in whole units (bytes for
memory, ephemeral-storage and hugepages; a count for `pods` and extended resources).
Amounts are rounded up, as `Quantity.Value()` rounds.
"""

from __future__ import annotations

import math

from webhook.core.kit.quantity import parse_quantity
from webhook.errors import QuantityError

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
_BYTES = ("memory", "ephemeral-storage", "storage")
_BINARY = ((2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki"))


def amount(resource: str, raw: object) -> int | None:
    """`raw` in the resource's unit (millicores for cpu); None when it is no quantity."""
    try:
        value = parse_quantity(raw)
    except QuantityError:
        return None
    if resource == CPU:
        value *= 1000
    return math.ceil(value)


def is_bytes(resource: str) -> bool:
    return resource in _BYTES or resource.startswith("hugepages-")


def shown(resource: str, value: int) -> str:
    """`1500m` or `4` CPUs, `16Gi` (or bytes) of memory, a plain count otherwise."""
    if resource == CPU:
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if is_bytes(resource) and value:
        for size, suffix in _BINARY:
            if value % size == 0:
                return f"{value // size}{suffix}"
    return str(value)
