"""What each ClusterQueue has in use of its GPU quota (Pods: webhook.core.supply.gpu_use).

A ClusterQueue's use is what Kueue reports in its status (`flavorsUsage`: total and
borrowed per flavor and resource, kubernetes-sigs/kueue v0.19 apis/kueue/v1beta2
clusterqueue_types.go), beside what the queue can ever get (webhook.core.queues.capacity).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.kit.dicts import as_dict, as_list
from webhook.core.queues.capacity import capacity
from webhook.core.queues.supply import QueueSupply
from webhook.core.workloads.units import amount


@dataclass(frozen=True, slots=True)
class QueueUse:
    """One GPU resource of one flavor of a ClusterQueue: its quota and its use."""

    queue: str
    flavor: str
    resource: str
    nominal: int
    most: int  # the most it can ever get (nominal plus what its cohort would lend)
    used: int  # Kueue's status: admitted Workloads' total
    borrowed: int
    pending: int  # the queue's pending Workloads (all flavors)

    @property
    def state(self) -> str:
        """What a new job of this resource meets, in words."""
        if self.used > self.nominal:
            return f"borrowing {self.used - self.nominal} from the cohort"
        if self.used >= self.most:
            waiting = f" ({self.pending} pending)" if self.pending else ""
            return f"full: new jobs wait for quota or preempt{waiting}"
        if self.used >= self.nominal:
            return "at nominal quota: more only by borrowing"
        return "within nominal quota"


def queue_uses(
    supply: QueueSupply,
    statuses: Mapping[str, Mapping[str, Any]],
    *,
    is_gpu: Callable[[str], bool],
) -> tuple[QueueUse, ...]:
    """Every GPU quota of every ClusterQueue, with its use from `statuses` (the queue's
    `status`, by name; none: no use reported)."""
    return tuple(_uses(supply, statuses, is_gpu))


def _uses(
    supply: QueueSupply, statuses: Mapping[str, Mapping[str, Any]], is_gpu: Callable[[str], bool]
) -> Iterator[QueueUse]:
    for name in sorted(supply.cluster_queues):
        queue = supply.cluster_queues[name]
        status = statuses.get(name, {})
        used = _flavor_usage(status)
        pending = status.get("pendingWorkloads")
        waiting = pending if isinstance(pending, int) else 0
        for group in queue.groups:
            for fq in group.flavors:
                for resource, quota in fq.resources.items():
                    if not is_gpu(resource):
                        continue
                    most = capacity(supply, queue, fq.flavor, resource)
                    total, borrowed = used.get((fq.flavor, resource), (0, 0))
                    yield QueueUse(
                        name,
                        fq.flavor,
                        resource,
                        quota.nominal,
                        most.most if most is not None else quota.nominal,
                        total,
                        borrowed,
                        waiting,
                    )


def _flavor_usage(status: Mapping[str, Any]) -> dict[tuple[str, str], tuple[int, int]]:
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for flavor in map(as_dict, as_list(status.get("flavorsUsage"))):
        for r in map(as_dict, as_list(flavor.get("resources"))):
            resource = str(r.get("name"))
            total = amount(resource, r.get("total", 0)) or 0
            borrowed = amount(resource, r.get("borrowed", 0)) or 0
            out[(str(flavor.get("name")), resource)] = (total, borrowed)
    return out
