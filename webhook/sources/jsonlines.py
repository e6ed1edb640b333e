"""The line of a field in the text of one JSON value, for file:line findings of a dump.

`check` places a finding on the line of the deepest field of its path that exists, as
`yamlsource.line_of` does on a node tree: a mapping step is the line of its key (the
first key of that name), a sequence step the line its element starts on. Here the same
walk runs over the text of the one item that has a finding, token by token; nothing is
built for the items without one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import orjson

from webhook.core.kit.paths import Path

_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')


def line_in(text: bytes, path: Path) -> int:
    """Newlines between the start of `text` (one JSON value) and the field of `path`. A
    key written twice in one object is read as its last occurrence (Go's encoding/json
    and sigs.k8s.io/yaml keep the last value), so the line is the last one's: each object
    on the way is counted first, then walked again (a finding's line, not a hot path)."""
    picks: list[int] = []
    for depth, step in enumerate(path):
        found = _walk(text, path[:depth], picks)
        if found is None:
            break
        _, token, tokens = found
        picks.append(_count(tokens, step) - 1 if token == b"{" and isinstance(step, str) else 0)
    line = 0
    tokens = _Tokens(text)
    token = tokens.next()
    for step, pick in zip(path, picks, strict=False):
        found_step = _step(tokens, token, step, pick)
        if found_step is None:
            return line
        line, token = found_step
    return line


def _walk(text: bytes, path: Path, picks: list[int]) -> tuple[int, bytes, _Tokens] | None:
    tokens = _Tokens(text)
    token = tokens.next()
    line = 0
    for step, pick in zip(path, picks, strict=True):
        found = _step(tokens, token, step, pick)
        if found is None:
            return None
        line, token = found
    return line, token, tokens


def _step(tokens: _Tokens, token: bytes, step: str | int, pick: int) -> tuple[int, bytes] | None:
    if token == b"{" and isinstance(step, str):
        return _member(tokens, step, max(pick, 0))
    if token == b"[" and isinstance(step, int) and step >= 0:
        return _element(tokens, step)
    return None


def _count(tokens: _Tokens, key: str) -> int:
    """After `{`: how many times `key` is a member of this object."""
    count = 0
    while True:
        t = tokens.next()
        if t in (b"}", b""):
            return count
        if t == b",":
            continue
        name = orjson.loads(t) if t[:1] == b'"' else None
        if tokens.next() != b":":
            return count
        count += name == key
        _skip(tokens, tokens.next())


class _Tokens:
    def __init__(self, text: bytes) -> None:
        self._text = text
        self._found: Iterator[re.Match[bytes]] = _TOKEN.finditer(text)
        self._pos = 0
        self._line = 0
        self.line = 0  # of the last token

    def next(self) -> bytes:
        match = next(self._found, None)
        if match is None:
            return b""
        self._line += self._text.count(b"\n", self._pos, match.start())
        self._pos = match.start()
        self.line = self._line
        return match.group()


def _skip(tokens: _Tokens, token: bytes) -> None:
    """Past the value that starts with `token`."""
    if token not in (b"{", b"["):
        return
    depth = 1
    while depth:
        t = tokens.next()
        if not t:
            return
        if t in (b"{", b"["):
            depth += 1
        elif t in (b"}", b"]"):
            depth -= 1


def _member(tokens: _Tokens, key: str, skip: int = 0) -> tuple[int, bytes] | None:
    """After `{`: the line of the key (its occurrence after `skip` earlier ones) and the
    first token of its value."""
    while True:
        t = tokens.next()
        if t in (b"}", b""):
            return None
        if t == b",":
            continue
        line = tokens.line
        name = orjson.loads(t) if t[:1] == b'"' else None
        if tokens.next() != b":":
            return None
        value = tokens.next()
        if name == key:
            if not skip:
                return line, value
            skip -= 1
        _skip(tokens, value)


def _element(tokens: _Tokens, index: int) -> tuple[int, bytes] | None:
    """After `[`: the line the element starts on and its first token."""
    position = 0
    while True:
        t = tokens.next()
        if t in (b"]", b""):
            return None
        if t == b",":
            continue
        if position == index:
            return tokens.line, t
        _skip(tokens, t)
        position += 1
