"""Sets of node ids for the inventory's indexes: Python ints as bitsets, frozensets when small.

A node's id is its position in the inventory (bit i of an int is node i). An int makes
intersection, union and counting one C loop over n/64 machine words, so a nodeSelector
over 50,000 nodes costs microseconds. An int costs n/8 bytes whatever it holds, though,
and a label carried by one node (a hostname, an instance id) on each of 50,000 nodes
would cost n^2/16 bytes as ints: sets smaller than `dense_at(n)` are frozensets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

IdSet = int | frozenset[int]

_RUNS = re.compile(rb"[^\x00]+")  # the non-zero bytes of a bitset, skipped to in C
_BITS = tuple(tuple(b for b in range(8) if value >> b & 1) for value in range(256))


def dense_at(nodes: int) -> int:
    """The size from which a set of `nodes` ids is kept as an int: where an int's n/8
    bytes cost no more than a frozenset's ~64 bytes per member."""
    return max(1, nodes >> 9)


def bits_of(ids: Iterable[int]) -> int:
    ids = ids if isinstance(ids, list | tuple | frozenset | set) else list(ids)
    if len(ids) <= 8:
        bits = 0
        for i in ids:
            bits |= 1 << i
        return bits
    buf = bytearray((max(ids) >> 3) + 1)
    for i in ids:
        buf[i >> 3] |= 1 << (i & 7)
    return int.from_bytes(buf, "little")


def as_bits(s: IdSet) -> int:
    return s if isinstance(s, int) else bits_of(s)


def size(s: IdSet) -> int:
    return s.bit_count() if isinstance(s, int) else len(s)


def ids_of(bits: int) -> list[int]:
    """The ids in `bits`, ascending."""
    if not bits:
        return []
    buf = bits.to_bytes((bits.bit_length() + 7) >> 3, "little")
    out: list[int] = []
    for run in _RUNS.finditer(buf):
        for pos in range(run.start(), run.end()):
            base = pos << 3
            out.extend(base + b for b in _BITS[buf[pos]])
    return out


def lowest(bits: int, count: int = 1) -> list[int]:
    """The `count` smallest ids in `bits`."""
    out: list[int] = []
    while bits and len(out) < count:
        low = bits & -bits
        out.append(low.bit_length() - 1)
        bits ^= low
    return out


def first(bits: int) -> int:
    return (bits & -bits).bit_length() - 1


def with_id(s: IdSet | None, i: int, *, dense: int) -> IdSet:
    if s is None:
        return 1 << i if dense <= 1 else frozenset((i,))
    if isinstance(s, int):
        return s | 1 << i
    grown = s | {i}
    return bits_of(grown) if len(grown) >= dense else grown


def without_id(s: IdSet, i: int) -> IdSet | None:
    """`s` less `i`; None when nothing is left."""
    left: IdSet = s & ~(1 << i) if isinstance(s, int) else s - {i}
    return left or None


class Membership:
    """Constant-time `i in bits` for many lookups into one large bitset."""

    __slots__ = ("_buf",)

    def __init__(self, bits: int) -> None:
        self._buf = bits.to_bytes((bits.bit_length() + 7) >> 3, "little")

    def __contains__(self, i: int) -> bool:
        pos = i >> 3
        return pos < len(self._buf) and bool(self._buf[pos] >> (i & 7) & 1)

    def count(self, ids: Iterable[int]) -> int:
        return sum(1 for i in ids if i in self)
