"""Pod-spec fields an operator builds from fields of its object outside any pod spec.

Some operators make part of a Pod from fields of their own: spark-operator mounts the
SparkApplication's top-level `volumes` into the driver and executor (the ones their
`volumeMounts` name) and turns the `envVars` maps into container env; the NIM operator
makes `spec.storage.hostPath` a hostPath volume mounted at /model-store. A WorkloadKinds
entry says so as data (`podFields`, webhook.core.workloads.shapes.PodField), and the
role's PodView holds the pod spec as the operator will build it: its own fields, then
what these add.

Checks never see the difference, and their findings still name the real field: each
added item keeps where it came from (`Aliases`), and the engine puts the real path in
place of the one in the merged view, in a finding's path and in its message
(`Aliases.restore`), before any shell sees it. A merged item copied as it is
(`spec.volumes[2]`) keeps the rest of the path (`.hostPath.path`); one made from a
value (an env variable from a map entry, a volume from a string) is that value's field.

Work is linear in what the fields hold, and bounded per object (MAX_ITEMS): a role per
"*" match may read the same `$.` field, so a hostile object could otherwise make a
thousand roles copy a long list each.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.kit.paths import Path, format_path
from webhook.core.kit.violation import Violation
from webhook.core.workloads.pods import CONTAINER_FIELDS, ContainerRef
from webhook.core.workloads.shapes import ROOT, PodField, PodShape, walk
from webhook.errors import WorkloadError

# Items podFields may add to the roles of one object, all roles together. A Pod with
# more volumes or env variables than this is not something any operator builds.
MAX_ITEMS = 10_000
_CONTAINER = "container."
# The rest of a path after an item, as format_path writes it: .key, ["odd key"], [3]
_REST = r'((?:\.[A-Za-z0-9_-]+|\["(?:[^"\\]|\\.)*"\]|\[[0-9]+\])*)'


class Aliases:
    """Where each item podFields added to a merged pod view really is in the object.

    `synthetic` paths are the item's place in the merged view (`spec.driver.volumes[1]`,
    past the pod's own items, so never a real field's path); `whole` items were made from
    a value (the map entry, the string) and everything below them is that value."""

    __slots__ = ("_bases", "_table")

    def __init__(self) -> None:
        self._table: dict[Path, tuple[Path, bool]] = {}
        # the merged lists' paths as a message writes them, and how to find an item there
        self._bases: dict[str, tuple[Path, re.Pattern[str]]] = {}

    def add(self, synthetic: Path, real: Path, *, whole: bool) -> None:
        self._table[synthetic] = (real, whole)
        base = synthetic[:-1]
        text = format_path(base)
        if text not in self._bases:
            # Not inside a longer path: no path character just before it.
            before = r'(?<![\w.\]"])'
            pattern = re.compile(before + re.escape(text) + r"\[([0-9]+)\]" + _REST)
            self._bases[text] = (base, pattern)

    def __bool__(self) -> bool:
        return bool(self._table)

    @classmethod
    def joined(cls, parts: list[Aliases]) -> Aliases:
        """Several pod views' aliases (a workload's roles), which never share a path."""
        out = cls()
        for part in parts:
            out._table.update(part._table)
            out._bases.update(part._bases)
        return out

    def path(self, path: Path) -> Path:
        """The real path of a path into the merged view."""
        for end in range(len(path), 0, -1):
            found = self._table.get(path[:end])
            if found is not None:
                real, whole = found
                return real if whole else (*real, *path[end:])
        return path

    def text(self, message: str) -> str:
        """A message with every merged-view path it names put as the real one."""
        for text, (base, pattern) in self._bases.items():
            if text + "[" not in message:
                continue

            def real(match: re.Match[str], base: Path = base) -> str:
                found = self._table.get((*base, int(match.group(1))))
                if found is None:
                    return match.group(0)  # one of the pod's own items
                return format_path(found[0]) + ("" if found[1] else match.group(2))

            message = pattern.sub(real, message)
        return message

    def restore(self, v: Violation) -> Violation:
        """A check's violation on the merged view, naming the object's real fields."""
        path, message = self.path(v.path), self.text(v.message)
        if path == v.path and message == v.message:
            return v
        return Violation(v.rule, path, message, v.advisory)


class Budget:
    """What podFields may still add to one object's roles (MAX_ITEMS in all)."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = MAX_ITEMS

    def spend(self, count: int, where: Path) -> None:
        self.left -= count
        if self.left < 0:
            raise WorkloadError(
                f"{format_path(where) or 'the object'}: the pod fields of this object's roles "
                f"come to more than {MAX_ITEMS} volumes, variables and mounts: too many to judge"
            )


def merged(
    obj: Mapping[str, Any],
    shape: PodShape,
    path: Path,
    value: Mapping[str, Any],
    spec: Mapping[str, Any],
    extra: tuple[ContainerRef, ...],
    budget: Budget,
) -> tuple[Mapping[str, Any], tuple[ContainerRef, ...], Aliases]:
    """The pod spec and the kind's own containers with what `shape.fields` add."""
    aliases = Aliases()
    pod: dict[str, Any] | None = None
    main: dict[str, Any] | None = None
    for field in shape.fields:
        found = walk(obj, field.source[1:]) if field.source[:1] == (ROOT,) else None
        if found is None:
            found = walk(value, field.source, path)
        if not found or found[0][1] is None:
            continue
        source, held = found[0]
        if field.target.startswith(_CONTAINER):
            if not extra:
                continue  # no container of the kind's own shape: nothing to fill
            if main is None:
                main = dict(extra[0].spec)
            into, base, name = main, extra[0].path, field.target[len(_CONTAINER) :]
        else:
            if pod is None:
                pod = dict(spec)
            into, base, name = pod, path, field.target
        own = into.get(name)
        items = list(own) if type(own) is list else []
        added = list(_items(field, held, source, spec, extra))
        budget.spend(len(added), source)
        for item, real, whole in added:
            aliases.add((*base, name, len(items)), real, whole=whole)
            items.append(item)
        into[name] = items
        if field.joining == "hostPathVolume" and field.mount_path is not None and extra:
            main = _mount(main, extra[0], field, added, aliases)
    if main is not None:
        extra = (extra[0]._replace(spec=main), *extra[1:])
    return (spec if pod is None else pod), extra, aliases


def _mount(
    main: dict[str, Any] | None,
    ref: ContainerRef,
    field: PodField,
    added: list[tuple[Any, Path, bool]],
    aliases: Aliases,
) -> dict[str, Any]:
    """The main container mounts each volume made from a host path at `mount_path`."""
    main = dict(ref.spec) if main is None else main
    own = main.get("volumeMounts")
    mounts = list(own) if type(own) is list else []
    for volume, real, _ in added:
        aliases.add((*ref.path, "volumeMounts", len(mounts)), real, whole=True)
        mounts.append({"name": volume["name"], "mountPath": field.mount_path})
    main["volumeMounts"] = mounts
    return main


def _items(
    field: PodField,
    held: object,
    source: Path,
    spec: Mapping[str, Any],
    extra: tuple[ContainerRef, ...],
) -> Iterator[tuple[Any, Path, bool]]:
    """Each item the field adds, with its real path and whether it was made whole."""
    if field.joining == "items":
        if type(held) is not list:
            return
        mounted = _mounted_names(spec, extra) if field.only_mounted else None
        for index, item in enumerate(held):
            if mounted is not None:
                name = item.get("name") if isinstance(item, Mapping) else None
                if name not in mounted:
                    continue  # spark-operator adds only the volumes the role mounts
            yield item, (*source, index), False
        return
    if field.joining == "hostPathVolume" and isinstance(held, str):
        if field.name is not None:
            yield {"name": field.name, "hostPath": {"path": held}}, source, True
        return
    if not isinstance(held, Mapping):
        return
    for name, key, raw in _keyed(held, field):
        if field.joining == "envMap":
            # a value that is no string is a reference (Spark's envSecretKeyRefs: a Secret's
            # key): what it holds cannot be seen, as a valueFrom's cannot
            item = (
                {"name": name, "value": raw}
                if isinstance(raw, str)
                else {"name": name, "valueFrom": raw}
            )
            yield item, (*source, key), True
        elif isinstance(raw, str):
            yield {"name": name, "hostPath": {"path": raw}}, (*source, key), True


def _keyed(held: Mapping[Any, Any], field: PodField) -> Iterator[tuple[str, str, Any]]:
    """The map's entries whose key has the prefix and suffix: the name between, the key
    and the value."""
    prefix, suffix = field.key_prefix, field.key_suffix
    least = len(prefix) + len(suffix)
    for key, raw in held.items():
        if type(key) is not str or len(key) <= least:
            continue
        if key.startswith(prefix) and key.endswith(suffix):
            yield key[len(prefix) : len(key) - len(suffix)], key, raw


def _mounted_names(spec: Mapping[str, Any], extra: tuple[ContainerRef, ...]) -> set[object]:
    """The volume names the role's containers mount."""
    containers: list[Any] = [ref.spec for ref in extra]
    for list_field in CONTAINER_FIELDS:
        found = spec.get(list_field)
        if type(found) is list:
            containers += found
    names: set[object] = set()
    for c in containers:
        mounts = c.get("volumeMounts") if isinstance(c, Mapping) else None
        if type(mounts) is list:
            names.update(m.get("name") for m in mounts if isinstance(m, Mapping))
    return names
