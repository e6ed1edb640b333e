"""What the cluster offers: GPU resources per node, their memory and sharing mode.

Built from Node objects (allocatable plus NVIDIA GPU Feature Discovery labels) into
indexes (webhook.core.supply.nodeindex) that answer "which nodes can take this pod" in
proportion to what the pod asks. An Inventory is immutable: the server swaps in a new
one when the Node watch reports a change, so a request never sees a half-built
snapshot. `with_node` and `without_node` make the next snapshot from this one at the
cost of one node; a change that no check can see returns this very snapshot, so the
memo here and the caches downstream that key on it stay warm.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from webhook.core.dra.model import DRA_KINDS, DraSupply
from webhook.core.dra.model import EMPTY as NO_DRA
from webhook.core.kit.idsets import ids_of
from webhook.core.kit.memo import Memo
from webhook.core.queues.supply import EMPTY as NO_QUEUES
from webhook.core.queues.supply import SUPPLY_KINDS as QUEUE_KINDS
from webhook.core.queues.supply import QueueSupply
from webhook.core.supply.cloud_offers import DEFAULT_READ, Adapter
from webhook.core.supply.nodeindex import NodeIndex
from webhook.core.supply.nodes import (
    SHARING_MODES,
    VOLATILE_LABELS,
    Node,
    Offer,
    SharingMode,
    Taint,
    make_offer,
    parse_node,
)
from webhook.errors import InventoryError

__all__ = [
    "SHARING_MODES",
    "VOLATILE_LABELS",
    "Inventory",
    "Node",
    "Offer",
    "SharingMode",
    "Taint",
    "make_offer",
    "nodes_from_document",
    "parse_node",
]

_EMPTY = NodeIndex.build(())
DRA_LISTS = tuple(k + "List" for k in sorted(DRA_KINDS | QUEUE_KINDS))


class Inventory:
    """Offers by resource name; `known` is False when no nodes were given at all."""

    __slots__ = ("_memo", "_nodes", "_offers", "_views", "dra", "index", "known", "queues")

    def __init__(
        self,
        index: NodeIndex,
        *,
        known: bool = True,
        dra: DraSupply = NO_DRA,
        queues: QueueSupply = NO_QUEUES,
    ) -> None:
        self.index = index
        self.known = known
        self.dra = dra  # DeviceClasses, ResourceSlices, claims (webhook.core.dra.model)
        self.queues = queues  # Kueue's queues and ResourceQuotas (webhook.core.queues)
        self._memo = Memo()
        self._nodes: tuple[Node, ...] | None = None
        self._offers: _Offers | None = None
        self._views: dict[frozenset[Adapter], Inventory] = {}

    @classmethod
    def unknown(cls) -> Inventory:
        return cls(_EMPTY, known=False)

    @classmethod
    def from_nodes(
        cls, nodes: Iterable[Mapping[str, Any]], *, read: frozenset[Adapter] = DEFAULT_READ
    ) -> Inventory:
        """Node objects, parsed one at a time (the caller's objects can go as they are
        read); `read`: the node-fact adapters of the cluster profile."""
        return cls.from_parsed((parse_node(n, index=i) for i, n in enumerate(nodes)), read=read)

    @classmethod
    def from_parsed(
        cls, nodes: Iterable[Node], *, read: frozenset[Adapter] = DEFAULT_READ
    ) -> Inventory:
        return cls(NodeIndex.build(nodes, read=read))

    def reading(self, read: frozenset[Adapter]) -> Inventory:
        """These nodes with offers made by the adapters `read` (a policy set's cluster
        profile): this snapshot when it was built so, else one built once and kept."""
        if read is self.index.read or read == self.index.read:
            return self
        found = self._views.get(read)
        if found is None:
            if len(self._views) >= 4:  # a policy set or two at a time (diff: base, head)
                self._views.clear()
            index = NodeIndex.build(self.nodes, read=read)
            found = self._views[read] = Inventory(
                index, known=self.known, dra=self.dra, queues=self.queues
            )
        return found

    def with_node(self, obj: Mapping[str, Any]) -> Inventory:
        """This inventory with the Node object `obj` added or updated (by name)."""
        return self.with_parsed(parse_node(obj))

    def with_parsed(self, node: Node) -> Inventory:
        index = self.index.with_node(node)
        return self if index is self.index else Inventory(index, dra=self.dra, queues=self.queues)

    def without_node(self, name: str) -> Inventory:
        index = self.index.without(name)
        return self if index is self.index else Inventory(index, dra=self.dra, queues=self.queues)

    def with_dra(self, dra: DraSupply) -> Inventory:
        """This inventory with another DRA supply (the same object when it is the same)."""
        if dra is self.dra:
            return self
        return Inventory(self.index, known=self.known, dra=dra, queues=self.queues)

    def with_queues(self, queues: QueueSupply) -> Inventory:
        """This inventory with another queue supply (the same object when it is the same)."""
        if queues is self.queues:
            return self
        return Inventory(self.index, known=self.known, dra=self.dra, queues=queues)

    @property
    def node_count(self) -> int:
        return len(self.index)

    @property
    def nodes(self) -> tuple[Node, ...]:
        """Every node, in order (built on first use: the checks read the indexes)."""
        if self._nodes is None:
            self._nodes = tuple(self.index.nodes_in(self.index.all))
        return self._nodes

    @property
    def offers(self) -> Mapping[str, tuple[Offer, ...]]:
        """Offers by resource name, in name order; each resource's offers in node order."""
        if self._offers is None:
            self._offers = _Offers(self.index)
        return self._offers

    @property
    def advertised(self) -> tuple[str, ...]:
        return tuple(self.offers)

    def memo(self, key: Any) -> Any:
        """A per-snapshot cache for derived facts (candidate sets); pure memoisation."""
        return self._memo.get(key)

    def remember(self, key: Any, value: Any, nbytes: int) -> None:
        self._memo.put(key, value, nbytes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Inventory):
            return NotImplemented
        return (
            self.known == other.known
            and self.nodes == other.nodes
            and self.dra == other.dra
            and self.queues == other.queues
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<Inventory of {self.node_count} nodes{'' if self.known else ', unknown'}>"


class _Offers(Mapping[str, tuple[Offer, ...]]):
    """The offers of each resource, made from the index on first use."""

    __slots__ = ("_index", "_made", "_names")

    def __init__(self, index: NodeIndex) -> None:
        self._index = index
        self._names = sorted(index.resources.keys())
        self._made: dict[str, tuple[Offer, ...]] = {}

    def __getitem__(self, resource: str) -> tuple[Offer, ...]:
        made = self._made.get(resource)
        if made is None:
            found = self._index.resources.get(resource)
            if found is None:
                raise KeyError(resource)
            entries = self._index.entries
            made = self._made[resource] = tuple(
                entries[i].offers[resource] for i in ids_of(found.bits)
            )
        return made

    def __contains__(self, resource: object) -> bool:
        return resource in self._index.resources

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def nodes_from_document(data: Any, *, source: str) -> list[Mapping[str, Any]]:
    """The Nodes of `kubectl get nodes -o json|yaml` output: a List or NodeList (or one Node)."""
    if not isinstance(data, Mapping):
        raise InventoryError(f"{source}: expected a List of Nodes, got {type(data).__name__}")
    kind = data.get("kind")
    if kind == "Node" or kind in DRA_KINDS or kind in QUEUE_KINDS:
        return [data]  # DRA and queue objects are sorted out by the caller (sources.files)
    if kind not in ("List", "NodeList", *DRA_LISTS):
        raise InventoryError(
            f"{source}: expected kind List or NodeList (as `kubectl get nodes -o json` writes), "
            f"got kind {kind!r}"
        )
    items = data.get("items")
    if not isinstance(items, list):
        raise InventoryError(f"{source}: `items` must be a list of Nodes")
    return items
