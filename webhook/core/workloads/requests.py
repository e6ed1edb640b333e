"""What a Pod takes from a node, as Kubernetes counts it: the one effective-request rule.

k8s.io/component-helpers/resource `PodRequests` (the NodeResourcesFit filter and the
ResourceQuota evaluator both call it), kubernetes v1.34:

- regular containers run together: their requests add up;
- a sidecar (an init container with `restartPolicy: Always`, KEP-753) keeps running:
  it adds to the regular containers, and to every init container started after it;
- any other init container runs alone, beside the sidecars started before it;
- the Pod takes the larger of the running set and its largest init step, per resource;
- ephemeral containers take nothing.

The policies (webhook.core.workloads.pods: extended resources as exact counts) and
`diagnose` (webhook.core.workloads.podrequests: every resource, in the scheduler's units,
with pod-level requests and overhead after this rule) both come here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any, Literal

Count = int | Fraction  # whole in practice; exact when not
ContainerRole = Literal["container", "init", "sidecar", "ephemeral"]


def container_role(field: str, container: Mapping[str, Any]) -> ContainerRole:
    """What a container of the pod spec's list `field` is to the rule above."""
    if field == "initContainers":
        return "sidecar" if container.get("restartPolicy") == "Always" else "init"
    return "ephemeral" if field == "ephemeralContainers" else "container"


def effective_requests(asks: Iterable[tuple[ContainerRole, str, Count]]) -> dict[str, Count]:
    """The Pod's request of each resource, from (role, resource, amount) in the order of
    the pod spec (init containers in their own order: a sidecar counts for those after it).
    Whole amounts in, whole amounts out."""
    running: dict[str, Count] = {}
    init_peak: dict[str, Count] = {}
    sidecars: dict[str, Count] = {}
    for role, resource, amount in asks:
        if role == "container":
            running[resource] = running.get(resource, 0) + amount
        elif role == "sidecar":
            sidecars[resource] = sidecars.get(resource, 0) + amount
            running[resource] = running.get(resource, 0) + amount
        elif role == "init":
            step = amount + sidecars.get(resource, 0)
            if step > init_peak.get(resource, 0):
                init_peak[resource] = step
    if not init_peak:
        return running
    return {
        r: max(running.get(r, 0), init_peak.get(r, 0))
        for r in dict.fromkeys([*running, *init_peak])
    }
