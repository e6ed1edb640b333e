"""The inventory's indexes: node-id sets by label, by taint and by resource offer shape.

Built once per inventory, then updated one node at a time. Every structure is
persistent (immutables.Map, a hash array mapped trie, for the maps; ints and
frozensets for the id sets), so an update copies a few paths and the sets it touches,
never the cluster, and the index it came from stays valid for requests still using it.

A node's id is its position: nodes keep the order they were given in (a changed node
keeps its place, a new one goes last), which is the order candidates are listed in.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, TypeVar

from immutables import Map

from webhook.core.kit.idsets import (
    IdSet,
    as_bits,
    bits_of,
    dense_at,
    ids_of,
    lowest,
    size,
    with_id,
    without_id,
)
from webhook.core.supply.cloud_offers import DEFAULT_READ, Adapter
from webhook.core.supply.nodes import Node, Offer, Taint, make_offer
from webhook.errors import InventoryError

Shape = tuple[str, int, int | None, str]  # Offer.shape
_SLACK = 1024  # ids handed out beyond twice the nodes before they are renumbered
K = TypeVar("K")


class Entry(NamedTuple):
    node: Node
    offers: Mapping[str, Offer]


@dataclass(frozen=True, slots=True)
class KeyIndex:
    """The nodes of each value of one label key, and of the key itself."""

    values: Map[str, IdSet]
    present: IdSet
    max_size: int  # an upper bound of the largest value's set, for pruning searches


@dataclass(frozen=True, slots=True)
class ResourceIndex:
    """The nodes that offer one resource, by offer shape and by count."""

    bits: int
    shapes: Map[Shape, IdSet]
    counts: Map[int, IdSet]


@dataclass(frozen=True, slots=True)
class NodeIndex:
    entries: Map[int, Entry]
    ids: Map[str, int]
    labels: Map[str, KeyIndex]
    taints: Map[Taint, IdSet]
    resources: Map[str, ResourceIndex]
    all: int
    next_id: int
    ordered_upto: int  # the nodes with an id below this are in name order
    read: frozenset[Adapter] = DEFAULT_READ  # the node-fact adapters offers are made with

    # -- building -------------------------------------------------------------------

    @classmethod
    def build(cls, nodes: Iterable[Node], *, read: frozenset[Adapter] = DEFAULT_READ) -> NodeIndex:
        b = _Builder(read)
        # Millions of objects that all live on: the cyclic collector would walk the
        # growing heap again and again for nothing (a third of the time at 50,000 nodes).
        collecting = gc.isenabled()
        gc.disable()
        try:
            for node in nodes:
                b.add(node)
            return b.finish()
        finally:
            if collecting:
                gc.enable()

    # -- updating -------------------------------------------------------------------

    def with_node(self, node: Node) -> NodeIndex:
        """This index with `node` added, or replacing the node of that name; `self`
        itself if the node is already here as it is."""
        i = self.ids.get(node.name)
        if i is None:
            if self.next_id >= 2 * len(self.ids) + _SLACK:
                # Ids are not reused, and a set is as long as its highest id: after as
                # many adds as there are nodes (autoscaling churn), number them anew.
                return NodeIndex.build([*self.nodes_in(self.all), node], read=self.read)
            return self._added(node)
        old = self.entries[i]
        if old.node == node:
            return self
        edit = _Edit(self, len(self.ids))
        offers = _offers(node, self.read)
        edit.relabel(i, old.node.labels, node.labels)
        edit.retaint(i, old.node.taints, node.taints)
        edit.reoffer(i, old.offers, offers)
        return edit.finish(entries=self.entries.set(i, Entry(node, offers)))

    def without(self, name: str) -> NodeIndex:
        i = self.ids.get(name)
        if i is None:
            return self
        old = self.entries[i]
        edit = _Edit(self, len(self.ids) - 1)
        edit.relabel(i, old.node.labels, {})
        edit.retaint(i, old.node.taints, ())
        edit.reoffer(i, old.offers, {})
        return edit.finish(
            entries=self.entries.delete(i), ids=self.ids.delete(name), all=self.all & ~(1 << i)
        )

    def _added(self, node: Node) -> NodeIndex:
        i = self.next_id
        ordered = self.ordered_upto
        if ordered == i and (not self.all or node.name > self.last_node().name):
            ordered = i + 1
        edit = _Edit(self, len(self.ids) + 1)
        offers = _offers(node, self.read)
        edit.relabel(i, {}, node.labels)
        edit.retaint(i, (), node.taints)
        edit.reoffer(i, {}, offers)
        return edit.finish(
            entries=self.entries.set(i, Entry(node, offers)),
            ids=self.ids.set(node.name, i),
            all=self.all | 1 << i,
            next_id=i + 1,
            ordered_upto=ordered,
        )

    # -- reading --------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.ids)

    def node(self, i: int) -> Node:
        return self.entries[i].node

    def last_node(self) -> Node:
        return self.entries[self.all.bit_length() - 1].node

    # Keys and values come from pod specs: anything hashable, which simply matches nothing.
    def label_bits(self, key: Any, value: Any) -> int:
        ki = self.labels.get(key)
        found = ki.values.get(value) if ki is not None else None
        return 0 if found is None else as_bits(found)

    def key_bits(self, key: Any) -> int:
        ki = self.labels.get(key)
        return 0 if ki is None else as_bits(ki.present)

    def name_bits(self, names: Iterable[Any]) -> int:
        bits = 0
        for name in names:
            i = self.ids.get(name)
            if i is not None:
                bits |= 1 << i
        return bits

    def nodes_in(self, bits: int) -> Iterator[Node]:
        entries = self.entries
        return (entries[i].node for i in ids_of(bits))

    def offers_in(self, resource: str, bits: int) -> Iterator[Offer]:
        entries = self.entries
        return (entries[i].offers[resource] for i in ids_of(bits))

    def offer(self, resource: str, i: int) -> Offer:
        return self.entries[i].offers[resource]

    def smallest_names(self, bits: int, count: int) -> tuple[list[str], int]:
        """The first `count` names of the nodes in `bits` in sorted order, and how many
        nodes there are: a message lists a few names, however many nodes it is about.
        Nodes listed in name order (as the apiserver lists them) are found in
        O(count); only those added out of order since are sorted."""
        total = bits.bit_count()
        if not total:
            return [], 0
        upto = self.ordered_upto
        head = bits & ((1 << upto) - 1)
        names = [self.entries[i].node.name for i in lowest(head, count)]
        tail = bits >> upto
        if tail:
            names.extend(self.entries[upto + i].node.name for i in ids_of(tail))
            names.sort()
        return names[:count], total


def _offers(node: Node, read: frozenset[Adapter]) -> dict[str, Offer]:
    return {r: make_offer(node, r, c, read=read) for r, c in node.allocatable.items()}


def _same_offer(a: Offer, b: Offer) -> bool:
    return a.count == b.count and a.shape == b.shape


class _Builder:
    """Collects id lists per label, taint and offer, then freezes them into sets."""

    def __init__(self, read: frozenset[Adapter]) -> None:
        self.read = read
        self.entries: dict[int, Entry] = {}
        self.ids: dict[str, int] = {}
        self.labels: dict[str, dict[str, list[int]]] = {}
        self.taints: dict[Taint, list[int]] = {}
        self.shapes: dict[str, dict[Shape, list[int]]] = {}
        self.counts: dict[str, dict[int, list[int]]] = {}
        self.ordered_upto = 0
        self._last = ""

    def add(self, node: Node) -> None:
        i = len(self.entries)
        if node.name in self.ids:
            raise InventoryError(
                f"item {i}: a second Node named {node.name} (item {self.ids[node.name]})"
            )
        self.ids[node.name] = i
        if self.ordered_upto == i and (i == 0 or node.name > self._last):
            self.ordered_upto, self._last = i + 1, node.name
        offers = _offers(node, self.read)
        self.entries[i] = Entry(node, offers)
        labels = self.labels
        for key, value in node.labels.items():
            values = labels.get(key)
            if values is None:
                labels[key] = {value: [i]}
            elif (found := values.get(value)) is None:
                values[value] = [i]
            else:
                found.append(i)
        for taint in dict.fromkeys(node.taints):
            self.taints.setdefault(taint, []).append(i)
        for resource, offer in offers.items():
            self.shapes.setdefault(resource, {}).setdefault(offer.shape, []).append(i)
            self.counts.setdefault(resource, {}).setdefault(offer.count, []).append(i)

    def finish(self) -> NodeIndex:
        n = len(self.entries)
        dense = dense_at(n)

        def frozen(ids: list[int]) -> IdSet:
            return bits_of(ids) if len(ids) >= dense else frozenset(ids)

        labels = {
            key: KeyIndex(
                Map({v: frozen(ids) for v, ids in values.items()}),
                frozen([i for ids in values.values() for i in ids]),
                max(len(ids) for ids in values.values()),
            )
            for key, values in self.labels.items()
        }
        resources = {
            r: ResourceIndex(
                bits_of([i for ids in shapes.values() for i in ids]),
                Map({s: frozen(ids) for s, ids in shapes.items()}),
                Map({c: frozen(ids) for c, ids in self.counts[r].items()}),
            )
            for r, shapes in self.shapes.items()
        }
        return NodeIndex(
            entries=Map(self.entries),
            ids=Map(self.ids),
            labels=Map(labels),
            taints=Map({t: frozen(ids) for t, ids in self.taints.items()}),
            resources=Map(resources),
            all=(1 << n) - 1,
            next_id=n,
            ordered_upto=self.ordered_upto,
            read=self.read,
        )


class _Edit:
    """The changes one node makes to the label, taint and resource indexes."""

    def __init__(self, index: NodeIndex, nodes_after: int) -> None:
        self.index = index
        self.dense = dense_at(nodes_after)
        self.labels = index.labels.mutate()
        self.taints = index.taints.mutate()
        self.resources = index.resources.mutate()

    def relabel(self, i: int, old: Mapping[str, str], new: Mapping[str, str]) -> None:
        for key, value in old.items():
            if new.get(key, self) != value:
                self._unlabel(i, key, value)
        for key, value in new.items():
            if old.get(key, self) != value:
                self._label(i, key, value)

    def _label(self, i: int, key: str, value: str) -> None:
        ki = self.labels.get(key)
        if ki is None:
            s = with_id(None, i, dense=self.dense)
            self.labels[key] = KeyIndex(Map({value: s}), s, 1)
            return
        s = with_id(ki.values.get(value), i, dense=self.dense)
        present = with_id(ki.present, i, dense=self.dense)
        self.labels[key] = KeyIndex(ki.values.set(value, s), present, max(ki.max_size, size(s)))

    def _unlabel(self, i: int, key: str, value: str) -> None:
        ki = self.labels[key]
        present = without_id(ki.present, i)
        if present is None:
            del self.labels[key]
            return
        left = without_id(ki.values[value], i)
        values = ki.values.delete(value) if left is None else ki.values.set(value, left)
        self.labels[key] = KeyIndex(values, present, ki.max_size)

    def retaint(self, i: int, old: Iterable[Taint], new: Iterable[Taint]) -> None:
        before, after = set(old), set(new)
        for taint in before - after:
            left = without_id(self.taints[taint], i)
            if left is None:
                del self.taints[taint]
            else:
                self.taints[taint] = left
        for taint in after - before:
            self.taints[taint] = with_id(self.taints.get(taint), i, dense=self.dense)

    def reoffer(self, i: int, old: Mapping[str, Offer], new: Mapping[str, Offer]) -> None:
        for resource in old.keys() | new.keys():
            before, after = old.get(resource), new.get(resource)
            if before is not None and after is not None and _same_offer(before, after):
                continue
            ri = self.resources.get(resource)
            if before is not None and ri is not None:
                ri = _without_offer(ri, i, before)
            if after is not None:
                ri = _with_offer(ri, i, after, self.dense)
            if ri is None:
                del self.resources[resource]
            else:
                self.resources[resource] = ri

    def finish(self, **changed: object) -> NodeIndex:
        return replace(
            self.index,
            labels=self.labels.finish(),
            taints=self.taints.finish(),
            resources=self.resources.finish(),
            **changed,  # type: ignore[arg-type]
        )


def _with_offer(ri: ResourceIndex | None, i: int, offer: Offer, dense: int) -> ResourceIndex:
    if ri is None:
        one = with_id(None, i, dense=dense)
        return ResourceIndex(1 << i, Map({offer.shape: one}), Map({offer.count: one}))
    return ResourceIndex(
        ri.bits | 1 << i,
        ri.shapes.set(offer.shape, with_id(ri.shapes.get(offer.shape), i, dense=dense)),
        ri.counts.set(offer.count, with_id(ri.counts.get(offer.count), i, dense=dense)),
    )


def _without_offer(ri: ResourceIndex, i: int, offer: Offer) -> ResourceIndex | None:
    bits = ri.bits & ~(1 << i)
    if not bits:
        return None
    return ResourceIndex(
        bits, _dropped(ri.shapes, offer.shape, i), _dropped(ri.counts, offer.count, i)
    )


def _dropped(sets: Map[K, IdSet], key: K, i: int) -> Map[K, IdSet]:
    left = without_id(sets[key], i)
    return sets.delete(key) if left is None else sets.set(key, left)
