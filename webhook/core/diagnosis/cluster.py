"""The cluster as a diagnosis sees it: nodes (in the inventory's indexes, so "which
nodes match this nodeSelector" is a few set operations), what bound Pods use on each
node, the Pods holding GPUs, and the GPU daemons per node.

Node ids are positions, as in `webhook.core.supply.nodeindex`: `nodes[i]` is the node with id
i, and a set of nodes is an int whose bit i stands for node i.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any

from webhook.core.diagnosis.drafacts import NO_DRA, DraFacts
from webhook.core.diagnosis.facts import DaemonPod, Holder, NodeFacts
from webhook.core.kit.idsets import ids_of
from webhook.core.supply.inventory import Inventory
from webhook.core.workloads.podrequests import Want


class NodeUse:
    """What the bound, non-terminal Pods on one node take: the sum the scheduler keeps
    in its NodeInfo, per priority (for preemption), and the GPU holders by name."""

    __slots__ = ("_used", "by_priority", "holders")

    def __init__(self) -> None:
        self.by_priority: dict[int, Want] = {}
        self.holders: list[Holder] = []
        self._used: Want | None = None

    def add(self, want: Mapping[str, int], *, priority: int, holder: Holder | None) -> None:
        at = self.by_priority.get(priority)
        if at is None:
            at = self.by_priority[priority] = {}
        for resource, value in want.items():
            at[resource] = at.get(resource, 0) + value
        if holder is not None:
            self.holders.append(holder)
        self._used = None

    @property
    def used(self) -> Want:
        """The sum over every priority (nearly always one: a single dict's copy)."""
        if self._used is None:
            total: Want = {}
            for at in self.by_priority.values():
                for resource, value in at.items():
                    total[resource] = total.get(resource, 0) + value
            self._used = total
        return self._used


class ClusterFacts:
    """Nodes, their use and daemons; built once, read by every Pod's diagnosis."""

    __slots__ = ("_memo", "cordoned", "daemons", "dra", "inventory", "nodes", "not_ready", "use")

    def __init__(
        self,
        nodes: Sequence[NodeFacts],
        use: Mapping[str, NodeUse],
        daemons: Mapping[str, Sequence[DaemonPod]],
        *,
        dra: DraFacts = NO_DRA,
    ) -> None:
        self.nodes = tuple(nodes)
        # The DRA supply rides on the inventory: webhook.core.dra.match memoises on it.
        self.inventory = Inventory.from_parsed(f.node for f in self.nodes).with_dra(dra.supply)
        self.dra = dra
        empty = NodeUse()
        self.use = tuple(use.get(f.name, empty) for f in self.nodes)
        self.daemons = daemons
        self.cordoned = self._where(lambda f: f.unschedulable)
        self.not_ready = self._where(lambda f: f.ready is not None and f.ready != "True")
        self._memo: dict[Hashable, Any] = {}

    def _where(self, test: Any) -> int:
        bits = 0
        for i, f in enumerate(self.nodes):
            if test(f):
                bits |= 1 << i
        return bits

    @property
    def all(self) -> int:
        return self.inventory.index.all

    def ids(self, bits: int) -> list[int]:
        return ids_of(bits)

    def named(self, bits: int) -> Iterator[NodeFacts]:
        nodes = self.nodes
        return (nodes[i] for i in ids_of(bits))

    def offering(self, resource: str) -> int:
        """The nodes that advertise `resource` with a count of at least 1."""
        found = self.inventory.index.resources.get(resource)
        return found.bits if found is not None else 0

    def free(self, i: int, resource: str) -> int:
        return self.nodes[i].allocatable.get(resource, 0) - self.use[i].used.get(resource, 0)

    def daemon(self, node: str, role: str) -> DaemonPod | None:
        return next((d for d in self.daemons.get(node, ()) if d.role == role), None)

    def memo(self, key: Hashable) -> Any:
        return self._memo.get(key)

    def remember(self, key: Hashable, value: Any) -> Any:
        self._memo[key] = value
        return value
