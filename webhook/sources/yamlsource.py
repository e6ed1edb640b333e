"""YAML and JSON documents with the line of every field, for file:line findings.

PyYAML's `load_all` drops the node tree that holds the line marks. We drive the same
loader by hand (`get_node` then `construct_document`, which is what `load_all` does) and
keep each document's node, so a finding's path can be turned into a line without a
second parse, and a clean file costs what a plain parse costs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from webhook.errors import ManifestError

try:  # the libyaml C parser: several times faster, same results
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - wheels for CPython ship libyaml
    _Loader = yaml.SafeLoader

from webhook.core.paths import Path


@dataclass(frozen=True, slots=True)
class Document:
    """One document of a file, with its node tree for line lookups."""

    index: int
    line: int
    data: Any
    node: yaml.Node | None

    def line_of(self, path: Path) -> int:
        """The 1-based line of the deepest field of `path` that exists in the file."""
        return line_of(self.node, path) if self.node is not None else self.line


def iter_documents(text: str | bytes, *, source: str) -> Iterator[Document]:
    """Every non-empty document; a syntax error raises ManifestError with its line."""
    loader = _Loader(text)
    index = 0
    try:
        with yaml_errors(source):
            while loader.check_node():
                node = loader.get_node()
                data = loader.construct_document(node)
                index += 1
                if data is not None:
                    yield Document(index, node.start_mark.line + 1, data, node)
    finally:
        loader.dispose()


@contextlib.contextmanager
def yaml_errors(source: str) -> Iterator[None]:
    """A YAML syntax error as a ManifestError that names the file and the line."""
    try:
        yield
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        raise ManifestError(f"{where}: invalid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise ManifestError(f"{source}: invalid YAML: {exc}") from None


def line_of(node: yaml.Node | None, path: Path) -> int:
    """Walk mapping keys and sequence indexes; stop at the last one that exists."""
    assert node is not None
    line = node.start_mark.line + 1
    for step in path:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode) and isinstance(step, str):
            for key, value in node.value:
                if key.value == step:
                    line, child = key.start_mark.line + 1, value
                    break
        elif (
            isinstance(node, yaml.SequenceNode)
            and isinstance(step, int)
            and 0 <= step < len(node.value)
        ):
            child = node.value[step]
            line = child.start_mark.line + 1
        if child is None:
            return line
        node = child
    return line
