"""YAML and JSON documents with the line of every field, for file:line findings.

PyYAML's `load_all` drops the node tree that holds the line marks. We drive libyaml's
composer by hand (`get_node`), keep each document's node, and build its data as
Kubernetes reads the YAML (`yamlfast.build`, `kubeyaml`: YAML 1.1 as go-yaml v2 resolves
it, then JSON), so a finding's path can be turned into a line without a second parse,
and a clean file costs what a plain parse costs.

Between the two steps each node tree is measured (`Expansion`): PyYAML shares one
object for every alias of an anchor, but whatever walks the data later (a check, a
report, `str()`) walks every alias again, so a 700-byte "billion laughs" document is
10^9 nodes to its readers. Aliases may add at most ALIAS_BUDGET nodes and scalar
characters to a stream, and no document may nest deeper than MAX_DEPTH (aliases
counted): past either, a ManifestError with the line, before anything is built.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from webhook.core.kit.paths import Path
from webhook.core.kit.text import shown
from webhook.errors import ManifestError
from webhook.sources.bounds import MAX_DEPTH
from webhook.sources.kubeyaml import STR, KubeResolver, KubeYAMLError, json_key
from webhook.sources.yamlfast import Repeats, build

try:  # the libyaml C parser: several times faster, same results
    _Base: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - wheels for CPython ship libyaml
    _Base = yaml.SafeLoader

ALIAS_BUDGET = 1_000_000  # nodes and scalar characters that aliases may add to a stream


class _Loader(KubeResolver, _Base):  # type: ignore[misc]
    """libyaml's parser and composer; tags as go-yaml v2 resolves them."""


@dataclass(frozen=True, slots=True)
class Document:
    """One document of a file, with its node tree for line lookups."""

    index: int
    line: int
    data: Any
    node: yaml.Node | None
    # Keys written twice in one mapping, as input errors naming both lines: kubectl
    # apply -f keeps the last silently, kustomize and strict field validation refuse
    # them (docs/yaml.md "Duplicate keys").
    repeats: tuple[str, ...] = ()

    def line_of(self, path: Path) -> int:
        """The 1-based line of the deepest field of `path` that exists in the file."""
        return line_of(self.node, path) if self.node is not None else self.line


def iter_documents(text: str | bytes, *, source: str) -> Iterator[Document]:
    """Every non-empty document; a syntax error raises ManifestError with its line."""
    loader = _Loader(text)
    expansion = Expansion(source)
    shallow = _ShallowTest(text)
    index = 0
    try:
        with yaml_errors(source):
            while loader.check_node():
                node = loader.get_node()
                if not shallow(node):
                    expansion.measure(node)
                    expansion.forget()  # an anchor names a node in its own document only
                repeats: Repeats = []
                data = build(node, shared=shallow.anchors, repeats=repeats)
                index += 1
                if data is not None:
                    words = tuple(_repeated(source, a, b) for a, b in sorted(repeats, key=_later))
                    yield Document(index, node.start_mark.line + 1, data, node, words)
    finally:
        loader.dispose()


def _later(pair: tuple[yaml.Node, yaml.Node]) -> int:
    return pair[1].start_mark.index


def _repeated(source: str, first: yaml.Node, later: yaml.Node) -> str:
    a, b = first.start_mark.line + 1, later.start_mark.line + 1
    return (
        f'{source}:{b}: key "{shown(str(later.value))}" appears twice in one mapping '
        f"({source}:{a} and {source}:{b}): kubectl apply -f keeps the last one silently, "
        f"kustomize and the apiserver's strict YAML decoding refuse it. Keep one; "
        f"the object is judged as kubectl reads it, with the block at line {b}."
    )


@contextlib.contextmanager
def yaml_errors(source: str) -> Iterator[None]:
    """A YAML syntax error as a ManifestError that names the file and the line."""
    try:
        yield
    except KubeYAMLError as exc:  # valid YAML, but no JSON for Kubernetes
        mark = exc.problem_mark
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        raise ManifestError(
            f"{where}: kubectl and the apiserver refuse this: {exc.problem}"
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        raise ManifestError(f"{where}: invalid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise ManifestError(f"{source}: invalid YAML: {exc}") from None
    except RecursionError:  # pragma: no cover - Expansion refuses what nests this deep
        raise ManifestError(f"{source}: nested too deeply to read") from None


class _ShallowTest:
    """Whether a document surely has no alias and nests at most MAX_DEPTH levels, from its
    text alone, so that most documents need no walk of their nodes.

    Without an `&` in the stream there is no anchor, so no alias. And every list or
    mapping takes at least one character of its own among `- : ? [ {` (a block sequence
    its dashes, a block mapping its colons or question marks, a flow one its bracket), so
    a document with at most MAX_DEPTH of them nests no deeper. Marks count characters:
    bytes are used as they are only when they are ASCII."""

    _OPENERS = ("-", ":", "?", "[", "{")

    def __init__(self, text: str | bytes) -> None:
        if isinstance(text, bytes):
            ascii_text = text.isascii()
            self._text: str | bytes | None = text if ascii_text else None
            self._openers: tuple[Any, ...] = tuple(c.encode() for c in self._OPENERS)
            self._anchors = ascii_text and b"&" in text
            # Any encoding libyaml reads (UTF-8, UTF-16) writes "&" with a 0x26 byte.
            self._ampersand = b"&" in text
        else:
            self._text, self._openers, self._anchors = text, self._OPENERS, "&" in text
            self._ampersand = self._anchors

    @property
    def anchors(self) -> bool:
        """Whether the stream may hold an anchor (so an alias may share a node)."""
        return self._ampersand

    def __call__(self, node: yaml.Node) -> bool:
        if self._anchors or self._text is None:
            return False
        start, end = node.start_mark.index, node.end_mark.index
        text: Any = self._text
        return bool(sum(text.count(c, start, end) for c in self._openers) <= MAX_DEPTH)


class Expansion:
    """What aliases add to a stream, and how deep its documents nest, as measured on
    the node trees: each node once, whatever the aliases, with no recursion."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.added = 0  # nodes and characters that aliases added so far
        # Per node seen: (node, expanded size, expanded depth); the node is kept so that
        # its id is not reused while the entry lives.
        self._seen: dict[int, tuple[yaml.Node, int, int]] = {}

    def forget(self, keep: Iterable[yaml.Node] = ()) -> None:
        """Drop what was measured, but for the nodes `keep` (anchors still in scope)."""
        kept = [(id(n), self._seen.get(id(n))) for n in keep]
        self._seen = {k: v for k, v in kept if v is not None}

    def measure(self, root: yaml.Node) -> None:
        if id(root) in self._seen:  # a whole item that is an alias
            self._alias(root, root, 0)
            return
        # Frames: node, its depth, its children still to visit, size and depth so far.
        stack: list[list[Any]] = [self._frame(root, 1)]
        open_ids = {id(root)}
        while stack:
            frame = stack[-1]
            child = next(frame[2], None)
            if child is None:
                stack.pop()
                node, _, _, size, height = frame
                open_ids.discard(id(node))
                self._seen[id(node)] = (node, size, height)
                if stack:
                    stack[-1][3] += size
                    stack[-1][4] = max(stack[-1][4], height + 1)
                continue
            if id(child) in open_ids:
                self._fail(frame[0], "a YAML alias refers to a node that contains it")
            if id(child) in self._seen:
                self._alias(frame[0], child, frame[1])
                _, size, height = self._seen[id(child)]
                frame[3] += size
                frame[4] = max(frame[4], height + 1)
                continue
            if frame[1] >= MAX_DEPTH and not isinstance(child, yaml.ScalarNode):
                self._fail(child, f"nested deeper than {MAX_DEPTH} levels")
            stack.append(self._frame(child, frame[1] + 1))
            open_ids.add(id(child))

    @staticmethod
    def _frame(node: yaml.Node, depth: int) -> list[Any]:
        if isinstance(node, yaml.ScalarNode):
            return [node, depth, iter(()), 1 + len(node.value), 0]
        if isinstance(node, yaml.MappingNode):
            children: Iterator[yaml.Node] = (n for pair in node.value for n in pair)
        else:
            children = iter(node.value)
        return [node, depth, children, 1, 1]

    def _alias(self, holder: yaml.Node, target: yaml.Node, depth: int) -> None:
        _, size, height = self._seen[id(target)]
        self.added += size
        if self.added > ALIAS_BUDGET:
            self._fail(
                holder,
                f"YAML aliases expand this stream past {ALIAS_BUDGET:,} nodes and characters "
                f'(a "billion laughs" document?): write the values out, or alias less',
            )
        if depth + height > MAX_DEPTH:
            self._fail(holder, f"nested deeper than {MAX_DEPTH} levels (aliases expanded)")

    def _fail(self, node: yaml.Node, problem: str) -> None:
        raise ManifestError(f"{self.source}:{node.start_mark.line + 1}: {problem}")


def line_of(node: yaml.Node | None, path: Path) -> int:
    """Walk mapping keys and sequence indexes; stop at the last one that exists."""
    assert node is not None
    line = node.start_mark.line + 1
    for step in path:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode) and isinstance(step, str):
            for key, value in node.value:  # the last key of that name: the one read
                if _key_text(key) == step:
                    line, child = key.start_mark.line + 1, value
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


def _key_text(key: yaml.Node) -> str | None:
    """The key as the data has it (`1` is "1", `y` is "true"); None for no key."""
    if key.tag == STR:
        return str(key.value)
    if not isinstance(key, yaml.ScalarNode):
        return None
    try:
        return json_key(key)
    except KubeYAMLError:
        return None
