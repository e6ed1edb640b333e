"""GPU resources that no node advertises, and why: the MIG manager is mid-change, the
device plugin is not registered, or the name is wrong.

Labels read (GPU Feature Discovery and the MIG manager, docs ../shared/docs/gpu-facts.md):
`nvidia.com/gpu.present`, `nvidia.com/gpu.count`, `nvidia.com/mig-<profile>.count`,
`nvidia.com/mig.strategy`, `nvidia.com/mig.config`, `nvidia.com/mig.config.state`
(`pending`, `rebooting`, `success`, `failed`) and `nvidia.com/gpu.deploy.<operand>`,
which the MIG manager sets to `paused-for-mig-change` while it tears the GPU clients
down and back to `true` when it is done (NVIDIA/mig-parted, cmd/nvidia-mig-manager).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from webhook.core.access.gpuresources import GpuResources
from webhook.core.diagnosis.cluster import ClusterFacts
from webhook.core.diagnosis.facts import NodeFacts
from webhook.core.kit.idsets import as_bits
from webhook.core.supply import mig_catalog

MIG_STATE = "nvidia.com/mig.config.state"
MIG_CONFIG = "nvidia.com/mig.config"
PLUGIN_DEPLOY = "nvidia.com/gpu.deploy.device-plugin"
PAUSED = "paused-for-mig-change"
MID_CHANGE = ("pending", "rebooting", "failed")
PRODUCT = "nvidia.com/gpu.product"


@dataclass(frozen=True, slots=True)
class Broken:
    """A node that should offer the resource and does not, and why."""

    node: NodeFacts
    domain: str  # mig-reconfiguring | plugin-not-registered
    why: str  # for a verdict: "label nvidia.com/mig.config.state=failed"


def is_nvidia(resource: str) -> bool:
    return resource.startswith("nvidia.com/")


def mig_change(node: NodeFacts) -> str | None:
    """Why the MIG manager has the node's GPUs, or None when it does not."""
    labels = node.labels
    state = labels.get(MIG_STATE)
    if state in MID_CHANGE:
        return f"label {MIG_STATE}={state}"
    paused = sorted(k for k, v in labels.items() if v == PAUSED and k.startswith("nvidia.com/"))
    return f"label {paused[0]}={PAUSED}" if paused else None


def plugin_problem(
    node: NodeFacts, resource: str, cluster: ClusterFacts, gpus: GpuResources
) -> str | None:
    """Why the node's device plugin does not offer `resource` although the node has
    GPUs, or None when nothing says it has them (or it offers them)."""
    labels = node.labels
    if not _has_gpus(node, resource):
        return None
    if labels.get(PLUGIN_DEPLOY) == "false":
        return f"label {PLUGIN_DEPLOY}=false: the GPU Operator runs no device plugin there"
    plugin = cluster.daemon(node.name, "device-plugin")
    if plugin is not None and not plugin.running:
        return f"its Pod {plugin.pod} is {plugin.state()}"
    offered = [r for r, n in node.node.allocatable.items() if gpus.is_gpu(r) and is_nvidia(r)]
    profile = mig_catalog.profile_for_resource(resource)
    count = labels.get(f"nvidia.com/mig-{profile}.count") if profile else None
    if offered and not (count and _positive(count)):
        return None  # it offers other GPU resources: a name or MIG layout matter
    shown = node.allocatable.get(resource)
    return f"allocatable {resource} = {shown}" if shown is not None else "not in allocatable"


def _has_gpus(node: NodeFacts, resource: str) -> bool:
    if not is_nvidia(resource):
        return False
    labels = node.labels
    profile = mig_catalog.profile_for_resource(resource)
    if profile is not None:
        count = labels.get(f"nvidia.com/mig-{profile}.count")
        if count is not None:
            return _positive(count)
    return labels.get("nvidia.com/gpu.present") == "true" or _positive(
        labels.get("nvidia.com/gpu.count", "")
    )


def _positive(text: str) -> bool:
    return text.isdigit() and int(text) > 0


def broken_nodes(
    cluster: ClusterFacts, resource: str, bits: int, gpus: GpuResources
) -> tuple[Broken, ...]:
    """The nodes of `bits` that do not offer `resource` but would, in node order."""
    key = ("broken", resource, bits)
    found = cluster.memo(key)
    if found is None:
        found = cluster.remember(key, tuple(_broken(cluster, resource, bits, gpus)))
    return found  # type: ignore[no-any-return]


def _broken(
    cluster: ClusterFacts, resource: str, bits: int, gpus: GpuResources
) -> Iterator[Broken]:
    if not is_nvidia(resource) or not plausible(resource, cluster):
        return
    lacking = bits & ~cluster.offering(resource)
    for node in cluster.named(lacking):
        why = mig_change(node)
        if why is not None:
            yield Broken(node, "mig-reconfiguring", why)
            continue
        why = plugin_problem(node, resource, cluster, gpus)
        if why is not None:
            yield Broken(node, "plugin-not-registered", why)


def plausible(resource: str, cluster: ClusterFacts) -> bool:
    """A name the NVIDIA device plugin can advertise: a typo cannot be "not registered"."""
    key = ("plausible", resource)
    found = cluster.memo(key)
    if found is None:
        known = resource in mig_catalog.catalog_resource_names()
        profile = mig_catalog.profile_for_resource(resource)
        if not known and profile is not None:
            known = bool(cluster.inventory.index.key_bits(f"nvidia.com/mig-{profile}.count"))
        found = cluster.remember(key, known)
    return bool(found)


def mig_single_products(cluster: ClusterFacts, resource: str) -> list[tuple[str, int]]:
    """(product label, nodes) of nodes whose MIG single strategy advertises the profile
    of `resource` as nvidia.com/gpu."""
    profile = mig_catalog.profile_for_resource(resource)
    ki = cluster.inventory.index.labels.get(PRODUCT)
    if profile is None or ki is None:
        return []
    single = cluster.inventory.index.label_bits("nvidia.com/mig.strategy", "single")
    suffix = f"-MIG-{profile}"
    found = []
    for value, nodes in ki.values.items():
        if value.removesuffix("-SHARED").endswith(suffix):
            count = (as_bits(nodes) & single & cluster.offering("nvidia.com/gpu")).bit_count()
            if count:
                found.append((value, count))
    return sorted(found)
