"""Objects out of a YAML stream of any size: documents one by one, List items one by one.

`kubectl get ... -o yaml` writes one `List` document; loading it whole holds every
object twice (nodes and dicts). Here libyaml's C parser produces events and PyYAML's
composer builds one node tree at a time: for a top-level mapping, the value of
`items` is composed and constructed element by element, so memory holds one object.
Each tree is measured before it is built (yamlsource.Expansion: alias budget, depth),
and the composer itself stops at MAX_DEPTH: it recurses, three frames a level.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from yaml.composer import Composer, ComposerError
from yaml.events import (
    MappingEndEvent,
    MappingStartEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode
from yaml.resolver import Resolver

from webhook.sources.bounds import MAX_DEPTH
from webhook.sources.jsonstream import JsonItem
from webhook.sources.kubeyaml import KubeResolver
from webhook.sources.yamlfast import build
from webhook.sources.yamlsource import Expansion, yaml_errors

try:  # libyaml's event parser (yaml.cyaml uses it but does not export it)
    from yaml._yaml import CParser as _CParser

    _Parser: Any = _CParser
except ImportError:  # pragma: no cover - wheels for CPython ship libyaml
    from yaml.parser import Parser as _PyParser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _Parser(Reader, Scanner, _PyParser):  # type: ignore[no-redef]
        def __init__(self, stream: Any) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            _PyParser.__init__(self)


class _ItemLoader(KubeResolver, _Parser, Composer, Resolver):  # type: ignore[misc]
    """C events, Python composition: lets us compose one subtree at a time. Tags and
    values as Kubernetes reads YAML (kubeyaml), as for every other input."""

    def __init__(self, stream: IO[bytes], *, source: str) -> None:
        _Parser.__init__(self, stream)
        Composer.__init__(self)
        Resolver.__init__(self)
        self.expansion = Expansion(source)
        self.depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH + 1:  # + 1: the scalars of the deepest collection
                mark = self.peek_event().start_mark
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
            return Composer.compose_node(self, parent, index)
        finally:
            self.depth -= 1


def yaml_items(stream: IO[bytes], *, source: str) -> Iterator[JsonItem]:
    """Every object of every document; the `items` of a top-level mapping one by one."""
    loader = _ItemLoader(stream, source=source)
    try:
        with yaml_errors(source):
            yield from _documents(loader)
    finally:
        loader.dispose()


def _documents(loader: _ItemLoader) -> Iterator[JsonItem]:
    loader.get_event()  # StreamStartEvent
    while not loader.check_event(StreamEndEvent):
        loader.get_event()  # DocumentStartEvent
        loader.anchors = {}
        loader.expansion.forget()
        if loader.check_event(MappingStartEvent):
            yield from _top_mapping(loader)
        else:
            node = _compose(loader)
            yield from _constructed(loader, node)
        loader.get_event()  # DocumentEndEvent


def _top_mapping(loader: _ItemLoader) -> Iterator[JsonItem]:
    start = loader.get_event()
    pairs: list[tuple[Node, Node]] = []
    streamed = False
    while not loader.check_event(MappingEndEvent):
        key = _compose(loader)
        if _is_items(key) and loader.check_event(SequenceStartEvent):
            streamed = True
            loader.get_event()
            while not loader.check_event(SequenceEndEvent):
                yield from _constructed(loader, _compose(loader))
            loader.get_event()
        else:
            pairs.append((key, _compose(loader)))
    end = loader.get_event()
    if not streamed:
        tag = loader.resolve(MappingNode, start.tag, start.implicit)
        node = MappingNode(tag, pairs, start.start_mark, end.end_mark, start.flow_style)
        yield from _constructed(loader, node)


def _compose(loader: _ItemLoader) -> Node:
    node: Node | None = loader.compose_node(None, None)  # type: ignore[arg-type]
    assert node is not None  # compose_node is only called before an end event
    return node


def _is_items(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.value == "items"


def _constructed(loader: _ItemLoader, node: Node) -> Iterator[JsonItem]:
    loader.expansion.measure(node)
    loader.expansion.forget(keep=loader.anchors.values())  # later items may alias these
    data = build(node, shared=bool(loader.anchors))
    if data is not None:
        yield JsonItem(node.start_mark.line + 1, data)
