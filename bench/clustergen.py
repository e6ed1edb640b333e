"""Realistic Node objects for benchmarks: what `kubectl get nodes -o json` shows on a
mixed GPU cluster (EKS-like names and cloud labels, GPU Feature Discovery labels,
NFD labels, taints on the GPU pools, conditions, images).

Pools, by share of the nodes:
- H100 80GB, 8 GPUs, exclusive, tainted nvidia.com/gpu=present:NoSchedule     (15%)
- A100 80GB, MIG mixed strategy (2x1g.10gb + 1x2g.20gb + 1x3g.40gb per GPU),
  tainted                                                                      (15%)
- A100 40GB, 8 GPUs, exclusive, tainted                                        (10%)
- A10G, 4 GPUs time-sliced into 4 replicas each (nvidia.com/gpu: 16)           (15%)
- L4, 8 GPUs shared through MPS, 2 replicas each, tainted dedicated=mps        (5%)
- CPU only                                                                     (40%)

Names are `ip-10-x-y-z.<region>.compute.internal`, and the List is sorted by name as
the apiserver returns it (etcd keys in order), so the pools interleave.
"""

from __future__ import annotations

import random
from typing import Any

import orjson

REGION = "us-west-2"
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d")
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
MPS_TAINT = {"key": "dedicated", "value": "mps", "effect": "NoSchedule"}

_IMAGES = [
    ("nvcr.io/nvidia/driver", "570.124.06-ubuntu22.04", 1_642_000_000),
    ("nvcr.io/nvidia/k8s/container-toolkit", "v1.17.5-ubuntu20.04", 147_000_000),
    ("nvcr.io/nvidia/k8s-device-plugin", "v0.17.1", 187_000_000),
    ("nvcr.io/nvidia/k8s/dcgm-exporter", "4.1.1-4.0.4-ubuntu22.04", 412_000_000),
    ("nvcr.io/nvidia/cloud-native/gpu-operator-validator", "v25.3.0", 98_000_000),
    ("nvcr.io/nvidia/cloud-native/k8s-mig-manager", "v0.12.1-ubuntu20.04", 160_000_000),
    ("registry.k8s.io/nfd/node-feature-discovery", "v0.17.2", 62_000_000),
    ("602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni", "v1.19.2", 48_000_000),
    ("602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/kube-proxy", "v1.31.3", 33_000_000),
    ("602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause", "3.10", 300_000),
    ("quay.io/prometheus/node-exporter", "v1.9.0", 11_000_000),
    ("cr.fluentbit.io/fluent/fluent-bit", "3.2.8", 38_000_000),
    ("nvcr.io/nvidia/pytorch", "25.02-py3", 9_800_000_000),
    ("vllm/vllm-openai", "v0.8.4", 8_300_000_000),
    ("ghcr.io/example/trainer", "2025.04.11-3f2a9c1", 6_100_000_000),
    ("ghcr.io/example/embedder", "1.14.2", 2_900_000_000),
]


def _pool_labels(pool: str, rng: random.Random) -> tuple[dict[str, str], dict[str, str]]:
    """GFD labels and extended allocatable of one pool."""
    if pool == "cpu":
        return {}, {}
    gfd = {
        "nvidia.com/cuda.driver-version.full": "570.124.06",
        "nvidia.com/cuda.driver-version.major": "570",
        "nvidia.com/cuda.driver-version.minor": "124",
        "nvidia.com/cuda.driver-version.revision": "06",
        "nvidia.com/cuda.runtime-version.full": "12.8",
        "nvidia.com/cuda.runtime-version.major": "12",
        "nvidia.com/cuda.runtime-version.minor": "8",
        "nvidia.com/gfd.timestamp": str(1_749_717_600 + rng.randrange(86_400)),
        "nvidia.com/gpu.deploy.container-toolkit": "true",
        "nvidia.com/gpu.deploy.dcgm-exporter": "true",
        "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/mps.capable": "false",
        "nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
    }
    specs: dict[str, tuple[str, str, str, str, str, str]] = {
        # product, memory, count, family, compute major, machine
        "h100": ("NVIDIA-H100-80GB-HBM3", "81559", "8", "hopper", "9", "p5.48xlarge"),
        "a100-mig": ("NVIDIA-A100-SXM4-80GB", "81920", "8", "ampere", "8", "p4de.24xlarge"),
        "a100-40": ("NVIDIA-A100-SXM4-40GB", "40960", "8", "ampere", "8", "p4d.24xlarge"),
        "a10g-ts": ("NVIDIA-A10G-SHARED", "23028", "4", "ampere", "8", "g5.12xlarge"),
        "l4-mps": ("NVIDIA-L4", "23034", "8", "ada-lovelace", "8", "g6.48xlarge"),
    }
    product, memory, count, family, major, machine = specs[pool]
    gfd |= {
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.memory": memory,
        "nvidia.com/gpu.count": count,
        "nvidia.com/gpu.family": family,
        "nvidia.com/gpu.compute.major": major,
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.machine": machine,
        "nvidia.com/mig.capable": "true" if pool in ("h100", "a100-mig", "a100-40") else "false",
    }
    if pool == "a100-mig":
        gfd |= {"nvidia.com/mig.strategy": "mixed", "nvidia.com/mig.config": "all-balanced"}
        gfd["nvidia.com/mig.config.state"] = "success"
        for profile, n, mem, sm in (
            ("1g.10gb", 16, "9856", "14"),
            ("2g.20gb", 8, "19968", "28"),
            ("3g.40gb", 8, "40192", "42"),
        ):
            prefix = f"nvidia.com/mig-{profile}."
            gfd |= {
                prefix + "count": str(n),
                prefix + "memory": mem,
                prefix + "multiprocessors": sm,
                prefix + "product": f"{product}-MIG-{profile}",
                prefix + "replicas": "1",
                prefix + "sharing-strategy": "none",
            }
        return gfd, {
            "nvidia.com/gpu": "0",
            "nvidia.com/mig-1g.10gb": "16",
            "nvidia.com/mig-2g.20gb": "8",
            "nvidia.com/mig-3g.40gb": "8",
            "vpc.amazonaws.com/efa": "4",
        }
    if pool == "a10g-ts":
        gfd |= {"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4"}
        return gfd, {"nvidia.com/gpu": "16"}
    if pool == "l4-mps":
        gfd |= {"nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "2"}
        return gfd, {"nvidia.com/gpu": "16"}
    gfd |= {"nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.replicas": "1"}
    efa = {"vpc.amazonaws.com/efa": "32"} if pool == "h100" else {}
    return gfd, {"nvidia.com/gpu": "8", **efa}


_INSTANCE = {
    "h100": ("p5.48xlarge", "192", "2007Gi"),
    "a100-mig": ("p4de.24xlarge", "96", "1152Gi"),
    "a100-40": ("p4d.24xlarge", "96", "1152Gi"),
    "a10g-ts": ("g5.12xlarge", "48", "192Gi"),
    "l4-mps": ("g6.48xlarge", "192", "768Gi"),
    "cpu": ("m6i.8xlarge", "32", "128Gi"),
}


def _pool(i: int) -> str:
    share = i % 20
    if share < 3:
        return "h100"
    if share < 6:
        return "a100-mig"
    if share < 8:
        return "a100-40"
    if share < 11:
        return "a10g-ts"
    if share < 12:
        return "l4-mps"
    return "cpu"


def node(i: int, rng: random.Random) -> dict[str, Any]:
    pool = _pool(i)
    ip = f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}"
    name = node_name(i)
    zone = ZONES[rng.randrange(len(ZONES))]
    instance, cpus, memory = _INSTANCE[pool]
    gfd, extended = _pool_labels(pool, rng)
    nodegroup = f"{pool}-{zone[-1]}"
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": instance,
        "beta.kubernetes.io/os": "linux",
        "eks.amazonaws.com/capacityType": "ON_DEMAND" if pool != "cpu" else "SPOT",
        "eks.amazonaws.com/nodegroup": nodegroup,
        "eks.amazonaws.com/nodegroup-image": "ami-0a1b2c3d4e5f60718",
        "eks.amazonaws.com/sourceLaunchTemplateId": "lt-0123456789abcdef0",
        "eks.amazonaws.com/sourceLaunchTemplateVersion": "7",
        "failure-domain.beta.kubernetes.io/region": REGION,
        "failure-domain.beta.kubernetes.io/zone": zone,
        "k8s.io/cloud-provider-aws": "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": instance,
        "topology.k8s.aws/zone-id": f"usw2-az{ZONES.index(zone) + 1}",
        "topology.kubernetes.io/region": REGION,
        "topology.kubernetes.io/zone": zone,
        "example.com/team": ("ml-platform", "research", "inference", "data")[i % 4],
        "example.com/environment": "production",
        "feature.node.kubernetes.io/cpu-cpuid.AVX512F": "true",
        "feature.node.kubernetes.io/cpu-hardware_multithreading": "true",
        "feature.node.kubernetes.io/kernel-version.full": "6.1.128-136.201.amzn2023.x86_64",
        "feature.node.kubernetes.io/kernel-version.major": "6",
        "feature.node.kubernetes.io/kernel-version.minor": "1",
        "feature.node.kubernetes.io/system-os_release.ID": "amzn",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "2023",
        **({"feature.node.kubernetes.io/pci-10de.present": "true"} if gfd else {}),
        **gfd,
    }
    taints = (
        [GPU_TAINT]
        if pool in ("h100", "a100-mig", "a100-40")
        else [MPS_TAINT]
        if pool == "l4-mps"
        else []
    )
    allocatable = {
        "cpu": f"{int(cpus) * 1000 - 100}m",
        "ephemeral-storage": "95551679124",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": memory,
        "pods": "737" if pool != "cpu" else "234",
        **extended,
    }
    images = rng.sample(_IMAGES, 10 if pool == "cpu" else 14)
    transition = "2025-03-04T10:12:31Z"
    heartbeat = "2025-06-12T08:41:07Z"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": ip,
                "csi.volume.kubernetes.io/nodeid": f'{{"ebs.csi.aws.com":"i-0{i:016x}"}}',
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "nfd.node.kubernetes.io/feature-labels": "cpu-cpuid.AVX512F,"
                "cpu-hardware_multithreading,kernel-version.full,kernel-version.major,"
                "kernel-version.minor,system-os_release.ID,system-os_release.VERSION_ID",
            },
            "creationTimestamp": transition,
            "labels": labels,
            "name": name,
            "resourceVersion": str(1_000_000 + i),
            "uid": f"{i:08x}-1f2e-4d3c-8b7a-{rng.getrandbits(48):012x}",
        },
        "spec": {
            "providerID": f"aws:///{zone}/i-0{i:016x}",
            **({"taints": taints} if taints else {}),
        },
        "status": {
            "addresses": [
                {"address": ip, "type": "InternalIP"},
                {"address": name, "type": "InternalDNS"},
                {"address": name, "type": "Hostname"},
            ],
            "allocatable": allocatable,
            "capacity": {**allocatable, "cpu": cpus},
            "conditions": [
                {
                    "lastHeartbeatTime": heartbeat,
                    "lastTransitionTime": transition,
                    "message": message,
                    "reason": reason,
                    "status": status,
                    "type": kind,
                }
                for kind, status, reason, message in (
                    (
                        "MemoryPressure",
                        "False",
                        "KubeletHasSufficientMemory",
                        "kubelet has sufficient memory available",
                    ),
                    (
                        "DiskPressure",
                        "False",
                        "KubeletHasNoDiskPressure",
                        "kubelet has no disk pressure",
                    ),
                    (
                        "PIDPressure",
                        "False",
                        "KubeletHasSufficientPID",
                        "kubelet has sufficient PID available",
                    ),
                    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
                )
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": [
                {
                    "names": [
                        f"{repo}@sha256:{rng.getrandbits(256):064x}",
                        f"{repo}:{tag}",
                    ],
                    "sizeBytes": size,
                }
                for repo, tag, size in images
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": f"{rng.getrandbits(128):032x}",
                "containerRuntimeVersion": "containerd://1.7.25",
                "kernelVersion": "6.1.128-136.201.amzn2023.x86_64",
                "kubeProxyVersion": "v1.31.3-eks-59bf375",
                "kubeletVersion": "v1.31.3-eks-59bf375",
                "machineID": f"ec2{rng.getrandbits(116):029x}",
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2023.6.20250303",
                "systemUUID": f"ec2{rng.getrandbits(116):029x}",
            },
        },
    }


def _names(count: int) -> list[tuple[str, int]]:
    return sorted((node_name(i), i) for i in range(count))


def node_name(i: int) -> str:
    return f"ip-10-{i // 65536 % 256}-{i // 256 % 256}-{i % 256}.{REGION}.compute.internal"


def node_list(count: int, *, seed: int = 7) -> dict[str, Any]:
    """A `kubectl get nodes -o json` List of `count` nodes, in name order."""
    rng = random.Random(seed)
    items = [node(i, rng) for _, i in _names(count)]
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


def write_node_list(path: str, count: int, *, seed: int = 7) -> int:
    """The same List written node by node (50,000 nodes as dicts at once would take
    gigabytes), pretty-printed as jq and orjson print it (2-space indent; kubectl's
    4 spaces add ~25% whitespace, nothing else). Returns the size in bytes."""
    rng = random.Random(seed)
    with open(path, "wb") as out:
        out.write(b'{\n  "apiVersion": "v1",\n  "items": [\n')
        for n, (_, i) in enumerate(_names(count)):
            text = orjson.dumps(node(i, rng), option=orjson.OPT_INDENT_2)
            out.write((b",\n    " if n else b"    ") + text.replace(b"\n", b"\n    "))
        out.write(b'\n  ],\n  "kind": "List",\n  "metadata": {\n    "resourceVersion": ""\n  }\n}')
        return out.tell()
