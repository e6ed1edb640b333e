"""Small helpers that keep check messages short, safe and consistent."""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Callable, Iterable
from functools import lru_cache


def shown(value: object, limit: int = 40) -> str:
    """A user-supplied value fit for one line of a message: printable, bounded."""
    text = "".join(ch if ch.isprintable() else "?" for ch in str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def listing(items: Iterable[str], limit: int = 3) -> str:
    """`a, b and 3 more`: messages stay short however large the cluster."""
    items = list(items)
    if len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f" and {len(items) - limit} more"


def matches_any(name: str, patterns: tuple[str, ...]) -> bool:
    return glob_matcher(patterns)(name)


@lru_cache(maxsize=256)
def glob_matcher(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    """One compiled regex for a tuple of globs: the admission path calls this per request."""
    if not patterns:
        return lambda name: False
    regex = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))
    return lambda name: regex.match(name) is not None


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def closest(name: str, names: list[str]) -> list[str]:
    """The names nearest a typo: the best match and any about as close."""
    scored = sorted(
        ((difflib.SequenceMatcher(None, name, n).ratio(), n) for n in names), reverse=True
    )
    if not scored or scored[0][0] < 0.6:
        return []
    return [n for ratio, n in scored[:3] if ratio >= scored[0][0] - 0.03]
