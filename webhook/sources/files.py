"""Reading manifests and inventories from files, directories and stdin (CLI shells only)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path as FsPath
from typing import Any

from webhook.core.dra.model import DRA_KINDS, DraSupply
from webhook.core.dra.model import EMPTY as NO_DRA
from webhook.core.kit.paths import Path
from webhook.core.queues.supply import EMPTY as NO_QUEUES
from webhook.core.queues.supply import SUPPLY_KINDS as QUEUE_KINDS
from webhook.core.queues.supply import QueueSupply
from webhook.core.supply.cloud_offers import DEFAULT_READ, Adapter
from webhook.core.supply.inventory import Inventory
from webhook.errors import InventoryError, ManifestError
from webhook.sources.nodefile import Fallback, exact_objects, node_objects
from webhook.sources.yamlsource import Document, iter_documents

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True, slots=True)
class SourceObject:
    """One Kubernetes object from a file, with how to find a field's line."""

    source: str
    document: Document
    path: Path  # where the object sits in the document: () or ("items", i)
    obj: Mapping[str, Any]

    def line_of(self, field: Path) -> int:
        return self.document.line_of((*self.path, *field))

    @property
    def document_line(self) -> int:
        return self.document.line


def expand_paths(paths: Sequence[str]) -> Iterator[str]:
    """Files as given; directories walked for YAML/JSON files in a stable order."""
    for raw in paths:
        if raw == "-":
            yield raw
            continue
        p = FsPath(raw)
        if p.is_dir():
            yield from _walk(str(p))
        else:
            yield raw


def _walk(root: str) -> list[str]:
    """What `sorted(Path(root).rglob("*"))` lists that is a file (a symlink to one too)
    with a manifest suffix, as strings: symlinked directories are not entered, the order
    is by path components. One scandir per directory and a sort on tuples of strings:
    pathlib's objects cost seconds over 100,000 files."""
    found: list[tuple[tuple[str, ...], str]] = []
    stack: list[tuple[str, tuple[str, ...]]] = [(root, ())]
    while stack:
        directory, parts = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue  # as rglob: an unreadable directory lists nothing
        for entry in entries:
            name = entry.name
            path = name if directory == "." else os.path.join(directory, name)
            try:
                if entry.is_dir() and not entry.is_symlink():
                    stack.append((path, (*parts, name)))
                elif _suffix(name) in MANIFEST_SUFFIXES and entry.is_file():
                    found.append(((*parts, name), path))
            except OSError:
                continue
    found.sort()
    return [path for _, path in found]


def _suffix(name: str) -> str:
    """PurePath.suffix: `.yaml` of `a.yaml`, nothing for a dot file such as `.yaml`."""
    i = name.rfind(".")
    return name[i:] if 0 < i < len(name) - 1 else ""


def read_text(name: str) -> bytes:
    if name == "-":
        return sys.stdin.buffer.read()
    try:
        return FsPath(name).read_bytes()
    except FileNotFoundError:
        raise ManifestError(f"{name}: no such file or directory") from None
    except OSError as exc:
        raise ManifestError(f"{name}: cannot read: {exc.strerror}") from None


def iter_objects(name: str, data: bytes) -> Iterator[SourceObject | Document]:
    """Objects of a file, `List` kinds unpacked. A Document is yielded for a document
    that is not an object at all (the caller counts it as skipped)."""
    source = "<stdin>" if name == "-" else name
    for doc in iter_documents(data, source=source):
        obj = doc.data
        if not isinstance(obj, Mapping):
            yield doc
        elif str(obj.get("kind", "")).endswith("List") and isinstance(obj.get("items"), list):
            for i, item in enumerate(obj["items"]):
                if isinstance(item, Mapping):
                    yield SourceObject(source, doc, ("items", i), item)
                else:
                    yield doc
        else:
            yield SourceObject(source, doc, (), obj)


def read_inventory(name: str | None, *, read: frozenset[Adapter] = DEFAULT_READ) -> Inventory:
    """Nodes as `kubectl get nodes -o json|yaml` writes them, and DRA objects beside them
    (DeviceClasses, ResourceSlices, ResourceClaims, ResourceClaimTemplates, Namespaces),
    Kueue's queue objects and ResourceQuotas (Lists or single objects); a directory:
    every YAML/JSON file in it. No file: an unknown inventory. `read`: the cluster
    profile's node-fact adapters."""
    if name is None:
        return Inventory.unknown()
    if FsPath(name).is_dir():
        files = list(expand_paths([name]))
        if not files:
            raise InventoryError(f"{name}: no .yaml, .yml or .json file in the directory")
        return _inventory(_chain(files), name, read)
    return _inventory(_file_objects(name), name, read)


def _chain(files: list[str]) -> Iterator[Mapping[str, Any]]:
    for f in files:
        try:
            yield from _file_objects(f)
        except InventoryError as exc:
            raise InventoryError(
                f"{f}: {exc}" if not str(exc).startswith(f) else str(exc)
            ) from None


def _file_objects(name: str) -> Iterator[Mapping[str, Any]]:
    try:
        data = read_text(name)
    except ManifestError as exc:
        raise InventoryError(str(exc)) from None
    try:
        yield from node_objects(data, source=name)
    except Fallback:
        yield from exact_objects(data, source=name)


def _inventory(
    objects: Iterable[Mapping[str, Any]], name: str, read: frozenset[Adapter]
) -> Inventory:
    dra: list[Mapping[str, Any]] = []
    queues: list[Mapping[str, Any]] = []

    def nodes() -> Iterator[Mapping[str, Any]]:
        for obj in objects:
            kind = obj.get("kind") if isinstance(obj, Mapping) else None
            if kind in DRA_KINDS:
                dra.append(obj)
            elif kind in QUEUE_KINDS:
                queues.append(obj)
            else:
                yield obj

    try:
        inventory = Inventory.from_nodes(nodes(), read=read)
        inventory = inventory.with_dra(dra_supply(dra)) if dra else inventory
        return inventory.with_queues(queue_supply(queues)) if queues else inventory
    except InventoryError as exc:
        raise InventoryError(str(exc) if str(exc).startswith(name) else f"{name}: {exc}") from None


def queue_supply(
    objects: Iterable[Mapping[str, Any]], supply: QueueSupply = NO_QUEUES
) -> QueueSupply:
    """Kueue's queue objects and ResourceQuotas added to `supply`, one at a time. One
    that cannot be read (a version Kueue does not serve, a quota that is no quantity) is
    kept as unreadable, with why: the jobs it would judge say so (gpu-queues
    queue-unreadable), and the shells print it (`unreadable_notes`); the rest of the
    inventory is not lost to it."""
    for obj in objects:
        try:
            supply = supply.with_object(obj)
        except InventoryError as exc:
            supply = supply.with_unreadable(obj, str(exc))
    return supply


def unreadable_notes(inventory: Inventory) -> list[str]:
    """What of the inventory could not be read, one line each, for stderr or a report."""
    return [f"inventory: {why}" for why in inventory.queues.unreadable.values()]


def dra_supply(objects: Iterable[Mapping[str, Any]], supply: DraSupply = NO_DRA) -> DraSupply:
    """The DRA objects added to `supply`, one at a time."""
    for obj in objects:
        supply = supply.with_object(obj)
    return supply
