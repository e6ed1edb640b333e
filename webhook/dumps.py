"""Object dumps of any size: what `kubectl get ... -o json|yaml` writes, Lists, NDJSON.

Files are streamed, never read whole: JSON (a document, NDJSON lines, or a `List` of
any length) through `jsonstream`, YAML (documents, `List` items) through `yamlstream`.
The first non-blank byte decides: `{` or `[` is JSON, anything else YAML.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from webhook.errors import ManifestError
from webhook.jsonstream import JsonItem, JsonStream
from webhook.yamlstream import yaml_items

_SNIFF = 4096


def read_dump(name: str) -> Iterator[JsonItem]:
    """Every object of file `name` ("-": stdin) with the line it starts on."""
    source = display_name(name)
    with _opened(name) as raw:
        head = raw.peek(_SNIFF)[:_SNIFF].lstrip(b" \t\r\n\xef\xbb\xbf")
        try:
            if head[:1] in (b"{", b"["):
                text = io.TextIOWrapper(raw, encoding="utf-8-sig")
                try:
                    yield from JsonStream(text, source=source).items()
                finally:
                    text.detach()  # leave the file (stdin!) to its owner
            else:
                yield from yaml_items(raw, source=source)
        except UnicodeDecodeError as exc:
            raise ManifestError(f"{source}: not UTF-8 text ({exc.reason})") from None
        except OSError as exc:
            raise ManifestError(f"{source}: cannot read: {exc.strerror or exc}") from None


def display_name(name: str) -> str:
    return "<stdin>" if name == "-" else name


@contextmanager
def _opened(name: str) -> Iterator[io.BufferedReader]:
    if name == "-":
        stdin: IO[bytes] = sys.stdin.buffer
        # A replaced stdin (a test harness) may not be buffered: read it, it is small.
        yield stdin if isinstance(stdin, io.BufferedReader) else _buffered(stdin.read())
        return
    try:
        f = open(name, "rb")  # noqa: SIM115 - closed below, after the generator is done
    except FileNotFoundError:
        raise ManifestError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise ManifestError(f"{name}: is a directory, expected a file") from None
    except OSError as exc:
        raise ManifestError(f"{name}: cannot open: {exc.strerror}") from None
    with f:
        yield f


def _buffered(data: bytes) -> io.BufferedReader:
    return io.BufferedReader(io.BytesIO(data))
