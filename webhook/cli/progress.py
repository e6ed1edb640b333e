"""A one-line progress counter on stderr for long runs; silent unless stderr is a terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

_INTERVAL = 0.2  # seconds between redraws


class Progress:
    """`tick(n)` after each object; `close()` clears the line."""

    def __init__(
        self,
        *,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        label: str = "audit",
    ) -> None:
        self._label = label
        self._stream = stream or sys.stderr
        self._on = self._stream.isatty() if enabled is None else enabled
        self._clock = clock
        self._start = clock()
        self._next = self._start + _INTERVAL
        self._count = 0
        self._what = ""

    def stage(self, what: str) -> None:
        """Name what is being read now (a file, a resource type)."""
        self._what = what
        self._draw(force=True)

    def tick(self, n: int = 1) -> None:
        before = self._count
        self._count += n
        if self._on and (self._count >> 8) != (before >> 8):  # every 256 objects
            self._draw()

    def _draw(self, *, force: bool = False) -> None:
        if not self._on:
            return
        now = self._clock()
        if not force and now < self._next:
            return
        self._next = now + _INTERVAL
        rate = self._count / max(now - self._start, 1e-6)
        line = f"{self._label}: {self._count:,} objects ({rate:,.0f}/s)  {self._what}"
        self._stream.write("\r\x1b[K" + line[:120])
        self._stream.flush()

    def close(self) -> None:
        if self._on:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
