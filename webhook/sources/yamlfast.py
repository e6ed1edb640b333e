"""A document's data built from its node tree, as Kubernetes reads the YAML.

PyYAML's constructor builds values the YAML 1.1 way of PyYAML, through generators; here a
direct walk builds what sigs.k8s.io/yaml's JSON says (`kubeyaml`): strings as they are,
other scalars by go-yaml v2's rules, keys made strings, merge keys `<<` applied in
go-yaml v2's order (decode.go `mapping` and `merge`: a merged mapping sets its keys
where the `<<` stands, so a later key wins, and in a list of merged mappings the
earlier one wins), a repeated key's last value kept (`Unmarshal` is not strict) and the
pair of keys noted for the caller (docs/yaml.md "Duplicate keys"). Tags
on mappings and lists are ignored, as decode.go ignores them (`!!set` is a mapping).

A document with anchors shares one object per anchored node, as PyYAML does
(`yamlsource` has bounded what the aliases add before this runs); a document without
them needs no memo.
"""

from __future__ import annotations

from typing import Any

import yaml

from webhook.sources.kubeyaml import MERGE, STR, NotJSON, json_key, plain, refused, tagged

_Scalar = yaml.ScalarNode
_Mapping = yaml.MappingNode
_Sequence = yaml.SequenceNode


Repeats = list[tuple[yaml.ScalarNode, yaml.ScalarNode]]


def build(node: yaml.Node, *, shared: bool, repeats: Repeats | None = None) -> Any:
    """The data of a document; `shared`: whether it may hold aliases. Each key written
    twice in one mapping is added to `repeats` as (first key, later key)."""
    return _Builder({} if shared else None, [] if repeats is None else repeats).value(node)


class _Builder:
    __slots__ = ("memo", "repeats")

    def __init__(self, memo: dict[int, Any] | None, repeats: Repeats) -> None:
        self.memo = memo
        self.repeats = repeats

    def value(self, node: yaml.Node) -> Any:
        kind = type(node)
        if kind is _Scalar:
            tag = node.tag
            if tag == STR:
                return node.value
            entry = plain(node.value)
            value = entry[1] if entry[0] == tag else tagged(node)  # type: ignore[arg-type]
            if type(value) is NotJSON:
                raise refused(node, f"`{value.text}` has no JSON form (encoding/json refuses it)")
            return value
        memo = self.memo
        if memo is not None:
            built = memo.get(id(node))
            if built is not None:
                return built
        if kind is _Mapping:
            out: Any = self.mapping(node)  # type: ignore[arg-type]
        else:
            out = [self.value(item) for item in node.value]
        if memo is not None:
            memo[id(node)] = out
        return out

    def mapping(self, node: yaml.MappingNode) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in node.value:
            if type(key) is not _Scalar:
                raise refused(key, "a mapping or a list cannot be a key (JSON keys are strings)")
            if key.tag == STR:
                out[key.value] = self.value(item)
            elif key.tag == MERGE and key.value == "<<":
                self.merge(key, item, out)
            else:
                out[json_key(key)] = self.value(item)
        if len(out) < len(node.value):  # a repeated key, or a merge `<<`: look closer
            self.repeated(node)
        return out

    def repeated(self, node: yaml.MappingNode) -> None:
        """Keys written twice in this mapping (merged keys are not written here)."""
        first: dict[str, yaml.ScalarNode] = {}
        for key, _ in node.value:
            if key.tag == MERGE and key.value == "<<":
                continue
            text = key.value if key.tag == STR else json_key(key)
            if text in first:
                self.repeats.append((first[text], key))
            else:
                first[text] = key

    def merge(self, key: yaml.Node, item: yaml.Node, out: dict[str, Any]) -> None:
        """decode.go `merge`: a mapping (or an alias of one), or a list written in place
        of mappings; the list's items are applied last to first."""
        if type(item) is _Mapping:
            out.update(self.value(item))
            return
        # An alias shares the anchored node, which starts before the key: an alias of a
        # list is refused (`merge` accepts a list node only as it is written).
        if type(item) is _Sequence and item.start_mark.index > key.start_mark.index:
            for each in reversed(item.value):
                if type(each) is not _Mapping:
                    break
                out.update(self.value(each))
            else:
                return
        raise refused(item, "map merge requires map or sequence of maps as the value")
