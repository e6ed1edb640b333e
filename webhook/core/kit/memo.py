"""A memo bounded by the bytes of what it holds, not by its number of entries.

One entry over 50,000 nodes (a candidate set and what was derived from it) weighs tens
of kilobytes, one over ten nodes a few hundred bytes: a count of entries bounds
neither. Callers say what an entry weighs; the oldest entries go first.
"""

from __future__ import annotations

from typing import Any

DEFAULT_BYTES = 32 << 20


class Memo:
    __slots__ = ("_bytes", "_sizes", "_values", "get", "max_bytes")

    def __init__(self, max_bytes: int = DEFAULT_BYTES) -> None:
        self.max_bytes = max_bytes
        self._values: dict[Any, Any] = {}
        self._sizes: dict[Any, int] = {}
        self._bytes = 0
        self.get = self._values.get  # the hot path: a lookup, nothing more

    def put(self, key: Any, value: Any, nbytes: int) -> None:
        if nbytes > self.max_bytes:
            return  # it would push out everything else and still not fit
        self._bytes -= self._sizes.pop(key, 0)
        self._values.pop(key, None)
        while self._sizes and self._bytes + nbytes > self.max_bytes:
            oldest = next(iter(self._sizes))
            self._bytes -= self._sizes.pop(oldest)
            del self._values[oldest]
        self._values[key] = value
        self._sizes[key] = nbytes
        self._bytes += nbytes

    def held(self) -> list[Any]:
        """The keys held, oldest first (a copy: another thread may put meanwhile)."""
        return list(self._sizes)

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._values)
