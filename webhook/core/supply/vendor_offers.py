"""AMD and Intel GPU offers: memory and sharing from their node labellers' labels.

`webhook.core.supply.nodes.make_offer` asks here for resources that are not NVIDIA's. What the
labels mean, from the labellers' code (docs/policies.md, "AMD and Intel GPUs"):

- AMD GPU node labeller (ROCm/k8s-device-plugin cmd/k8s-node-labeller/main.go, the
  `vram` generator): `amd.com/gpu.vram` (and `beta.amd.com/gpu.vram`) is the VRAM of the
  node's GPUs as `<N>G`, N = the MiB size / 1024 rounded to the nearest whole number;
  with GPUs of several sizes the key is `amd.com/gpu.vram.<N>G` per size instead. A
  rounded `<N>G` can mean 512 MiB less than N GiB, so that is what counts. The product
  is `amd.com/gpu.product-name`. A partitioned GPU (`amd.com/compute-memory-partition`
  other than `spx_nps1`, docs/user-guide/configuration.md) advertises partitions, whose
  memory the labels do not give. The AMD device plugin has no time-slicing.
- Intel GPU labeller (intel/intel-device-plugins-for-kubernetes cmd/internal/labeler):
  `gpu.intel.com/memory.max` is the local memory of all the node's GPUs added up, in
  bytes (addNumericLabel adds each GPU's); `gpu.intel.com/gpu-numbers` lists the GPUs
  (`0.1.2`). With `-shared-dev-num` above 1 the plugin advertises that many containers
  per GPU, "not suitable for time critical workloads" (cmd/gpu_plugin/README.md), which
  shows as more allocatable devices than GPUs.

Everything here runs when an inventory is built, never per request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal, NamedTuple

VendorMode = Literal["exclusive", "time-slicing"]

AMD_GPU = "amd.com/gpu"
INTEL_GPUS = ("gpu.intel.com/i915", "gpu.intel.com/xe")
_VRAM = re.compile(r"([0-9]{1,7})G")


class VendorFacts(NamedTuple):
    """What an offer of a non-NVIDIA GPU resource is, besides its node and count."""

    sharing: VendorMode
    replicas: int
    memory_mib: int | None
    memory_source: str
    product: str


def vendor_facts(labels: Mapping[str, str], resource: str, count: int) -> VendorFacts | None:
    """The facts of an AMD or Intel GPU offer, or None for any other resource."""
    if resource == AMD_GPU:
        return _amd(labels)
    if resource in INTEL_GPUS:
        return _intel(labels, count)
    return None


def _amd(labels: Mapping[str, str]) -> VendorFacts:
    product = labels.get("amd.com/gpu.product-name") or labels.get(
        "beta.amd.com/gpu.product-name", ""
    )
    partition = labels.get("amd.com/compute-memory-partition", "spx_nps1")
    if partition != "spx_nps1":
        source = f"no memory label for one partition (amd.com/compute-memory-partition={partition})"
        return VendorFacts("exclusive", 1, None, source, product)
    for key in ("amd.com/gpu.vram", "beta.amd.com/gpu.vram"):
        found = _VRAM.fullmatch(labels.get(key, ""))
        if found is not None:
            return VendorFacts("exclusive", 1, *_vram(key, found.group(0)), product)
    # GPUs of several sizes: one `amd.com/gpu.vram.<N>G` key per size; the smallest counts.
    sizes = [
        m.group(0)
        for key in labels
        if key.startswith("amd.com/gpu.vram.")
        for m in (_VRAM.fullmatch(key[len("amd.com/gpu.vram.") :]),)
        if m is not None
    ]
    if sizes:
        smallest = min(sizes, key=lambda s: int(s[:-1]))
        return VendorFacts(
            "exclusive", 1, *_vram(f"amd.com/gpu.vram.{smallest}", smallest), product
        )
    return VendorFacts("exclusive", 1, None, "no memory label", product)


def _vram(key: str, value: str) -> tuple[int | None, str]:
    mib = int(value[:-1]) * 1024 - 512
    if mib <= 0:
        return None, f"label {key}={value} (too small to mean anything)"
    return mib, f"label {key}={value}, rounded to the nearest GiB: at least {mib} MiB"


def _intel(labels: Mapping[str, str], count: int) -> VendorFacts:
    product = labels.get("gpu.intel.com/product", "")
    gpus = _intel_gpus(labels)
    replicas = count // gpus if gpus and count > gpus else 1
    mode: VendorMode = "time-slicing" if replicas > 1 else "exclusive"
    total = labels.get("gpu.intel.com/memory.max", "")
    if not gpus or not total.isdigit() or len(total) > 20 or int(total) == 0:
        return VendorFacts(mode, replicas, None, "no memory label", product)
    mib = int(total) // gpus // (1024 * 1024)
    each = f", {gpus} GPUs" if gpus > 1 else ""
    source = f"label gpu.intel.com/memory.max={total} bytes{each}"
    return VendorFacts(mode, replicas, mib or None, source, product)


def _intel_gpus(labels: Mapping[str, str]) -> int:
    """How many GPUs the labeller saw: `gpu-numbers` is `0.1.2`, continued in
    `gpu-numbers2`, ... when it is longer than a label value may be."""
    listed = labels.get("gpu.intel.com/gpu-numbers")
    if listed is None:
        return 0
    parts = [listed]
    for i in range(2, 64):
        more = labels.get(f"gpu.intel.com/gpu-numbers{i}")
        if more is None:
            break
        parts.append(more)
    joined = "".join(parts)
    # A split value ends in the labeller's control character "Z" where it continues.
    return len([n for n in joined.replace("Z", ".").split(".") if n.isdigit()])
