"""A mount's subPathExpr, expanded as the kubelet expands it.

The kubelet works out a container's environment (pkg/kubelet/kubelet_pods.go
makeEnvironmentVariables, kubernetes/kubernetes@001a80e9): envFrom sources first, then
each `env` entry in order, a literal `value` expanded against the variables so far (and
the service links), a `valueFrom` resolved on the node. It then expands a subPathExpr
against that environment (pkg/kubelet/container/helpers.go ExpandContainerVolumeMounts):
a variable that is missing or empty is an error, and the container does not start. Both
use `third_party/forked/golang/expansion` Expand (kubernetes/kubernetes@fde22c3f):
`$(NAME)` is the variable's value, `$$` is one `$`, anything else after a `$` is kept,
and an unclosed `$(` is kept as written.

What admission cannot see is unknowable: a `valueFrom` (a fieldRef to an annotation holds
any text, a ConfigMap key anything), and a name an envFrom source may set. A name no
entry sets is a service link, a device plugin's variable (an address, a port, a GPU id)
or missing (no mount at all): none of these names a directory, so it is kept as
`$(NAME)`, which matches no device path either.

Linear in the env and the expression: an expanded value longer than PATH_MAX cannot be
mounted, so values are cut there and never grow without bound (`A=$(B)$(B)`, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

# Linux PATH_MAX: a longer sub path fails to mount, whatever it names.
PATH_MAX = 4096
_TOO_LONG = object()


class Unknowable(NamedTuple):
    """A subPathExpr whose value admission cannot know, and the variables that make it so."""

    names: tuple[str, ...]


class Env:
    """A container's variables as far as admission can see them (built on first use)."""

    __slots__ = ("prefixes", "values")

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.prefixes = _env_from_prefixes(spec.get("envFrom"))
        # name -> its value; None: unknowable; _TOO_LONG: past PATH_MAX
        self.values: dict[str, object] = {}
        env = spec.get("env")
        for item in env if type(env) is list else ():
            if isinstance(item, Mapping) and type(item.get("name")) is str:
                self.values[item["name"]] = self._value(item)

    def _value(self, item: Mapping[str, Any]) -> object:
        raw = item.get("value")
        if raw is None or raw == "":
            return None if item.get("valueFrom") is not None else ""
        text = raw if type(raw) is str else str(raw)
        expanded, unknown = _expand(text, self.lookup)
        return None if unknown else expanded

    def lookup(self, name: str) -> object:
        """The value of `name`: its text, None if unknowable, or the name kept as written."""
        if name in self.values:
            return self.values[name]
        if any(len(name) > len(p) and name.startswith(p) for p in self.prefixes):
            return None  # an envFrom source may set it
        return f"$({name})"


def _env_from_prefixes(sources: object) -> tuple[str, ...]:
    found = []
    for source in sources if type(sources) is list else ():
        prefix = source.get("prefix") if isinstance(source, Mapping) else None
        found.append(prefix if type(prefix) is str else "")
    return tuple(found)


def _expand(text: str, lookup: Callable[[str], object]) -> tuple[object, tuple[str, ...]]:
    """Expand (third_party/forked/golang/expansion): the text (or _TOO_LONG) and the
    names whose values cannot be known."""
    out: list[str] = []
    size = 0
    unknown: list[str] = []
    cursor, checkpoint, end = 0, 0, len(text)
    while cursor < end:
        if text[cursor] == "$" and cursor + 1 < end:
            out.append(text[checkpoint:cursor])
            nxt = text[cursor + 1]
            if nxt == "$":
                piece: object = "$"
                advance = 1
            elif nxt == "(":
                close = text.find(")", cursor + 2)
                if close < 0:
                    piece, advance = "$(", 1
                else:
                    name = text[cursor + 2 : close]
                    piece, advance = lookup(name), close - cursor
                    if piece is None:
                        unknown.append(name)
                        piece = ""
            else:
                piece, advance = "$" + nxt, 1
            if piece is _TOO_LONG:
                return _TOO_LONG, tuple(unknown)
            out.append(piece)  # type: ignore[arg-type]
            size += len(out[-2]) + len(piece)  # type: ignore[arg-type]
            if size > PATH_MAX:
                return _TOO_LONG, tuple(unknown)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    out.append(text[checkpoint:])
    result = "".join(out)
    return (_TOO_LONG if len(result) > PATH_MAX else result), tuple(unknown)


def expand_sub_path(expr: str, env: Env) -> str | Unknowable | None:
    """A subPathExpr as the kubelet expands it: the sub path, Unknowable, or None when
    the kubelet refuses it (a variable it finds empty or missing, a path too long)."""
    empty: list[str] = []

    def lookup(name: str) -> object:
        value = env.lookup(name)
        if value == "":  # ExpandContainerVolumeMounts: empty is an error, like missing
            empty.append(name)
        return value

    expanded, unknown = _expand(expr, lookup)
    if unknown:
        return Unknowable(tuple(dict.fromkeys(unknown)))
    if empty or not isinstance(expanded, str):
        return None
    return expanded
