"""Small helpers that keep check messages short, safe and consistent."""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

_BRIEF_ITEMS = 3  # items of a list or mapping shown before "..."
_BRIEF_DEPTH = 2  # levels of nesting shown before "{...}" / "[...]"
_BIG_INT_BITS = 128  # past this, an integer is described, not written out


# The longest finding message. Checks keep theirs far shorter by cutting what users
# wrote (shown); this is the backstop, applied by the engine to every message.
MESSAGE_LIMIT = 2000


def clip(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """`text` cut to `limit` characters, the last one an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# `$VAR`, `${VAR}` (envsubst, kustomize vars), `{{ ... }}` (Helm, Jinja): a value the
# manifest's author meant a tool to fill in before it reached the cluster.
_PLACEHOLDER = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*|\{\{.*?\}\}", re.S)
PLACEHOLDER = (
    "an unrendered template placeholder: render the manifest (helm template, envsubst) "
    "before checking"
)


def is_placeholder(value: object) -> bool:
    """A string holding an unrendered template placeholder (searched in its first 200
    characters: bounded for any input)."""
    return type(value) is str and _PLACEHOLDER.search(value[:200]) is not None


def shown(value: object, limit: int = 40) -> str:
    """A user-supplied value fit for one line of a message: printable, bounded.

    Costs O(limit) whatever the value: a string is cut before it is filtered, and any
    other value is written by `brief`, which never walks deeper or wider than it shows."""
    text = value if type(value) is str else brief(value)
    text = text[: limit + 1]
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def brief(value: object, depth: int = 0) -> str:
    """A short repr of any JSON/YAML value: a few items of a few levels, no recursion
    into the rest (a 10,000-level list costs what a 3-level one does)."""
    if isinstance(value, str):
        return repr(value[:60])
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        if value.bit_length() > _BIG_INT_BITS:  # str() of a big int is quadratic, and limited
            return f"<an integer of {value.bit_length()} bits>"
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Mapping):
        if depth >= _BRIEF_DEPTH:
            return "{...}" if value else "{}"
        items = [f"{brief(k, depth + 1)}: {brief(v, depth + 1)}" for k, v in _first(value.items())]
        return "{" + ", ".join(items) + (", ..." if len(value) > _BRIEF_ITEMS else "") + "}"
    if isinstance(value, list | tuple):
        if depth >= _BRIEF_DEPTH:
            return "[...]" if value else "[]"
        items = [brief(v, depth + 1) for v in _first(value)]
        return "[" + ", ".join(items) + (", ..." if len(value) > _BRIEF_ITEMS else "") + "]"
    return f"<{type(value).__name__}>"  # dates, sets and the like from YAML


def _first(items: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if len(out) == _BRIEF_ITEMS:
            break
        out.append(item)
    return out


def listing(items: Iterable[str], limit: int = 3) -> str:
    """`a, b and 3 more`: messages stay short however large the cluster."""
    items = list(items)
    if len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f" and {len(items) - limit} more"


def matches_any(name: str, patterns: tuple[str, ...]) -> bool:
    return glob_matcher(patterns)(name)


# Compiled globs by pattern tuple, bounded by the characters they hold, not by count:
# policies use a few short tuples, and nothing a request carries becomes a key.
_MATCHER_CHARS = 64 * 1024
_matchers: dict[tuple[str, ...], Callable[[str], bool]] = {}
_matcher_chars = [0]
_GLOB_CHARS = frozenset("*?[")


def glob_matcher(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    """One compiled regex for a tuple of globs: the admission path calls this per request."""
    found = _matchers.get(patterns)
    if found is not None:
        return found
    matcher = _compile(patterns)
    size = sum(len(p) for p in patterns) + len(patterns)
    if size <= _MATCHER_CHARS:
        if _matcher_chars[0] + size > _MATCHER_CHARS:
            _matchers.clear()  # a reload brought new globs: start again
            _matcher_chars[0] = 0
        _matchers[patterns] = matcher
        _matcher_chars[0] += size
    return matcher


def _compile(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    # A glob without *, ? or [ matches only itself: a set lookup, where compiling it into
    # the regex costs ~0.3 ms a pattern at start-up (most namespace lists are plain names).
    exact = frozenset(p for p in patterns if not _GLOB_CHARS.intersection(p))
    globs = [p for p in patterns if p not in exact]
    if not globs:
        return exact.__contains__
    regex = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in globs))
    return lambda name: name in exact or regex.match(name) is not None


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
