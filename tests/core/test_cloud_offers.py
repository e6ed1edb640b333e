"""Node facts besides GFD's labels: cloud labels under their profile, vGPU registers."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.support.paths import TESTS
from webhook.core.supply.cloud_offers import DEFAULT_READ, Adapter
from webhook.core.supply.nodes import make_offer, parse_node
from webhook.core.supply.profiles import BUILTIN, added_tolerations, profile
from webhook.core.workloads.targets import pod_views
from webhook.sources.files import read_inventory

NODES = TESTS / "realworld_nodes"
GKE: frozenset[Adapter] = BUILTIN["gke"].node_facts
EKS: frozenset[Adapter] = BUILTIN["eks"].node_facts
AKS: frozenset[Adapter] = BUILTIN["aks"].node_facts
NONE: frozenset[Adapter] = frozenset()
HAMI_JSON = '[{"id":"GPU-a","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-V100"}]'
HAMI_OLD = "GPU-a,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:GPU-b,10,16384,100,V100,0,true:"


def _node(labels: dict[str, str], annotations: dict[str, str] | None = None) -> Any:
    return parse_node(
        {
            "kind": "Node",
            "metadata": {"name": "n", "labels": labels, "annotations": annotations or {}},
            "status": {"allocatable": {"nvidia.com/gpu": "4", "volcano.sh/vgpu-number": "20"}},
        }
    )


def _row(labels: dict[str, str], read: frozenset[Adapter], **kw: Any) -> tuple[Any, ...]:
    node = _node(labels, kw.get("annotations"))
    o = make_offer(node, kw.get("resource", "nvidia.com/gpu"), 4, read=read)
    return (o.sharing, o.replicas, o.memory_mib, o.memory_source, o.product)


GKE_L4 = {"cloud.google.com/gke-accelerator": "nvidia-l4"}
T4_SHARED = {
    "cloud.google.com/gke-accelerator": "nvidia-tesla-t4",
    "cloud.google.com/gke-gpu-sharing-strategy": "time-sharing",
    "cloud.google.com/gke-max-shared-clients-per-gpu": "4",
}
BY_GKE_L4 = "catalog value for NVIDIA-L4, by cloud.google.com/gke-accelerator=nvidia-l4"
BY_T4 = "catalog value for Tesla-T4, by cloud.google.com/gke-accelerator=nvidia-tesla-t4"
A100_MIG = {
    "cloud.google.com/gke-accelerator": "nvidia-tesla-a100",
    "cloud.google.com/gke-gpu-partition-size": "1g.5gb",
}
KARPENTER_T4 = {
    "karpenter.k8s.aws/instance-gpu-name": "t4",
    "karpenter.k8s.aws/instance-gpu-memory": "16384",
}
KARPENTER_L4 = {
    "karpenter.k8s.aws/instance-gpu-name": "l4",
    "karpenter.k8s.aws/instance-gpu-memory": "22888",
}
KARPENTER_NEW = {
    "karpenter.k8s.aws/instance-gpu-name": "b300",
    "karpenter.k8s.aws/instance-gpu-memory": "276480",
}
AUTO_MODE = {
    "eks.amazonaws.com/instance-gpu-name": "a100",
    "eks.amazonaws.com/instance-gpu-memory": "81920",
}
AKS_A100 = {
    "kubernetes.azure.com/accelerator": "nvidia",
    "node.kubernetes.io/instance-type": "Standard_NC24ads_A100_v4",
}
UNKNOWN = ("exclusive", 1, None, "no memory label", "")


@pytest.mark.parametrize(
    ("labels", "read", "extra", "expected"),
    [
        pytest.param(GKE_L4, GKE, {}, ("exclusive", 1, 23034, BY_GKE_L4, "NVIDIA-L4"), id="gke"),
        pytest.param(GKE_L4, NONE, {}, UNKNOWN, id="gke labels, generic profile"),
        pytest.param(GKE_L4, EKS, {}, UNKNOWN, id="gke labels, eks profile"),
        pytest.param(
            {"cloud.google.com/gke-accelerator": "nvidia-tesla-x99"},
            GKE,
            {},
            ("exclusive", 1, None, "no memory label", "nvidia-tesla-x99"),
            id="unknown gke accelerator: no memory, no guess",
        ),
        pytest.param(
            T4_SHARED, GKE, {}, ("time-slicing", 4, 15360, BY_T4, "Tesla-T4"), id="time-sharing"
        ),
        pytest.param(
            {**T4_SHARED, "cloud.google.com/gke-gpu-sharing-strategy": "mps"},
            GKE,
            {},
            ("mps", 4, 15360, BY_T4, "Tesla-T4"),
            id="gke mps",
        ),
        pytest.param(
            A100_MIG,
            GKE,
            {},
            ("mig", 1, 4864, "catalog value for A100 40GB", "NVIDIA-A100-SXM4-40GB"),
            id="gke partition: nvidia.com/gpu is a 1g.5gb slice",
        ),
        pytest.param(
            {**GKE_L4, "nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.memory": "23000"},
            GKE,
            {},
            ("exclusive", 1, 23000, "label nvidia.com/gpu.memory", "NVIDIA-L4"),
            id="gfd labels win",
        ),
        pytest.param(
            KARPENTER_T4,
            EKS,
            {},
            (
                "exclusive",
                1,
                15360,
                "catalog value for Tesla-T4, by karpenter.k8s.aws/instance-gpu-name=t4",
                "Tesla-T4",
            ),
            id="karpenter: EC2's 16384 MiB overstates a T4, the catalog's 15360 wins",
        ),
        pytest.param(
            KARPENTER_L4,
            EKS,
            {},
            ("exclusive", 1, 22888, "label karpenter.k8s.aws/instance-gpu-memory", "l4"),
            id="karpenter: the label's smaller figure wins",
        ),
        pytest.param(
            KARPENTER_NEW,
            EKS,
            {},
            ("exclusive", 1, 276480, "label karpenter.k8s.aws/instance-gpu-memory", "b300"),
            id="karpenter: a GPU the catalog lacks keeps the label",
        ),
        pytest.param(
            AUTO_MODE,
            EKS,
            {},
            (
                "exclusive",
                1,
                81920,
                "catalog value for NVIDIA-A100-SXM4-80GB, by "
                "eks.amazonaws.com/instance-gpu-name=a100",
                "NVIDIA-A100-SXM4-80GB",
            ),
            id="eks auto mode labels",
        ),
        pytest.param(
            {"node.kubernetes.io/instance-type": "p4d.24xlarge"},
            EKS,
            {},
            (
                "exclusive",
                1,
                40960,
                "catalog value for NVIDIA-A100-SXM4-40GB, by "
                "node.kubernetes.io/instance-type=p4d.24xlarge",
                "NVIDIA-A100-SXM4-40GB",
            ),
            id="ec2 instance family",
        ),
        pytest.param(
            {"node.kubernetes.io/instance-type": "p4d.24xlarge"}, AKS, {}, UNKNOWN, id="ec2, aks"
        ),
        pytest.param(
            AKS_A100,
            AKS,
            {},
            (
                "exclusive",
                1,
                81920,
                "catalog value for NVIDIA-A100-SXM4-80GB, by "
                "node.kubernetes.io/instance-type=Standard_NC24ads_A100_v4",
                "NVIDIA-A100-SXM4-80GB",
            ),
            id="aks vm size",
        ),
        pytest.param(
            {"kubernetes.azure.com/accelerator": "nvidia"}, AKS, {}, UNKNOWN, id="aks vendor only"
        ),
        pytest.param(
            {"gpu": "on"},
            DEFAULT_READ,
            {"annotations": {"hami.io/node-nvidia-register": HAMI_JSON}},
            ("vgpu", 10, 32768, "annotation hami.io/node-nvidia-register", "NVIDIA-V100"),
            id="hami json register",
        ),
        pytest.param(
            {"gpu": "on"},
            DEFAULT_READ,
            {"annotations": {"hami.io/node-nvidia-register": HAMI_OLD}},
            (
                "vgpu",
                10,
                16384,
                "annotation hami.io/node-nvidia-register",
                "NVIDIA-Tesla V100-PCIE-32GB",
            ),
            id="hami 2.x records: the smallest device",
        ),
        pytest.param(
            {"gpu": "on"},
            DEFAULT_READ,
            {"annotations": {"hami.io/node-nvidia-register": "[" * 5000}},
            ("vgpu", 1, None, "no memory in annotation hami.io/node-nvidia-register", ""),
            id="hami register that does not parse: still shared, memory unknown",
        ),
        pytest.param(
            {"gpu": "on"},
            NONE,
            {"annotations": {"hami.io/node-nvidia-register": HAMI_JSON}},
            UNKNOWN,
            id="hami not among the mechanisms in use",
        ),
        pytest.param(
            {},
            DEFAULT_READ,
            {
                "annotations": {"volcano.sh/node-vgpu-register": HAMI_OLD},
                "resource": "volcano.sh/vgpu-number",
            },
            (
                "vgpu",
                10,
                16384,
                "annotation volcano.sh/node-vgpu-register",
                "NVIDIA-Tesla V100-PCIE-32GB",
            ),
            id="volcano vgpu-number",
        ),
        pytest.param(
            {},
            DEFAULT_READ,
            {"resource": "volcano.sh/vgpu-number"},
            ("vgpu", 1, None, "no memory label", ""),
            id="volcano vgpu-number without its register",
        ),
    ],
)
def test_node_facts(
    labels: dict[str, str], read: frozenset[Adapter], extra: dict[str, Any], expected: Any
) -> None:
    assert _row(labels, read, **extra) == expected


def test_annotations_kept_are_only_the_registers_and_bounded() -> None:
    node = _node(
        {},
        {
            "hami.io/node-nvidia-register": "x" * 100_000,
            "hami.io/node-handshake": "Reported 2026-12-01 14:00:00",
            "node.alpha.kubernetes.io/ttl": "0",
        },
    )
    assert list(node.annotations) == ["hami.io/node-nvidia-register"]
    assert len(node.annotations["hami.io/node-nvidia-register"]) == 65536
    # The handshake HAMi rewrites every 30 s is not kept: its updates change nothing.
    assert _node({}, {"hami.io/node-handshake": "Reported now"}) == _node({})


def test_profile_node_facts() -> None:
    assert BUILTIN["generic"].node_facts == {"hami", "volcano"}
    assert BUILTIN["gke"].node_facts == {"gke", "hami", "volcano"}
    assert profile("eks", sharing=("time-slicing", "kai")).node_facts == {"eks"}


def test_inventory_reads_nodes_as_the_profile_says() -> None:
    generic = read_inventory(str(NODES / "gke.yaml"))
    gke = generic.reading(GKE)
    assert gke is generic.reading(GKE)  # built once per snapshot
    assert generic.reading(DEFAULT_READ) is generic
    memory = {o.node.name: o.memory_mib for o in gke.offers["nvidia.com/gpu"]}
    assert memory == {
        "gke-ml-t4-pool-4d0fa82d-ttxh": 15360,
        "gke-ml-l4-shared-6c1b2e07-9q2x": 23034,
        "gke-ml-a100-mig-0b9e41c2-7hd5": 4864,
    }
    assert {o.memory_mib for o in generic.offers["nvidia.com/gpu"]} == {None}
    # A node update on the profile's snapshot keeps the profile's reading.
    doc = yaml.safe_load((NODES / "gke.yaml").read_text())
    changed = doc["items"][0]
    changed["metadata"]["labels"]["cloud.google.com/gke-accelerator"] = "nvidia-l4"
    updated = gke.with_node(changed)
    assert updated.offers["nvidia.com/gpu"][0].memory_mib == 23034


def _pod(spec: dict[str, Any]) -> Any:
    [view] = pod_views({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    return view


def test_extended_resource_toleration_adds_one_per_requested_extended_resource() -> None:
    view = _pod(
        {
            "initContainers": [{"name": "i", "resources": {"limits": {"example.com/fpga": 1}}}],
            "containers": [
                {
                    "name": "a",
                    "resources": {
                        "limits": {"nvidia.com/gpu": 1, "cpu": 2},
                        "requests": {"hugepages-2Mi": "1Gi", "rdma/ib": 0},
                    },
                },
                {"name": "b", "resources": {"limits": {"nvidia.com/gpu": 2}}},
            ],
            "ephemeralContainers": [{"name": "e", "resources": {"limits": {"x.io/dev": 1}}}],
        }
    )
    assert added_tolerations(view) == [
        {"key": "example.com/fpga", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "rdma/ib", "operator": "Exists", "effect": "NoSchedule"},
    ]
