"""An audit's GPU use in GPU units: per namespace (what its running Pods hold), per
ClusterQueue (what Kueue reports against the quota) and per tenant (gpu-tenancy's
tenants against their budgets).

Gathered while the audit reads objects, one Pod at a time: a namespace's use is two
numbers, however many Pods it runs, so memory grows with the namespaces, not the Pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.core.access.gpuresources import DEVICE_PLUGIN_GPUS
from webhook.core.kit.dicts import api_group, as_dict
from webhook.core.kit.text import glob_matcher
from webhook.core.queues.usage import QueueUse, queue_uses
from webhook.core.supply.gpu_use import NONE, GpuUse, pod_use
from webhook.core.supply.inventory import Inventory

_IS_GPU = glob_matcher(DEVICE_PLUGIN_GPUS)
_ENDED = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class NamespaceUse:
    namespace: str
    use: GpuUse
    pods: int


@dataclass(frozen=True, slots=True)
class Usage:
    namespaces: tuple[NamespaceUse, ...] = ()
    queues: tuple[QueueUse, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.namespaces or self.queues)


@dataclass
class UsageGatherer:
    """Feed every object the audit reads (`add`); `usage()` at the end."""

    inventory: Inventory
    statuses: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    uses: dict[str, tuple[GpuUse, int]] = field(default_factory=dict)

    def add(self, obj: Mapping[str, Any], namespace: str) -> None:
        kind = obj.get("kind")
        if kind == "Pod":
            if as_dict(obj.get("status")).get("phase") in _ENDED:
                return
            use = pod_use(as_dict(obj.get("spec")), inventory=self.inventory, is_gpu=_IS_GPU)
            if use is not None:
                held, pods = self.uses.get(namespace, (NONE, 0))
                self.uses[namespace] = (held + use, pods + 1)
        elif kind == "ClusterQueue" and api_group(obj.get("apiVersion")) == "kueue.x-k8s.io":
            name = as_dict(obj.get("metadata")).get("name")
            if isinstance(name, str):
                self.statuses[name] = as_dict(obj.get("status"))

    def parts(self) -> tuple[dict[str, Mapping[str, Any]], dict[str, tuple[GpuUse, int]]]:
        """What a worker process sends back (its inventory stays where it is)."""
        return self.statuses, self.uses

    def absorb(
        self, parts: tuple[dict[str, Mapping[str, Any]], dict[str, tuple[GpuUse, int]]]
    ) -> None:
        statuses, uses = parts
        self.statuses.update(statuses)
        for namespace, (use, pods) in uses.items():
            held, count = self.uses.get(namespace, (NONE, 0))
            self.uses[namespace] = (held + use, count + pods)

    def usage(self) -> Usage:
        namespaces = tuple(
            NamespaceUse(ns, use, pods) for ns, (use, pods) in sorted(self.uses.items())
        )
        queues = queue_uses(self.inventory.queues, self.statuses, is_gpu=_IS_GPU)
        return Usage(namespaces, queues)
