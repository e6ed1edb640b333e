"""Object dumps of any size: what `kubectl get ... -o json|yaml` writes, Lists, NDJSON.

Files are streamed, never read whole: JSON (a document, NDJSON lines, or a `List` of
any length) through `jsonstream`, YAML (documents, `List` items) through `yamlstream`.
The first non-blank byte decides: `{` or `[` is JSON, anything else YAML.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any

from webhook.errors import ManifestError
from webhook.sources.files import expand_paths
from webhook.sources.jsonstream import JsonItem, JsonStream
from webhook.sources.yamlstream import yaml_items

_SNIFF = 4096
Stage = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Sourced:
    """An object to judge and where it came from ("file:line", or "" from a live API)."""

    obj: Any
    location: str


def no_stage(what: str) -> None:
    pass


def from_files(
    paths: Sequence[str],
    *,
    errors: list[str],
    namespace: str | None = None,
    stage: Stage = no_stage,
) -> Iterator[Sourced]:
    """Objects of dump files (directories walked). A file that breaks off is recorded in
    `errors` and the next file is read: one bad file must not hide the others."""
    for raw in paths:
        found = False
        for name in expand_paths([raw]):
            source = display_name(name)
            stage(source)
            try:
                for item in read_dump(name):
                    found = True
                    if namespace is None or _namespace(item.value) == namespace:
                        yield Sourced(item.value, f"{source}:{item.line}")
            except ManifestError as exc:
                found = True  # the error names the file
                errors.append(str(exc))
        if not found:  # an empty file, dump (`"items": []`), directory or pipe
            errors.append(f"no Kubernetes objects found in {display_name(raw)}")


def _namespace(obj: Any) -> str | None:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return str(meta.get("namespace") or "") if isinstance(meta, Mapping) else None


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
