"""A memo bounded by the bytes of what it holds, not by its number of entries.

One entry over 50,000 nodes (a candidate set and what was derived from it) weighs tens
of kilobytes, one over ten nodes a few hundred bytes: a count of entries bounds
neither. Callers say what an entry weighs; the oldest entries go first.
"""

from __future__ import annotations

from typing import Any

DEFAULT_BYTES = 32 << 20


class Memo:
    __slots__ = ("_bytes", "_entries", "max_bytes")

    def __init__(self, max_bytes: int = DEFAULT_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: dict[Any, tuple[Any, int]] = {}
        self._bytes = 0

    def get(self, key: Any) -> Any:
        found = self._entries.get(key)
        return None if found is None else found[0]

    def put(self, key: Any, value: Any, nbytes: int) -> None:
        if nbytes > self.max_bytes:
            return  # it would push out everything else and still not fit
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old[1]
        while self._entries and self._bytes + nbytes > self.max_bytes:
            oldest = next(iter(self._entries))
            self._bytes -= self._entries.pop(oldest)[1]
        self._entries[key] = (value, nbytes)
        self._bytes += nbytes

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)
