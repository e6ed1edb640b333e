"""Every Kueue queue object and ResourceQuota known: from files, a PR's own manifests or
live watches.

Immutable, like the DRA supply (webhook.core.dra.model): `with_object` and `without`
make the next supply at the cost of one object, and hand back this very supply when the
record did not change (a status update, a resourceVersion), so an admission request's
caches and the cohort capacity worked out on this supply (`memo`) stay warm.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.core.kit.dicts import as_dict
from webhook.core.queues.model import (
    QUOTA_KIND,
    ClusterQueue,
    Cohort,
    LocalQueue,
    ResourceFlavor,
    ResourceQuota,
    parse,
)

TABLES = {
    "ResourceFlavor": "flavors",
    "ClusterQueue": "cluster_queues",
    "Cohort": "cohorts",
    "LocalQueue": "local_queues",
    QUOTA_KIND: "quotas",
}
SUPPLY_KINDS = frozenset(TABLES)


@dataclass(frozen=True, slots=True)
class QueueSupply:
    flavors: Mapping[str, ResourceFlavor] = field(default_factory=dict)
    cluster_queues: Mapping[str, ClusterQueue] = field(default_factory=dict)
    cohorts: Mapping[str, Cohort] = field(default_factory=dict)
    local_queues: Mapping[tuple[str, str], LocalQueue] = field(default_factory=dict)
    quotas: Mapping[tuple[str, str], ResourceQuota] = field(default_factory=dict)
    # Objects that could not be read, (kind, namespace, name) -> why: a job that would
    # be judged by one says so instead of taking it as absent.
    unreadable: Mapping[tuple[str, str, str], str] = field(default_factory=dict)
    # Derived facts (cohort capacity, quotas by namespace), worked out once per supply.
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def kueue(self) -> bool:
        """Kueue objects were given: without them no queue can be judged."""
        return bool(self.cluster_queues or self.local_queues) or any(
            kind != QUOTA_KIND for kind, _, _ in self.unreadable
        )

    @property
    def known(self) -> bool:
        return self.kueue or bool(self.flavors or self.cohorts or self.quotas or self.unreadable)

    def quotas_in(self, namespace: str) -> tuple[ResourceQuota, ...]:
        key = ("quotas", namespace)
        found: tuple[ResourceQuota, ...] | None = self.memo.get(key)
        if found is None:
            if "quotas-by-namespace" not in self.memo:
                by: dict[str, list[ResourceQuota]] = {}
                for (ns, _), quota in sorted(self.quotas.items()):
                    by.setdefault(ns, []).append(quota)
                self.memo["quotas-by-namespace"] = {k: tuple(v) for k, v in by.items()}
            found = self.memo["quotas-by-namespace"].get(namespace, ())
            self.memo[key] = found
        return found

    def with_object(self, obj: Mapping[str, Any]) -> QueueSupply:
        """This supply with `obj` added or updated; InventoryError when it cannot be read."""
        record = parse(obj)
        kind = str(obj.get("kind"))
        found = self if object_key(obj) not in self.unreadable else self._readable(obj)
        return found._put(TABLES[kind], _key(kind, record), record)

    def with_unreadable(self, obj: Mapping[str, Any], why: str) -> QueueSupply:
        """This supply with `obj` known only as unreadable (its last record dropped)."""
        kind, namespace, name = key = object_key(obj)
        rest = self.without(kind, name, namespace)
        if rest.unreadable.get(key) == why:
            return rest
        return rest._replace("unreadable", {**rest.unreadable, key: why})

    def why_unreadable(self, kind: str, name: str, namespace: str = "") -> str | None:
        return self.unreadable.get((kind, namespace, name))

    def without(self, kind: str, name: str, namespace: str = "") -> QueueSupply:
        table = TABLES[kind]
        key: Any = (namespace, name) if kind in ("LocalQueue", QUOTA_KIND) else name
        current: Mapping[Any, Any] = getattr(self, table)
        found = self._readable({"kind": kind, "metadata": {"name": name, "namespace": namespace}})
        if key not in current:
            return found
        return found._replace(table, {k: v for k, v in current.items() if k != key})

    def _readable(self, obj: Mapping[str, Any]) -> QueueSupply:
        key = object_key(obj)
        if key not in self.unreadable:
            return self
        return self._replace("unreadable", {k: v for k, v in self.unreadable.items() if k != key})

    def _put(self, table: str, key: Any, value: Any) -> QueueSupply:
        current: Mapping[Any, Any] = getattr(self, table)
        if current.get(key) == value:
            return self
        return self._replace(table, {**current, key: value})

    def _replace(self, table: str, value: Mapping[Any, Any]) -> QueueSupply:
        tables = {t: getattr(self, t) for t in (*TABLES.values(), "unreadable")}
        tables[table] = value
        return QueueSupply(**tables)


def _key(kind: str, record: Any) -> Any:
    if kind in ("LocalQueue", QUOTA_KIND):
        return (record.namespace, record.name)
    return record.name


def object_key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace, name) of a queue object, as `without` takes them."""
    meta = as_dict(obj.get("metadata"))
    return (str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name") or ""))


EMPTY = QueueSupply()
