"""What a check reads of the targets it judges: declared once, by the check.

Everything that must not hide what a check needs is derived from these declarations,
not from a list of checks somewhere else:

- the pre-filter (webhook.core.engine.prefilter) passes, without running the engine, a
  pod that holds none of the fields any loaded check reads;
- the server's evaluation cache (webhook.serve.evalcache) keys an object on what the
  checks can read of it, and never serves from the cache what depends on who asks;
- the DRA supply is warmed before a claim is judged, and it and the queue supply are
  joined from `check`'s own input, only where a check reads them;
- the webhook's matchConditions (webhook.kube.match_conditions) send the apiserver's
  requests that hold a trigger, and nothing else.

A pod-spec field listed here is a *trigger*: a check may read more (labels, node
selectors, tolerations), but finds nothing in a pod that holds none of its triggers.
A check that cannot say so declares `every_field`, and nothing is filtered before it.
A Namespace is judged only when it carries a label a check that judges Namespaces
declares (most Namespaces are then skipped, as any kind that holds nothing to judge).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields

_EMPTY: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Reads:
    # Triggers in a pod spec (in every container list) and its metadata:
    extended_resources: bool = False  # a resource name with a "/" in limits or requests
    claims: bool = False  # spec.resourceClaims, a container's resources.claims
    host_paths: bool = False  # a hostPath volume
    security: frozenset[str] = _EMPTY  # keys of a container's securityContext (privileged, ...)
    pod_security: frozenset[str] = _EMPTY  # keys of the pod's spec.securityContext
    env_from: bool = False  # a container's envFrom (what it sets cannot be seen)
    env: frozenset[str] = _EMPTY  # env variables by name
    env_prefixes: frozenset[str] = _EMPTY  # env variables by the start of their name
    mount_paths: frozenset[str] = _EMPTY  # a mountPath that holds one of these
    annotations: frozenset[str] = _EMPTY  # annotation keys
    annotation_prefixes: frozenset[str] = _EMPTY  # annotation keys by their part before "/"
    labels: frozenset[str] = _EMPTY  # label keys (a Namespace's admin-access label)
    # What a container's image may set (NVIDIA_VISIBLE_DEVICES=all in every CUDA image),
    # which admission cannot see: it matters for a pod that may run on a GPU node, where
    # the cluster's toolkit takes device lists from an unprivileged container's env. A
    # pod is a trigger when it is placed by nodeName or runs under a RuntimeClass, or
    # tolerates a taint GPU nodes carry: the cluster profile's (gpuNodes), else these
    # conventional keys (webhook.core.engine.prefilter image_env_taints).
    image_env: frozenset[str] = _EMPTY
    every_field: bool = False  # fields not declared above: nothing may be filtered out
    # Beyond the target's own fields:
    requester: bool = False  # who asks (userInfo), the object before an UPDATE, the operation
    names: bool = False  # the object's own name (or generateName): findings quote it
    owners: bool = False  # the kinds of the object's ownerReferences (who made a Pod)
    dra_supply: bool = False  # DeviceClasses, ResourceSlices, claims of the inventory
    queue_supply: bool = False  # Kueue's queues and the ResourceQuotas of the inventory

    def __or__(self, other: Reads) -> Reads:
        merged = {}
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            merged[f.name] = mine | theirs
        return Reads(**merged)


NOTHING = Reads()


def union(reads: Iterable[Reads]) -> Reads:
    out = NOTHING
    for r in reads:
        out = out | r
    return out
