"""How deep an input may nest, and JSON parsed within that bound.

Objects come from tenants. Every source (the webhook's request body, manifest and dump
files, policy files, inventories) refuses an object nested deeper than MAX_DEPTH
lists and mappings, so nothing deeper (a 10,000-level label value) ever reaches the
engine, and any reader there may recurse as deep as a real object goes. Kubernetes
objects nest a few dozen levels at most: a CustomResourceDefinition's openAPIV3Schema,
among the deepest, reaches about 60 for a kind that embeds a PodTemplateSpec.

MAX_DEPTH also stays far below Python's recursion limit (1000 frames), orjson's
(1024 levels) and libyaml's (1000), so each parser refuses what is too deep before it
fails in its own way.
"""

from __future__ import annotations

from typing import Any

import orjson

MAX_DEPTH = 200
_ORJSON_DEPTH = 1024  # orjson: "depth limit exceeded" past 1024 nested arrays/objects
_PAD = _ORJSON_DEPTH - MAX_DEPTH


class TooDeep(ValueError):
    """A value nests deeper than MAX_DEPTH lists and mappings."""

    def __init__(self) -> None:
        super().__init__(f"nested deeper than {MAX_DEPTH} levels")


def loads_json(data: bytes | str) -> Any:
    """orjson.loads, refusing a value nested deeper than MAX_DEPTH (TooDeep).

    A value with fewer brackets than MAX_DEPTH cannot nest deeper, and is parsed as it
    is (nearly every object). Otherwise it is parsed inside _PAD arrays, so that orjson's
    own depth limit, checked in C as it parses, is ours; the arrays are then peeled off.
    """
    if _brackets(data) <= MAX_DEPTH:
        return orjson.loads(data)
    padded = "[" * _PAD + data + "]" * _PAD if isinstance(data, str) else _padded(data)
    try:
        value = orjson.loads(padded)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):
            raise TooDeep from None
        return orjson.loads(data)  # raises again, with the positions of the text as given
    for _ in range(_PAD):
        if type(value) is not list or len(value) != 1:  # `1],[2` is not one value
            return orjson.loads(data)  # raises with the positions of the text as given
        value = value[0]
    return value


def _padded(data: bytes) -> bytes:
    return b"[" * _PAD + data + b"]" * _PAD


def _brackets(data: bytes | str) -> int:
    if isinstance(data, str):
        return data.count("[") + data.count("{")
    # One pass (two counts are two), on every admission request.
    return len(data) - len(data.translate(None, b"[{"))


def too_deep(value: Any) -> bool:
    """Whether a parsed JSON value nests deeper than MAX_DEPTH; no recursion."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if type(item) is dict:
            children: Any = item.values()
        elif type(item) is list:
            children = item
        else:
            continue
        if depth + 1 > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
