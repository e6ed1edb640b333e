"""A job as Kueue queues it: its pod sets, each a pod template, a count and what one Pod
requests.

Kueue makes one Workload of a job: a pod set per role, `count` Pods of it, each Pod's
requests as the scheduler counts them, limits standing in for missing requests
(kubernetes-sigs/kueue v0.19 pkg/workload/workload.go `NewInfo`, which sums
`PodRequests` per pod set). A Deployment's Pods are queued one at a time (its
integration makes a Workload per Pod), so it is a pod set of one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.kit.dicts import as_dict, as_list, str_map
from webhook.core.kit.paths import Path
from webhook.core.workloads.kinds import WorkloadView
from webhook.core.workloads.podrequests import pod_requests
from webhook.core.workloads.units import PODS

# Kinds whose Kueue integration queues each Pod on its own (pkg/controller/jobs/
# deployment: "pod group" of one per Pod): never the sum of the replicas.
PER_POD = frozenset({("apps", "Deployment"), ("", "Pod"), ("apps", "ReplicaSet")})


@dataclass(frozen=True, slots=True)
class PodSet:
    name: str  # the role's name, "main" where the kind has one template
    count: int  # Pods queued together (an unknown count: 1, the least it can be)
    requests: Mapping[str, int]  # one Pod's, in webhook.core.workloads.units
    node_selector: Mapping[str, str]
    affinity_terms: tuple[Mapping[str, Any], ...]  # required nodeSelectorTerms
    tolerations: tuple[Mapping[str, Any], ...]
    path: Path  # the role's pod spec

    def total(self, resource: str) -> int:
        return self.requests.get(resource, 0) * self.count


def pod_sets(workload: WorkloadView) -> tuple[PodSet, ...]:
    """The pod sets Kueue would make of the workload, in its roles' order."""
    one = (workload.group, workload.kind) in PER_POD
    out = []
    for role in workload.roles:
        spec = role.pod.spec
        requests = {r: v for r, v in pod_requests(spec).items() if r != PODS}
        count = 1 if one or role.replicas is None else role.replicas
        affinity = as_dict(as_dict(as_dict(spec.get("affinity")).get("nodeAffinity")))
        required = as_dict(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
        out.append(
            PodSet(
                role.name or "main",
                count,
                requests,
                str_map(spec.get("nodeSelector")),
                tuple(as_dict(t) for t in as_list(required.get("nodeSelectorTerms"))),
                tuple(as_dict(t) for t in as_list(spec.get("tolerations"))),
                role.pod.path,
            )
        )
    return tuple(out)
