"""Objects out of a JSON stream of any size, one at a time, in bounded memory.

`kubectl get ... -A -o json` on a big cluster writes one `List` of hundreds of
megabytes; parsing it whole costs several times its size in Python objects. This
reader walks the top-level values (one document, NDJSON lines, or values written one
after another), unpacks the `items` array of a List element by element, and parses
each element with orjson. Finding where an element ends is the only work done in
Python, and it is cheap for the output every tool writes:

- pretty-printed JSON (kubectl, jq): an element that starts on its own line at indent
  `I` ends at the first later line that is `I` followed by its closing bracket (strings
  cannot hold a raw newline, so nothing inside the element can look like that line);
- anything else: the standard library's C scanner (`raw_decode`) finds the end.

Either way the element is parsed by a real JSON parser, so a wrong guess cannot
produce a wrong object: it fails to parse and the exact scanner takes over. An element
nested deeper than bounds.MAX_DEPTH, or holding an integer past Python's 4300-digit
limit, is a ManifestError with its line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import IO, Any

import orjson

from webhook.errors import ManifestError
from webhook.sources.bounds import MAX_DEPTH, TooDeep, loads_json, too_deep

CHUNK = 1 << 20  # characters read at a time
_LONGEST_INDENT = 256  # kept before a value when the buffer is cut, for the indent test
_LONGEST_PRETTY = 64 << 20  # past this, an element is left to the exact scanner
_NON_BLANK = re.compile(r"[^ \t\r\n]")
_CLOSERS = {"{": "}", "[": "]"}
_decoder = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class JsonItem:
    """One value of the stream (a List's items unpacked) and the line it starts on."""

    line: int
    value: Any


class _Truncated(Exception):
    """The buffer ends inside the value: read more and try again."""


class JsonStream:
    """`JsonStream(text_file, source="dump.json").items()` yields every object."""

    def __init__(self, stream: IO[str], *, source: str, chunk: int = CHUNK) -> None:
        self._stream = stream
        self._source = source
        self._chunk = chunk
        self._buf = ""
        self._pos = 0
        self._eof = False
        self._starts_line = True  # self._buf[0] is the first character of a line
        self._line_pos = 0  # self._line is the line number at this buffer offset
        self._line = 1

    # -- public -----------------------------------------------------------------------

    def items(self) -> Iterator[JsonItem]:
        while self._skip_ws():
            char = self._buf[self._pos]
            if char == "{":
                yield from self._top_object()
            elif char == "[":
                yield from self._array()
            else:
                self._fail(f"expected an object or an array, found {char!r}")

    # -- buffer -----------------------------------------------------------------------

    def _more(self) -> bool:
        """Read the next chunk; drop what was consumed. False at end of input."""
        if self._eof:
            return False
        keep = self._keep_from()
        if keep:
            self._line = self._line_at(keep)
            self._line_pos = 0
            self._buf = self._buf[keep:]
            self._pos -= keep
        data = self._stream.read(self._chunk)
        if not data:
            self._eof = True
            return False
        self._buf += data
        return True

    def _keep_from(self) -> int:
        # Keep the current line's indentation, if it is short, for the indent test.
        start = self._buf.rfind("\n", 0, self._pos) + 1
        self._starts_line = start > 0 or self._starts_line
        if self._pos - start <= _LONGEST_INDENT:
            return start
        self._starts_line = False
        return self._pos

    def _line_at(self, pos: int) -> int:
        self._line += self._buf.count("\n", self._line_pos, pos)
        self._line_pos = pos
        return self._line

    def _skip_ws(self) -> bool:
        """Move to the next non-blank character; False at the end of input."""
        while True:
            found = _NON_BLANK.search(self._buf, self._pos)
            if found is not None:
                self._pos = found.start()
                return True
            self._pos = len(self._buf)
            if not self._more():
                return False

    def _expect(self, chars: str) -> str:
        if not self._skip_ws():
            self._fail(f"unexpected end of input, expected one of {chars!r}")
        char = self._buf[self._pos]
        if char not in chars:
            self._fail(f"expected one of {chars!r}, found {char!r}")
        self._pos += 1
        return char

    def _fail(self, problem: str) -> None:
        line = self._line_at(min(self._pos, len(self._buf)))
        raise ManifestError(f"{self._source}:{line}: invalid JSON: {problem}")

    # -- values -----------------------------------------------------------------------

    def _top_object(self) -> Iterator[JsonItem]:
        line = self._line_at(self._pos)
        whole = self._one_line_value()
        if whole is not None:  # NDJSON, or a small document on one line
            yield from _unpack(whole, line)
            return
        yield from self._members(line)

    def _one_line_value(self) -> Any | None:
        """The value if it is alone on its line (NDJSON); None to take the slow road."""
        while True:
            end = self._buf.find("\n", self._pos)
            if end == -1 and len(self._buf) - self._pos < 8 * self._chunk and self._more():
                continue
            end = len(self._buf) if end == -1 else end
            try:
                value = loads_json(self._buf[self._pos : end])
            except TooDeep as exc:
                self._fail(str(exc))
            except orjson.JSONDecodeError:
                return None
            self._pos = end
            return value

    def _members(self, line: int) -> Iterator[JsonItem]:
        """A top-level object member by member: `items` streamed, the rest kept."""
        self._expect("{")
        header: dict[str, Any] = {}
        streamed = False
        while True:
            if self._peek() == "}":
                self._pos += 1
                break
            key = self._value()
            if not isinstance(key, str):
                self._fail("expected a string key")
            self._expect(":")
            if key == "items" and self._peek() == "[":
                streamed = True
                yield from self._array()
            else:
                header[key] = self._value()
            if self._expect(",}") == "}":
                break
        if not streamed:
            yield from _unpack(header, line)

    def _array(self) -> Iterator[JsonItem]:
        self._expect("[")
        if self._peek() == "]":
            self._pos += 1
            return
        while True:
            self._skip_ws()
            line = self._line_at(self._pos)
            yield JsonItem(line, self._value())
            if self._expect(",]") == "]":
                return

    def _peek(self) -> str:
        if not self._skip_ws():
            self._fail("unexpected end of input")
        return self._buf[self._pos]

    def _value(self) -> Any:
        """The JSON value at the current position (after blanks), read whole."""
        if not self._skip_ws():
            self._fail("unexpected end of input, expected a value")
        while True:
            try:
                value, self._pos = self._indented() or self._scanned()
                return value
            except _Truncated:
                if not self._more():
                    self._scanned(final=True)  # raises with the scanner's message

    def _indented(self) -> tuple[Any, int] | None:
        """A pretty-printed object or array: it ends on the first line at its indent."""
        buf, pos = self._buf, self._pos
        closer = _CLOSERS.get(buf[pos])
        if closer is None or buf[pos + 1 : pos + 2] not in ("\n", "\r"):
            return None  # not a bracket that ends its line: not pretty-printed
        start = buf.rfind("\n", 0, pos) + 1
        indent = buf[start:pos]
        if indent.strip(" \t") or (start == 0 and not self._starts_line):
            return None
        found = _closing_line(indent, closer).search(buf, pos)
        end = found.start() if found else -1
        if end == -1:
            if self._eof or len(buf) - pos > _LONGEST_PRETTY:
                return None
            raise _Truncated
        stop = end + 1 + len(indent) + 1
        try:
            return loads_json(buf[pos:stop]), stop
        except TooDeep as exc:
            self._fail(str(exc))
            raise  # pragma: no cover - _fail raises
        except orjson.JSONDecodeError:
            return None

    def _scanned(self, *, final: bool = False) -> tuple[Any, int]:
        try:
            value, end = _decoder.raw_decode(self._buf, self._pos)
        except json.JSONDecodeError as exc:
            if not final and not self._eof:
                raise _Truncated from None
            self._pos = exc.pos
            self._fail(exc.msg)
            raise  # pragma: no cover - _fail raises
        except RecursionError:
            self._fail(str(TooDeep()))
            raise  # pragma: no cover - _fail raises
        except ValueError as exc:  # an integer past Python's digit limit
            self._fail(str(exc))
            raise  # pragma: no cover - _fail raises
        if end >= len(self._buf) and not final and not self._eof:
            raise _Truncated  # a number may go on in the next chunk
        brackets = self._buf.count("[", self._pos, end) + self._buf.count("{", self._pos, end)
        if brackets > MAX_DEPTH and too_deep(value):
            self._fail(str(TooDeep()))
        return value, end


@cache
def _closing_line(indent: str, closer: str) -> re.Pattern[str]:
    # The regex engine skips from newline to newline; str.find, whose skip table is
    # defeated by the spaces that pretty JSON is mostly made of, is three times slower.
    return re.compile(re.escape("\n" + indent + closer))


def _unpack(value: Any, line: int) -> Iterator[JsonItem]:
    """A List's items, or the value itself."""
    items = value.get("items") if isinstance(value, dict) else None
    if isinstance(items, list) and str(value.get("kind", "")).endswith("List"):
        for item in items:
            yield JsonItem(line, item)
    else:
        yield JsonItem(line, value)
