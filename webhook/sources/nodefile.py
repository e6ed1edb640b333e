"""The Node objects of an inventory file, as fast and as small as the format allows.

`kubectl get nodes -o json` on 50,000 nodes writes ~600 MB; parsed whole that is ~2 GB
of dicts, nearly all of it images, conditions and annotations that the inventory drops.
So a pretty-printed List (kubectl, jq, `json.dumps(indent=...)`) is split at the lines
that close its items (strings cannot hold a raw newline, so nothing inside an item can
look like such a line) and each item is parsed with orjson on its own, then dropped
once the inventory has read it. Whatever does not have that layout is parsed whole
with orjson; what is not JSON goes to libyaml (CSafeLoader: inventories need no line
marks). A wrong guess about the layout cannot produce a wrong object: an item that
does not parse sends the whole file down the exact path, which also words the error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import orjson

from webhook.core.dra.model import DRA_KINDS
from webhook.core.queues.supply import SUPPLY_KINDS as QUEUE_KINDS
from webhook.core.supply.inventory import nodes_from_document
from webhook.errors import InventoryError, ManifestError
from webhook.sources.bounds import TooDeep, loads_json
from webhook.sources.yamlsource import iter_documents

_BOM = b"\xef\xbb\xbf"
_TOP = re.compile(rb"\s*\{\n( +)\"")
_BLANK = re.compile(rb"\s*")


class Fallback(Exception):
    """An item of the split List did not parse: read the file the exact way instead."""


def node_objects(data: bytes, *, source: str) -> Iterable[Mapping[str, Any]]:
    """The Node objects of the file's one List (or NodeList, or Node), validated as a
    document up front and, for a big pretty-printed List, parsed item by item."""
    data = data.removeprefix(_BOM)
    start = _BLANK.match(data).end()  # type: ignore[union-attr]
    if data[start : start + 1] in (b"{", b"["):
        split = _split_list(data)
        if split is not None:
            header, spans = split
            nodes_from_document(header, source=source)  # kind and shape, before any item
            return _items(data, spans)
        try:
            whole = loads_json(data)
        except TooDeep as exc:
            raise InventoryError(f"{source}: {exc}") from None
        except orjson.JSONDecodeError:
            pass  # YAML written with braces, or broken JSON: libyaml says which
        else:
            return nodes_from_document(whole, source=source)
    return exact_objects(data, source=source)


def exact_objects(data: bytes, *, source: str) -> list[Mapping[str, Any]]:
    """The file parsed whole by libyaml (JSON is YAML), errors with their line; aliases
    and depth within the bounds of every other input (yamlsource)."""
    try:
        docs = [d.data for d in iter_documents(data, source=source)]
    except ManifestError as exc:
        raise InventoryError(str(exc)) from None
    if len(docs) != 1 and not any(_dra_document(d) for d in docs):
        raise InventoryError(f"{source}: expected one List of Nodes, found {len(docs)} documents")
    # Several documents: DRA or queue objects beside Nodes (a DeviceClass, a ClusterQueue).
    return [obj for d in docs for obj in nodes_from_document(d, source=source)]


def _dra_document(doc: object) -> bool:
    kind = doc.get("kind") if isinstance(doc, Mapping) else None
    return isinstance(kind, str) and kind.removesuffix("List") in _BESIDE_NODES


# Objects an inventory holds beside Nodes: DRA's, Kueue's queues, ResourceQuotas.
_BESIDE_NODES = DRA_KINDS | QUEUE_KINDS


def _items(data: bytes, spans: list[tuple[int, int]]) -> Iterator[Any]:
    view = memoryview(data)
    for start, end in spans:
        try:
            yield orjson.loads(view[start:end])
        except orjson.JSONDecodeError:
            raise Fallback from None


def _split_list(data: bytes) -> tuple[Any, list[tuple[int, int]]] | None:
    """The List without its items (parsed) and where each item is, if the file is a
    pretty-printed List of objects; None for any other layout."""
    top = _TOP.match(data)
    if top is None:
        return None
    indent = top.group(1)
    key = re.compile(b"\n" + indent + rb'"items": \[\n')
    found = key.search(data, top.start(1) - 1)
    if found is None:
        return None
    inner = indent * 2
    opener, closer = inner + b"{\n", re.compile(b"\n" + inner + rb"\}")
    spans: list[tuple[int, int]] = []
    pos = found.end()
    while True:
        if not data.startswith(opener, pos):
            return None
        start = pos + len(inner)
        end_of = closer.search(data, start)
        if end_of is None:
            return None
        spans.append((start, end_of.end()))
        pos = end_of.end()
        if data.startswith(b",\n", pos):
            pos += 2
        elif data.startswith(b"\n" + indent + b"]", pos):
            pos += 2 + len(indent)
            break
        else:
            return None
    rest = data[pos:]
    if re.search(b"\n" + indent + rb'"items":', rest):
        return None  # a second `items`: leave the duplicate to the exact parser
    try:
        header = orjson.loads(data[: found.end() - 2] + b"[]" + rest)
    except orjson.JSONDecodeError:
        return None
    return header, spans
