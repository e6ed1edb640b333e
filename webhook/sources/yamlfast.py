"""A faster `construct_document` for the documents manifests are made of.

PyYAML builds each value through a generic, generator-based constructor and resolves
each plain scalar's tag with a list of regular expressions: most of the time `check`
spends on a manifest. Here a document without anchors (so every node is reached once,
and `yamlsource` has bounded its depth) is built by a direct walk: strings, mappings
and sequences as `SafeConstructor` builds them, every other scalar by the loader's own
constructor for its tag (the same function, so the same value or error). Anything
else (merge keys `<<`, `=` keys, complex keys, sets, omaps, unknown tags) raises
`Unusual`, and the caller lets PyYAML build that document as before.

Resolved tags are memoised per (value, implicit) for short scalars: the resolver is a
pure function of them (SafeLoader has no path resolvers), and manifests repeat the same
keys and values file after file. The memo is bounded.
"""

from __future__ import annotations

from typing import Any

import yaml

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
# Scalars built by the loader's own constructor (a pure function of the node).
_SCALARS = (
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:timestamp",
    "tag:yaml.org,2002:binary",
)
_MEMO_VALUE_LIMIT = 64  # characters: longer scalars are resolved every time
_MEMO_ENTRIES = 1 << 16  # then the memo starts again: bounded whatever the input


# (value, implicit) -> tag: shared by every loader, as the resolver's tables are.
_RESOLVED: dict[tuple[str, tuple[bool, bool]], str] = {}


class Unusual(Exception):
    """The document uses something only PyYAML's constructor builds."""


class MemoResolver:
    """Mixin for a libyaml loader: `resolve` memoised for short scalars."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is not yaml.ScalarNode or len(value) > _MEMO_VALUE_LIMIT:
            return super().resolve(kind, value, implicit)  # type: ignore[misc]
        key = (value, implicit)
        memo = _RESOLVED
        tag = memo.get(key)
        if tag is None:
            tag = super().resolve(kind, value, implicit)  # type: ignore[misc]
            if len(memo) >= _MEMO_ENTRIES:
                memo.clear()
            memo[key] = tag
        return tag


def build(loader: Any, node: yaml.Node) -> Any:
    """What `loader.construct_document(node)` returns, for a tree without aliases."""
    constructors = loader.yaml_constructors
    scalars = {tag: constructors[tag] for tag in _SCALARS if tag in constructors}
    return _Builder(loader, scalars).value(node)


class _Builder:
    __slots__ = ("loader", "scalars")

    def __init__(self, loader: Any, scalars: dict[str, Any]) -> None:
        self.loader, self.scalars = loader, scalars

    def value(self, node: yaml.Node) -> Any:
        kind = type(node)
        if kind is yaml.ScalarNode:
            tag = node.tag
            if tag == _STR:
                return node.value
            construct = self.scalars.get(tag)
            if construct is None:
                raise Unusual(tag)
            return construct(self.loader, node)
        if kind is yaml.MappingNode and node.tag == _MAP:
            out = {}
            for key, item in node.value:
                if type(key) is not yaml.ScalarNode or key.tag not in self._key_tags:
                    raise Unusual("key")  # merge, value (=), complex or odd keys
                out[self.value(key)] = self.value(item)
            return out
        if kind is yaml.SequenceNode and node.tag == _SEQ:
            return [self.value(item) for item in node.value]
        raise Unusual(node.tag)

    _key_tags = frozenset((_STR, *_SCALARS))
