"""Cluster profiles: what the cluster adds to a Pod at admission, and the sharing it runs.

A manifest in a PR, a Deployment's template and an audited object are judged as the Pod
the apiserver will make of them, so what the cluster's own admission plugins add must
count. The one such addition the checks read is ExtendedResourceToleration
(kubernetes plugin/pkg/admission/extendedresourcetoleration/admission.go): for every
extended resource a container or init container requests it adds the toleration
`{key: <resource>, operator: Exists, effect: NoSchedule}`. GKE and EKS run it:
- GKE: it taints GPU node pools `nvidia.com/gpu=present:NoSchedule`, and "GKE will
  automatically apply corresponding tolerations to Pods requesting GPUs by running the
  ExtendedResourceToleration admission controller" (GKE docs how-to/gpus, as quoted in
  kserve docs/samples/accelerators);
- EKS: the admission controllers the EKS user guide lists as enabled on every platform
  version ("View Amazon EKS platform versions") include ExtendedResourceToleration,
  since Kubernetes 1.19 (aws/containers-roadmap#739).
AKS does not (Azure/AKS#1449 asks for it; its GPU docs tell users to add the toleration
for the `sku=gpu:NoSchedule` taint themselves).

A profile also says which node facts besides GFD's labels the inventory reads
(`node_facts`, webhook.core.supply.cloud_offers): its cloud's labels, and the vGPU registers of
the sharing mechanisms in use (HAMi, Volcano).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from webhook.core.kit.dicts import as_list
from webhook.core.supply.cloud_offers import Adapter
from webhook.core.workloads.pods import PodView

ProfileName = Literal["generic", "gke", "eks", "aks"]
PROFILE_NAMES: tuple[ProfileName, ...] = get_args(ProfileName)
# GPU sharing the cluster runs: the device plugin's time-slicing and MPS, HAMi's vGPU
# split, KAI's fractions (annotations on the Pod), Volcano's vGPU.
Mechanism = Literal["time-slicing", "mps", "hami", "kai", "volcano"]
MECHANISMS: tuple[Mechanism, ...] = get_args(Mechanism)
_PLACEMENT = "placement-spec"  # PodView.memo key: `placement_spec` caches its answer


@dataclass(frozen=True, slots=True)
class ClusterProfile:
    """What the cluster adds at admission (one value per policy set)."""

    name: ProfileName = "generic"
    extended_resource_toleration: bool = False
    sharing: tuple[Mechanism, ...] = MECHANISMS
    source: str = "built-in"  # the ClusterProfile document, or the --cluster-profile flag

    # The node-fact adapters an inventory runs for this profile (cloud_offers): its
    # cloud's labels, and the vGPU registers of the mechanisms in use. Derived once: the
    # engine compares it with the inventory's on every request.
    node_facts: frozenset[Adapter] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        found: set[Adapter] = set()
        if "hami" in self.sharing:
            found.add("hami")
        if "volcano" in self.sharing:
            found.add("volcano")
        if self.name != "generic":
            found.add(self.name)
        object.__setattr__(self, "node_facts", frozenset(found))


BUILTIN: dict[ProfileName, ClusterProfile] = {
    "generic": ClusterProfile("generic"),
    "gke": ClusterProfile("gke", extended_resource_toleration=True),
    "eks": ClusterProfile("eks", extended_resource_toleration=True),
    "aks": ClusterProfile("aks"),
}
GENERIC = BUILTIN["generic"]


def profile(
    name: ProfileName,
    *,
    extended_resource_toleration: bool | None = None,
    sharing: tuple[Mechanism, ...] | None = None,
    source: str = "built-in",
) -> ClusterProfile:
    """The built-in profile `name`, with what a ClusterProfile document sets explicitly."""
    base = BUILTIN[name]
    ert = base.extended_resource_toleration
    return ClusterProfile(
        name,
        ert if extended_resource_toleration is None else extended_resource_toleration,
        base.sharing if sharing is None else tuple(dict.fromkeys(sharing)),
        source,
    )


def is_extended_resource(name: str) -> bool:
    """helper.IsExtendedResourceName: a qualified name with a domain that is not
    kubernetes.io's, and not a quota's `requests.` name."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def added_tolerations(pod: PodView) -> list[dict[str, Any]]:
    """The tolerations ExtendedResourceToleration adds: one per extended resource that a
    container or init container requests (any amount: the plugin reads the keys of
    resources.requests, which default to the limits), in name order."""
    names = {
        a.resource
        for a in pod.amounts
        if a.container.field != "ephemeralContainers" and is_extended_resource(a.resource)
    }
    return [{"key": n, "operator": "Exists", "effect": "NoSchedule"} for n in sorted(names)]


def placement_spec(pod: PodView) -> Any:
    """The pod spec the scheduler will see: with the tolerations the cluster's admission
    plugins add where the profile runs them (the engine built the pod so); else the spec
    itself."""
    found = pod.memo.get(_PLACEMENT)
    if found is None:
        found = pod.spec
        if pod.tolerations_added:
            added = added_tolerations(pod)
            if added:
                found = {**pod.spec, "tolerations": [*as_list(pod.spec.get("tolerations")), *added]}
        pod.memo[_PLACEMENT] = found
    return found
