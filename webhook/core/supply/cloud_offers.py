"""What a GPU node offers when GPU Feature Discovery did not label it: cloud and vGPU facts.

`make_offer` (webhook.core.supply.nodes) reads GFD's labels first; where they are absent,
`node_facts` says what the cloud's own labels and the vGPU schedulers' node facts tell:
- GKE: `cloud.google.com/gke-accelerator` (the GPU type, GKE docs "About GPUs"),
  `cloud.google.com/gke-gpu-sharing-strategy` (`time-sharing` | `mps`) and
  `cloud.google.com/gke-max-shared-clients-per-gpu` (GKE docs "About GPU sharing
  strategies", concepts/timesharing-gpus), `cloud.google.com/gke-gpu-partition-size`
  (a MIG profile; nvidia.com/gpu is then one slice: GKE docs "Running multi-instance GPUs").
- EKS with Karpenter: `karpenter.k8s.aws/instance-gpu-name` and `-gpu-memory`
  (karpenter-provider-aws docs, concepts/scheduling.md "Well-Known Labels": "Name of the
  GPU on the instance", "Number of mebibytes of memory on the GPU", e.g. t4 and 16384);
  EKS Auto Mode's `eks.amazonaws.com/instance-gpu-*` alike. The memory is EC2's figure
  per GPU, which can overstate what the device exposes (t4: 16384, where GFD reads
  15360), so the catalog value of the named GPU wins when it is smaller. Else the
  instance type's family (`node.kubernetes.io/instance-type`: EC2 "Accelerated
  computing instances": g4dn T4, g5 A10G, g6 L4, g6e L40S, p3 V100, p4d A100 40GB,
  p4de A100 80GB, p5 H100, p5e/p5en H200).
- AKS: the VM size in `node.kubernetes.io/instance-type` where it names the GPU (Azure
  "NCasT4_v3", "NC A100 v4", "ND A100 v4", "NC H100 v5", "ND H100 v5" series pages);
  `kubernetes.azure.com/accelerator` says only the vendor (`nvidia`).
- HAMi: the device plugin registers each node's GPUs in the annotation
  `hami.io/node-nvidia-register` (HAMi docs "Device registration protocol": a JSON list,
  per device `count` = vGPUs it is split into, `devmem` MiB, `type`; HAMi 2.x and
  earlier wrote `id,count,devmem,devcore,type,numa,health:` per device); Volcano's vGPU
  plugin the same shape in `volcano.sh/node-vgpu-register`, and advertises
  `volcano.sh/vgpu-number`. Such a node's GPUs are split between tenants: mode `vgpu`.
An accelerator value not in the tables gets no memory (the "no memory label" path),
never a guess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

Mode = Literal["exclusive", "mig", "time-slicing", "mps", "vgpu"]
# Node annotations the inventory keeps (parse_node drops every other one), each cut to
# this many characters: 16 devices of HAMi's JSON are about 4 KiB.
HAMI_REGISTER = "hami.io/node-nvidia-register"
VOLCANO_REGISTER = "volcano.sh/node-vgpu-register"
KEPT_ANNOTATIONS = (HAMI_REGISTER, VOLCANO_REGISTER)
MAX_ANNOTATION = 65536
VOLCANO_VGPU = "volcano.sh/vgpu-number"
# Which adapters an inventory runs (ClusterProfile.node_facts): a cloud's labels are read
# under its profile only, a vGPU register when its mechanism is among those in use.
Adapter = Literal["gke", "eks", "aks", "hami", "volcano"]
DEFAULT_READ: frozenset[Adapter] = frozenset({"hami", "volcano"})
_REGISTERS: tuple[tuple[Adapter, str], ...] = (
    ("hami", HAMI_REGISTER),
    ("volcano", VOLCANO_REGISTER),
)


@dataclass(frozen=True, slots=True)
class Gpu:
    product: str  # as GFD names it, so the MIG catalog finds the model
    mib: int
    measured: bool  # False: Google's/NVIDIA's nominal GB read as 10^9 bytes, a lower bound
    source: str


def _nominal(product: str, gb: int, source: str) -> Gpu:
    return Gpu(product, gb * 10**9 // 2**20, False, source)


# Memory per device, MiB. Measured values are GFD's nvidia.com/gpu.memory (NVML's total)
# on real nodes of that product, as pasted in public threads; the rest are nominal.
GPUS: dict[str, Gpu] = {
    "t4": Gpu("Tesla-T4", 15360, True, "GFD nvidia.com/gpu.memory on Tesla-T4 nodes"),
    "l4": Gpu("NVIDIA-L4", 23034, True, "GFD on an NVIDIA-L4 Google-Compute-Engine node"),
    "a10g": Gpu("NVIDIA-A10G", 23028, True, "GFD on an NVIDIA-A10G g5.2xlarge node"),
    "a100-40gb": Gpu("NVIDIA-A100-SXM4-40GB", 40960, True, "GFD on A100-SXM4-40GB nodes"),
    "a100-80gb": Gpu("NVIDIA-A100-SXM4-80GB", 81920, True, "GFD on an NVIDIA-DGX-A100 80GB"),
    "h100-80gb": Gpu("NVIDIA-H100-80GB-HBM3", 81559, True, "GFD on NVIDIA-H100-80GB-HBM3 nodes"),
    "h100-nvl": _nominal("NVIDIA-H100-NVL", 94, "NVIDIA H100 NVL datasheet, 94 GB"),
    "h200-141gb": _nominal("NVIDIA-H200", 141, "Google GPU machine types, H200 141 GB"),
    "b200": _nominal("NVIDIA-B200", 180, "Google GPU machine types, B200 180 GB"),
    "gb200": _nominal("NVIDIA-GB200", 186, "Google GPU machine types, GB200 186 GB"),
    "rtx-pro-6000": _nominal("NVIDIA-RTX-PRO-6000", 96, "Google GPU machine types, 96 GB"),
    "l40s": _nominal("NVIDIA-L40S", 48, "AWS G6e instances, L40S 48 GB"),
    "v100-16gb": _nominal("Tesla-V100-SXM2-16GB", 16, "Google/AWS GPU tables, V100 16 GB"),
    "v100-32gb": _nominal("Tesla-V100-SXM2-32GB", 32, "AWS P3dn instances, V100 32 GB"),
    "p100": _nominal("Tesla-P100-PCIE-16GB", 16, "Google GPU machine types, P100 16 GB"),
}

# cloud.google.com/gke-accelerator values (GKE docs "About GPUs", Compute Engine "GPU
# machine types"). nvidia-tesla-p4 and -k80 are left out: their nominal size read as
# 10^9 bytes is above what they expose, and no measured value was found.
GKE_ACCELERATORS: dict[str, str] = {
    "nvidia-tesla-t4": "t4",
    "nvidia-l4": "l4",
    "nvidia-tesla-a100": "a100-40gb",
    "nvidia-a100-80gb": "a100-80gb",
    "nvidia-h100-80gb": "h100-80gb",
    "nvidia-h100-mega-80gb": "h100-80gb",
    "nvidia-h200-141gb": "h200-141gb",
    "nvidia-b200": "b200",
    "nvidia-gb200": "gb200",
    "nvidia-rtx-pro-6000": "rtx-pro-6000",
    "nvidia-tesla-v100": "v100-16gb",
    "nvidia-tesla-p100": "p100",
}
_GKE_MODES: dict[str, Mode] = {"time-sharing": "time-slicing", "mps": "mps"}

# karpenter.k8s.aws/instance-gpu-name (lowercase EC2 GPU names) with the nominal MiB of
# instance-gpu-memory where one name covers two sizes.
_KARPENTER: dict[tuple[str, int | None], str] = {
    ("t4", None): "t4",
    ("l4", None): "l4",
    ("a10g", None): "a10g",
    ("l40s", None): "l40s",
    ("a100", 40960): "a100-40gb",
    ("a100", 81920): "a100-80gb",
    ("h100", None): "h100-80gb",
    ("h200", None): "h200-141gb",
    ("v100", 16384): "v100-16gb",
    ("v100", 32768): "v100-32gb",
}
# Karpenter's labels, and EKS Auto Mode's of the same meaning (EKS user guide, "Target
# AI/ML workloads to specific nodes with labels").
_EKS_PREFIXES = ("karpenter.k8s.aws/", "eks.amazonaws.com/")
# EC2 instance families (the part of node.kubernetes.io/instance-type before the dot).
_EC2_FAMILIES: dict[str, str] = {
    "g4dn": "t4",
    "g5": "a10g",
    "g6": "l4",
    "g6e": "l40s",
    "p3": "v100-16gb",
    "p3dn": "v100-32gb",
    "p4d": "a100-40gb",
    "p4de": "a100-80gb",
    "p5": "h100-80gb",
    "p5e": "h200-141gb",
    "p5en": "h200-141gb",
}
# Azure VM sizes (node.kubernetes.io/instance-type), first match wins. Patterns, not
# compiled ones: `re` compiles (and keeps) them when an AKS inventory is first read.
_AZURE_SIZES: tuple[tuple[str, str], ...] = (
    (r"^Standard_NC\d+as_T4_v3$", "t4"),
    (r"^Standard_NC\d+ads_A100_v4$", "a100-80gb"),
    (r"^Standard_ND96amsr_A100_v4$", "a100-80gb"),
    (r"^Standard_ND96asr_v4$", "a100-40gb"),
    (r"^Standard_NC\d+ads_H100_v5$", "h100-nvl"),
    (r"^Standard_ND96isr_H100_v5$", "h100-80gb"),
    (r"^Standard_NC\d+s_v3$", "v100-16gb"),
)


@dataclass(frozen=True, slots=True)
class CloudFacts:
    """What a node's non-GFD labels and annotations say about its nvidia.com/gpu."""

    product: str = ""
    mib: int | None = None
    memory_source: str = "no memory label"
    mode: Mode | None = None  # None: nothing said
    replicas: int = 1
    mig_profile: str | None = None  # GKE partition size: nvidia.com/gpu is this slice


NO_FACTS = CloudFacts()


def node_facts(
    labels: Mapping[str, str], annotations: Mapping[str, str], *, read: frozenset[Adapter]
) -> CloudFacts:
    """The first of the `read` adapters that recognises the node: vGPU registers, then
    the cloud's labels."""
    for adapter, key in _REGISTERS:
        raw = annotations.get(key)
        if raw is not None and adapter in read:
            return _vgpu_facts(key, raw)
    if "gke" in read:
        accelerator = labels.get("cloud.google.com/gke-accelerator")
        if accelerator is not None:
            return _gke_facts(accelerator, labels)
    instance = labels.get("node.kubernetes.io/instance-type")
    if "eks" in read:
        for prefix in _EKS_PREFIXES:
            if prefix + "instance-gpu-name" in labels:
                return _karpenter_facts(labels, prefix)
        family = _EC2_FAMILIES.get(instance.split(".", 1)[0]) if instance else None
        if family is not None:
            return _catalog(family, f"node.kubernetes.io/instance-type={instance}")
    if "aks" in read and instance is not None:
        size = next((k for pattern, k in _AZURE_SIZES if re.match(pattern, instance)), None)
        if size is not None:
            return _catalog(size, f"node.kubernetes.io/instance-type={instance}")
    return NO_FACTS


@lru_cache(maxsize=256)  # a few accelerator types per cluster: one value (and string) each
def _catalog(key: str, why: str) -> CloudFacts:
    gpu = GPUS[key]
    kind = "catalog value" if gpu.measured else "conservative estimate"
    return CloudFacts(gpu.product, gpu.mib, f"{kind} for {gpu.product}, by {why}")


def _gke_facts(accelerator: str, labels: Mapping[str, str]) -> CloudFacts:
    why = f"cloud.google.com/gke-accelerator={accelerator}"
    key = GKE_ACCELERATORS.get(accelerator)
    facts = _catalog(key, why) if key is not None else CloudFacts(accelerator[:80])
    strategy = labels.get("cloud.google.com/gke-gpu-sharing-strategy", "")
    mode = _GKE_MODES.get(strategy)
    replicas = _positive(labels.get("cloud.google.com/gke-max-shared-clients-per-gpu"))
    partition = labels.get("cloud.google.com/gke-gpu-partition-size")
    if mode is None and replicas > 1:
        mode = "time-slicing"  # the clients label without a strategy: GKE's default
    if partition is not None:
        return CloudFacts(
            facts.product, None, "no memory label", mode or "mig", replicas, partition
        )
    return CloudFacts(facts.product, facts.mib, facts.memory_source, mode, replicas)


def _karpenter_facts(labels: Mapping[str, str], prefix: str) -> CloudFacts:
    """The instance's GPU by Karpenter's (or EKS Auto Mode's) labels: the catalog value
    of the named GPU, unless the label's memory is smaller (it is EC2's figure)."""
    name = labels.get(prefix + "instance-gpu-name", "").lower()[:80]
    mib = _positive(labels.get(prefix + "instance-gpu-memory"), default=0) or None
    key = _KARPENTER.get((name, None)) or _KARPENTER.get((name, mib))
    if key is not None and (mib is None or GPUS[key].mib <= mib):
        return _catalog(key, f"{prefix}instance-gpu-name={name}")
    if mib is not None:
        return CloudFacts(name, mib, f"label {prefix}instance-gpu-memory")
    return CloudFacts(name)


def _vgpu_facts(key: str, raw: str) -> CloudFacts:
    """A HAMi or Volcano register: the split count and the smallest device's memory."""
    devices = _register_devices(raw)
    if not devices:
        return CloudFacts(mode="vgpu", memory_source=f"no memory in annotation {key}")
    count = min(c for c, _, _ in devices)
    mib = min(m for _, m, _ in devices)
    product = devices[0][2]
    return CloudFacts(product, mib or None, f"annotation {key}", "vgpu", max(count, 1))


def _register_devices(raw: str) -> list[tuple[int, int, str]]:
    """(count, devmem MiB, type) per device, from the JSON list or the older
    `id,count,devmem,devcore,type,numa,health:` records; [] when neither parses."""
    text = raw.strip()
    if text.startswith("["):
        try:
            items = json.loads(text)
        except (ValueError, RecursionError):  # bounded in length, not in nesting
            return []
        out = []
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict):
                count, mem = item.get("count"), item.get("devmem")
                if isinstance(count, int) and isinstance(mem, int) and mem >= 0:
                    out.append((count, mem, str(item.get("type", ""))[:80]))
        return out
    out = []
    for record in text.split(":"):
        fields = record.split(",")
        if len(fields) >= 5 and _digits(fields[1]) and _digits(fields[2]):
            out.append((int(fields[1]), int(fields[2]), fields[4][:80]))
    return out


def _digits(text: str) -> bool:
    return text.isdigit() and len(text) <= 9


def _positive(value: str | None, *, default: int = 1) -> int:
    if value is None or not _digits(value):
        return default
    return int(value) or default
