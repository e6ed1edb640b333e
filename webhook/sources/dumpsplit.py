"""A pretty-printed `kubectl get ... -o json` List cut into byte ranges, for several processes.

`jsonstream` reads one dump in one process. A big dump is nearly always what kubectl (or
jq) writes: `{`, a few header members, `"items": [`, then every item starting on a line
that is its indent and `{`, and ending on the first later line that is that indent and
`}` (pretty JSON cannot put a raw newline in a string, and everything inside an item is
indented deeper). Such a file is cut at item starts into ranges of about equal size,
and each range is read as bytes (no decoding: orjson parses bytes) in its own process;
within a range, items are cut where one item's closing line is followed by the next
one's opening line, and each is parsed alone (see `items`).

Anything else about the file (an empty List, another layout, an item that does not
parse, a trailing comma, a second document after the List) is `Unusual`: the caller
reads that file with `jsonstream`, which gives the exact error, so what is found and
what is reported never depends on the cut.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from webhook.sources.bounds import MAX_DEPTH, TooDeep, loads_json

CHUNK = 4 << 20  # bytes read at a time to find a cut or count lines
BATCH = 1 << 20  # bytes of items read at a time: the run and its texts stay in cache
_EDGE = 1 << 16  # bytes read at each end of the file to find the items array
# Every byte but newlines and openers: what `translate` deletes to count both in one pass
# (one C loop over an item instead of a count and the bracket count of loads_json).
_NOT_COUNTED = bytes(b for b in range(256) if b not in b"\n[{")
_HEAD = re.compile(
    rb'\A(?:\xef\xbb\xbf)?\{\n(?P<members>(?: +"[A-Za-z]+": "[^"\\\n]*",\n){0,8})'
    rb'(?P<array> +)"items": \[\n(?P<item> +)\{\n'
)


class Unusual(Exception):
    """Not the layout this module reads: read the file with jsonstream instead."""


@dataclass(frozen=True, slots=True)
class Part:
    """Items of one range: [start, end) of the file, the first item at `start`."""

    path: str
    start: int
    end: int
    indent: bytes
    final: bool  # the last range: it ends where the items array ends
    kind: str = ""  # the List's own kind member ("List", "PodList"), "" if it has none


def parts(path: str, *, count: int) -> list[Part]:
    """The items array of the List in `path` cut into at most `count` ranges; Unusual
    when the file is not laid out so."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(_EDGE)
        match = _HEAD.match(head)
        if match is None or len(match.group("item")) <= len(match.group("array")):
            raise Unusual(path)
        start, indent = match.start("item"), match.group("item")
        f.seek(max(0, size - _EDGE))
        tail_at = f.tell()
        tail = f.read()
        at, rest = _items_end(tail, match.group("array"))
        end = tail_at + at
        try:
            head = orjson.loads(b"{" + match.group("members").rstrip(b",\n") + b"}")
        except orjson.JSONDecodeError:  # not UTF-8: jsonstream says so
            raise Unusual(path) from None
        kind = rest.get("kind", head.get("kind", ""))
        if end <= start:
            raise Unusual(path)
        cuts = [start]
        for k in range(1, count):
            cut = _next_item(f, start + (end - start) * k // count, end, indent)
            if cut is not None and cut > cuts[-1]:
                cuts.append(cut)
    bounds = [*cuts, end]
    list_kind = kind if isinstance(kind, str) else ""
    return [
        Part(path, a, b, indent, final=b == end, kind=list_kind)
        for a, b in itertools.pairwise(bounds)
    ]


def _items_end(tail: bytes, array: bytes) -> tuple[int, dict[str, Any]]:
    """Where the items array closes (the newline before its `]`), with nothing after
    the List but its other members (returned)."""
    at = tail.rfind(b"\n" + array + b"]")
    if at == -1:
        raise Unusual("no end of the items array")
    after = tail[at + 1 + len(array) + 1 :]
    if after.strip() == b"}":
        return at, {}
    if not after.startswith(b","):
        raise Unusual("something after the items array")
    try:
        rest = orjson.loads(b"{" + after[1:])
    except orjson.JSONDecodeError:
        raise Unusual("the List does not end as an object") from None
    if not isinstance(rest, dict) or "items" in rest:
        raise Unusual("a second items member")
    return at, rest


def _next_item(f: Any, at: int, end: int, indent: bytes) -> int | None:
    """The offset of the first item line (`indent{`) at or after `at`, before `end`."""
    needle = b"\n" + indent + b"{\n"
    f.seek(at - 1)
    carry = b""
    pos = at - 1
    while pos < end:
        data = carry + f.read(CHUNK)
        if len(data) == len(carry):
            return None
        found = data.find(needle)
        if found != -1:
            offset = pos - len(carry) + found + 1
            return offset if offset < end else None
        pos += len(data) - len(carry)
        carry = data[-len(needle) :]
    return None


def items(part: Part, *, lines: list[int]) -> Iterator[tuple[int, Any, bytes]]:
    """(newlines between the range's start and the item, the parsed item, its text) for
    each item of the range; Unusual as soon as the range is not a run of pretty items. At
    the end, `lines` holds the range's newline count (where the next range's lines
    start).

    An item is cut at the next separator (`<indent>},` then a line `<indent>{`) and
    parsed alone: if it parses, it is one whole value, the one a reader of the whole
    List finds there (jsonstream), wherever a line inside it looks like its end."""
    line = 0
    for texts in _runs(part, part.indent + b"{\n"):
        for text in texts:
            # Newlines and openers in one pass: the line, and loads_json's depth bound.
            counted = text.translate(None, _NOT_COUNTED)
            newlines = counted.count(b"\n")
            yield line, _parsed(text, brackets=len(counted) - newlines), text
            line += newlines + 1  # and the newline after its comma
    if part.final:
        line -= 1  # the last item of the List has no comma after it
    lines.append(line)


def _runs(part: Part, opener: bytes) -> Iterator[list[bytes]]:
    """The range's item texts, a run at a time (about BATCH bytes), each item ending at
    the `<indent>}` line followed by `,` and a line `<indent>{`."""
    closing = b"\n" + part.indent + b"}"
    sep = closing + b",\n" + opener
    with open(part.path, "rb") as f:
        f.seek(part.start)
        left = part.end - part.start
        buf, searched = b"", 0
        while True:
            # A run that holds no whole item yet reads as much again: linear in its size.
            data = f.read(min(max(BATCH, len(buf)), left))
            if not data:
                raise Unusual("the file changed while it was read")
            left -= len(data)
            buf = buf + data if buf else data
            if not buf.startswith(opener):
                raise Unusual("not an item line")
            texts, start = _cut(buf, sep, max(searched, len(opener) - 1), len(closing))
            if not left:
                texts.append(_last(buf[start:], closing, final=part.final))
                yield texts
                return
            buf = buf[start:]
            searched = max(0, len(buf) - len(sep) + 1)
            if texts:
                yield texts


def _cut(buf: bytes, sep: bytes, at: int, closed: int) -> tuple[list[bytes], int]:
    """The items that end before a separator found from `at`; where the next begins."""
    texts: list[bytes] = []
    start = 0
    find = buf.find
    at = find(sep, at)
    while at != -1:
        texts.append(buf[start : at + closed])
        start = at + closed + 2  # past the `,` and its newline: the next item's line
        at = find(sep, at + len(sep) - 1)  # an empty item: `{` then `}` on the next line
    return texts, start


def _last(text: bytes, closing: bytes, *, final: bool) -> bytes:
    """The range's last item: the List's last (then nothing after it) or followed by
    `,` and the newline before the next range's first item."""
    if not final:
        if not text.endswith(b",\n"):
            raise Unusual("a range that does not end before an item")
        text = text[:-2]
    if not text.endswith(closing):
        raise Unusual("an item without its closing line")
    return text


def line_bases(parts: list[Part]) -> list[int]:
    """The newlines before each range's start, counted in chunks (bounded memory)."""
    bases, count, pos = [], 0, 0
    with open(parts[0].path, "rb") as f:
        for part in parts:
            while pos < part.start:
                data = f.read(min(CHUNK, part.start - pos))
                if not data:
                    raise Unusual("the file changed while it was read")
                count += data.count(b"\n")
                pos += len(data)
            bases.append(count)
    return bases


def _parsed(data: bytes, *, brackets: int) -> Any:
    """loads_json(data), whose own bracket count is `brackets` (counted with the lines):
    a value with no more openers than MAX_DEPTH cannot nest deeper."""
    try:
        return orjson.loads(data) if brackets <= MAX_DEPTH else loads_json(data)
    except (orjson.JSONDecodeError, TooDeep):
        raise Unusual("an item that does not parse") from None
