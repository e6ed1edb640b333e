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

It holds the cluster facts that admission cannot read from a Pod or today's Nodes:
- `gpu_nodes`: taints and labels **every** GPU node carries, now and after an autoscaler
  adds one (webhook.core.supply.gpu_placement proves from them that a Pod cannot reach a
  GPU node). A built-in profile holds only what its cloud applies to every GPU node:
  GKE's driver installer and device plugin run only where
  `cloud.google.com/gke-accelerator` is set (GoogleCloudPlatform/container-engine-accelerators
  nvidia-driver-installer/cos/daemonset-preloaded.yaml@feb27ef3, node affinity `Exists`),
  so every GKE node with a working GPU has it. GKE's `nvidia.com/gpu=present:NoSchedule`
  taint is applied only "when you add a GPU node pool to an existing cluster that already
  runs a non-GPU node pool" (GKE docs how-to/gpus, as quoted in kserve
  docs/samples/accelerators): not every GPU node has it, so it is no fact here. EKS and
  AKS document neither for every GPU node ("Azure does not use node taints for GPU
  enabled nodes", the same page).
- `container_toolkit`: how the NVIDIA container toolkit and device plugin are set up
  (nvidia-container-toolkit api/config/v1/config.go GetDefault,
  NVIDIA/nvidia-container-toolkit@d34b3046: `accept-nvidia-visible-devices-envvar-when-unprivileged`
  defaults to true; k8s-device-plugin cmd/nvidia-device-plugin/main.go,
  NVIDIA/k8s-device-plugin@1b826acc: `--device-list-strategy` defaults to `envvar`).
- `seccomp_default`: the kubelets run with `seccompDefault: true`, so a container with no
  seccomp profile gets RuntimeDefault instead of Unconfined (pkg/kubelet/kuberuntime/helpers.go
  fieldSeccompProfile, kubernetes/kubernetes@e2cf0fe0; off by default).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, get_args

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
DeviceListStrategy = Literal["envvar", "volume-mounts", "cdi-annotations", "cdi-cri"]
DEVICE_LIST_STRATEGIES: tuple[DeviceListStrategy, ...] = get_args(DeviceListStrategy)


class TaintFact(NamedTuple):
    key: str
    value: str | None  # None: any value
    effect: str


@dataclass(frozen=True, slots=True)
class GpuNodes:
    """What every GPU node of the cluster carries: taints, and labels (a value of None:
    the key with any value)."""

    taints: tuple[TaintFact, ...] = ()
    labels: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True, slots=True)
class ContainerToolkit:
    """The NVIDIA container toolkit's and device plugin's settings on the GPU nodes."""

    accept_envvar_unprivileged: bool = True
    device_list_strategy: DeviceListStrategy = "envvar"


@dataclass(frozen=True, slots=True)
class ClusterProfile:
    """What the cluster adds at admission, and what it is (one value per policy set)."""

    name: ProfileName = "generic"
    extended_resource_toleration: bool = False
    sharing: tuple[Mechanism, ...] = MECHANISMS
    source: str = "built-in"  # the ClusterProfile document, or the --cluster-profile flag
    gpu_nodes: GpuNodes = GpuNodes()
    container_toolkit: ContainerToolkit = ContainerToolkit()
    seccomp_default: bool = False

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


GKE_GPU_NODES = GpuNodes(labels=(("cloud.google.com/gke-accelerator", None),))
BUILTIN: dict[ProfileName, ClusterProfile] = {
    "generic": ClusterProfile("generic"),
    "gke": ClusterProfile("gke", extended_resource_toleration=True, gpu_nodes=GKE_GPU_NODES),
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
    gpu_nodes: GpuNodes | None = None,
    container_toolkit: ContainerToolkit | None = None,
    seccomp_default: bool | None = None,
) -> ClusterProfile:
    """The built-in profile `name`, with what a ClusterProfile document sets explicitly."""
    base = BUILTIN[name]
    ert = base.extended_resource_toleration
    return ClusterProfile(
        name,
        ert if extended_resource_toleration is None else extended_resource_toleration,
        base.sharing if sharing is None else tuple(dict.fromkeys(sharing)),
        source,
        base.gpu_nodes if gpu_nodes is None else gpu_nodes,
        base.container_toolkit if container_toolkit is None else container_toolkit,
        base.seccomp_default if seccomp_default is None else seccomp_default,
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
