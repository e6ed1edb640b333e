"""One Pending Pod under diagnosis, with the cluster facts its judges read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from webhook.core.access.gpuresources import GpuResources
from webhook.core.diagnosis.cluster import ClusterFacts
from webhook.core.diagnosis.evidence import Fact
from webhook.core.diagnosis.facts import NodeFacts, PendingPod
from webhook.core.diagnosis.placement import Placement
from webhook.core.workloads.units import shown

SHOWN_NODES = 3  # nodes a finding lists facts for; the rest are counted
SHOWN_HOLDERS = 5


@dataclass(frozen=True, slots=True)
class Case:
    pod: PendingPod
    cluster: ClusterFacts
    gpus: GpuResources
    place: Placement
    gpu_want: Mapping[str, int]  # the GPU resources the Pod requests

    def asks(self, resource: str) -> str:
        return f"{shown(resource, self.pod.want[resource])} {resource}"


def node_fact(node: NodeFacts | str, name: str, value: str = "") -> Fact:
    return Fact(f"node {node if isinstance(node, str) else node.name}", name, value)


def label_fact(node: NodeFacts, key: str) -> Fact:
    value = node.labels.get(key)
    return node_fact(node, f"label {key}", value if value is not None else "(not set)")


def amount_facts(case: Case, i: int, resources: tuple[str, ...]) -> list[Fact]:
    """Allocatable, allocated and free of each resource on node i."""
    node = case.cluster.nodes[i]
    used = case.cluster.use[i].used
    out = []
    for r in resources:
        have, taken = node.allocatable.get(r, 0), used.get(r, 0)
        value = f"{shown(r, have)} allocatable, {shown(r, taken)} allocated, "
        value += f"{shown(r, max(have - taken, 0))} free; the Pod asks {shown(r, case.pod.want[r])}"
        out.append(node_fact(node, r, value))
    return out


def more_nodes(total: int, shown_count: int) -> list[Fact]:
    if total <= shown_count:
        return []
    return [Fact("cluster", "nodes not listed here", f"{total - shown_count} more alike")]
