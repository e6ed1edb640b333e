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
    """Newlines between the start of `text` (one JSON value) and the field of `path`."""
    tokens = _Tokens(text)
    line = 0
    token = tokens.next()
    for step in path:
        if token == b"{" and isinstance(step, str):
            found = _member(tokens, step)
        elif token == b"[" and isinstance(step, int) and step >= 0:
            found = _element(tokens, step)
        else:
            return line
        if found is None:
            return line
        line, token = found
    return line


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


def _member(tokens: _Tokens, key: str) -> tuple[int, bytes] | None:
    """After `{`: the line of the key and the first token of its value."""
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
            return line, value
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
