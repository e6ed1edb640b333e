"""Real upstream GPU-share and AMD/Intel manifests through the real `check`, against
nodes as their labellers label them.

The manifests in tests/realworld (kai, hami, volcano-vgpu, rocm, intel) are kept
verbatim; a platform team would require its two labels on them, so each case adds the
peak-memory and SLO-class labels to the pod (template) metadata, writes the result to a
file and checks it, with or without an inventory. The nodes carry the labels the
upstream labellers write: AMD's for an MI300X (ROCm/k8s-device-plugin
docs/user-guide/installation.md), Intel's labeller and NFD rule (intel-device-plugins
cmd/internal/labeler, cmd/gpu_plugin/labels.md), GFD's for NVIDIA.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.builders import node
from tests.support.clirun import gpu_admission
from tests.support.paths import TESTS

REALWORLD = TESTS / "realworld"
PEAK, SLO = "gpu-admission.io/peak-memory", "gpu-admission.io/slo-class"

A10G = node(  # a GFD-labelled NVIDIA node, no taint, no sharing
    "a10g-0",
    labels={"nvidia.com/gpu.product": "NVIDIA-A10G", "nvidia.com/gpu.memory": "23028"},
    allocatable={"nvidia.com/gpu": "4"},
)
H100 = node(
    "h100-0",
    labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"},
    allocatable={"nvidia.com/gpu": "8"},
)
MI300X = node(  # the labels installation.md shows for an AMD MI300X
    "mi300x-0",
    labels={
        "amd.com/gpu.cu-count": "304",
        "amd.com/gpu.device-id": "74a1",
        "amd.com/gpu.family": "AI",
        "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM",
        "amd.com/gpu.simd-count": "1216",
        "amd.com/gpu.vram": "192G",
    },
    allocatable={"amd.com/gpu": "8"},
)
FLEX170 = node(  # one Flex 170 (16 GB), the GPU plugin run with -shared-dev-num 10
    "flex-0",
    labels={
        "gpu.intel.com/device.count": "1",
        "gpu.intel.com/family": "Flex_Series",
        "gpu.intel.com/product": "Flex_170",
        "gpu.intel.com/memory.max": "16000000000",
        "gpu.intel.com/gpu-numbers": "0",
        "gpu.intel.com/cards": "card0",
        "gpu.intel.com/millicores": "1000",
        "gpu.intel.com/tiles": "1",
    },
    allocatable={"gpu.intel.com/i915": "10"},
)


def labelled(source: str, labels: dict[str, str], tmp_path: Path) -> Path:
    """The upstream manifest with the labels added to its pod (template) metadata."""
    obj: dict[str, Any] = yaml.safe_load((REALWORLD / source).read_text())
    meta = obj["metadata"] if obj["kind"] == "Pod" else obj["spec"]["template"]["metadata"]
    meta["labels"] = {**meta.get("labels", {}), **labels}
    out = tmp_path / Path(source).name
    out.write_text(yaml.safe_dump(obj))
    return out


def check(path: Path, nodes: list[dict[str, Any]] | None, tmp_path: Path) -> list[tuple[str, str]]:
    args = ["check", "-o", "json", str(path)]
    if nodes is not None:
        inventory = tmp_path / "nodes.json"
        inventory.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
        args += ["--inventory", str(inventory)]
    proc = gpu_admission(*args)
    assert proc.stderr == ""
    body = json.loads(proc.stdout)
    assert body["errors"] == []
    # The shares' verdicts; a multi-GPU Pod's /dev/shm is gpu-distributed's (tests/e2e
    # test_realworld.py counts those).
    found = [(r["rule"], r["message"]) for r in body["results"] if r["policy"] != "gpu-distributed"]
    assert proc.returncode == (1 if any(r["action"] == "deny" for r in body["results"]) else 0)
    return found


CASES: list[tuple[str, str, dict[str, str], list[dict[str, Any]] | None, list[tuple[str, str]]]] = [
    (
        "kai-fraction-latency-no-inventory",
        "kai/gpu-sharing.yaml",
        {SLO: "latency-sensitive", PEAK: "12Gi"},
        None,
        [
            (
                "unknown-device-memory",
                "the pod needs 12 GiB (12288 MiB) per device "
                '(gpu-admission.io/peak-memory=12Gi), and container "gpu-workload" asks for '
                'part of a GPU (annotation gpu-fraction="0.5", KAI scheduler): a fraction of a '
                "device whose memory is not known without an inventory, so the fit cannot be "
                "proven. Ask for at least 12 GiB (12288 MiB) per device (annotation gpu-memory: "
                '"12288"), or pass --inventory to compare with the real nodes.',
            ),
            (
                "sharing-mode-not-accepted",
                "the pod is latency-sensitive (gpu-admission.io/slo-class), which accepts only "
                'exclusive or mig GPUs, but container "gpu-workload" asks for part of a GPU '
                '(annotation gpu-fraction="0.5", KAI scheduler), a time-shared GPU wherever it '
                "lands: KAI packs several pods onto one GPU and enforces neither a memory limit "
                "nor isolation between them, so another tenant can stall this one or take its "
                "memory. Remove the gpu-fraction and gpu-memory annotations and request "
                "nvidia.com/gpu: 1, or request a MIG resource (nvidia.com/mig-<profile>).",
            ),
        ],
    ),
    (
        "kai-fraction-batch-a10g",
        "kai/gpu-sharing.yaml",
        {SLO: "batch", PEAK: "12Gi"},
        [A10G],
        [
            (
                "exceeds-device-memory",
                "the pod needs 12 GiB (12288 MiB) per device "
                '(gpu-admission.io/peak-memory=12Gi), but container "gpu-workload" asks for '
                'part of a GPU (annotation gpu-fraction="0.5", KAI scheduler), which is 11.24 '
                "GiB (11514 MiB) of the 23028 MiB of nvidia.com/gpu (label "
                "nvidia.com/gpu.memory) on node a10g-0, where the scheduler may place it: KAI "
                "enforces no limit, so the workload would take memory promised to the pods it "
                "shares the GPU with, or run out of it. Ask for at least 12 GiB (12288 MiB) per "
                'device (annotation gpu-memory: "12288").',
            ),
        ],
    ),
    (
        "kai-fraction-batch-h100",
        "kai/gpu-sharing.yaml",
        {SLO: "batch", PEAK: "12Gi"},
        [H100],
        [],
    ),
    (
        "kai-memory-fits",
        "kai/gpu-memory.yaml",
        {SLO: "batch", PEAK: "1900Mi"},
        None,
        [],
    ),
    (
        "kai-memory-too-small",
        "kai/gpu-memory.yaml",
        {SLO: "batch", PEAK: "4Gi"},
        None,
        [
            (
                "exceeds-device-memory",
                "the pod needs 4 GiB (4096 MiB) per device (gpu-admission.io/peak-memory=4Gi), "
                'but container "gpu-workload" asks for part of a GPU (annotation '
                'gpu-memory="2000", KAI scheduler), which gives it 1.95 GiB (2000 MiB) per '
                "device: KAI enforces no limit, so the workload would take memory promised to "
                "the pods it shares the GPU with, or run out of it. Ask for at least 4 GiB "
                '(4096 MiB) per device (annotation gpu-memory: "4096").',
            ),
        ],
    ),
    (
        "hami-gpumem-latency",
        "hami/default_use.yaml",
        {SLO: "latency-sensitive", PEAK: "4Gi"},
        [H100],
        [
            (
                "exceeds-device-memory",
                "the pod needs 4 GiB (4096 MiB) per device (gpu-admission.io/peak-memory=4Gi), "
                'but container "ubuntu-container" asks for part of a GPU (nvidia.com/gpumem: '
                "3000, HAMi), which gives it 2.93 GiB (3000 MiB) per device: HAMi-core stops "
                "the workload at that limit, so it would run out of GPU memory. Ask for at "
                "least 4 GiB (4096 MiB) per device (nvidia.com/gpumem: 4096).",
            ),
            (
                "sharing-mode-not-accepted",
                "the pod is latency-sensitive (gpu-admission.io/slo-class), which accepts only "
                'exclusive or mig GPUs, but container "ubuntu-container" asks for part of a GPU '
                "(nvidia.com/gpumem: 3000, HAMi), a time-shared GPU wherever it lands: "
                "HAMi-core caps the share's memory but time-slices the GPU's compute between "
                "the pods on it, so another tenant's load stalls this one. Set "
                "nvidia.com/gpucores: 100 (HAMi then gives it a GPU of its own), or annotate "
                "the pod nvidia.com/vgpu-mode: mig for a MIG slice.",
            ),
        ],
    ),
    (
        "hami-exclusive-card",
        "hami/use_exclusive_card.yaml",
        {SLO: "latency-sensitive", PEAK: "40Gi"},
        [H100],
        [],
    ),
    (
        "hami-memory-fraction",
        "hami/use_memory_fraction.yaml",
        {SLO: "batch", PEAK: "48Gi"},
        [H100],
        [
            (
                "exceeds-device-memory",
                "the pod needs 48 GiB (49152 MiB) per device "
                '(gpu-admission.io/peak-memory=48Gi), but container "ubuntu-container" asks for '
                "part of a GPU (nvidia.com/gpumem-percentage: 50, HAMi), which is 39.82 GiB "
                "(40780 MiB) of the 81559 MiB of nvidia.com/gpu (label nvidia.com/gpu.memory) "
                "on node h100-0, where the scheduler may place it: HAMi-core stops the workload "
                "at that limit, so it would run out of GPU memory. Ask for at least 48 GiB "
                "(49152 MiB) per device (nvidia.com/gpumem: 49152).",
            ),
        ],
    ),
    (
        "volcano-vgpu-latency",
        "volcano-vgpu/vgpu-case02.yml",
        {SLO: "latency-sensitive", PEAK: "8Gi"},
        None,
        [
            (
                "sharing-mode-not-accepted",
                "the pod is latency-sensitive (gpu-admission.io/slo-class), which accepts only "
                'exclusive or mig GPUs, but container "pod1-ctr" asks for part of a GPU '
                "(volcano.sh/vgpu-memory: 10240, Volcano vGPU), a time-shared GPU wherever it "
                "lands: HAMi-core caps the share's memory but time-slices the GPU's compute "
                "between the pods on it, so another tenant's load stalls this one. Set "
                "volcano.sh/vgpu-cores: 100 (Volcano vGPU then gives it a GPU of its own), or "
                "annotate the pod volcano.sh/vgpu-mode: mig for a MIG slice.",
            ),
        ],
    ),
    (
        "volcano-gpu-share",
        "volcano-vgpu/gpu-share.yml",
        {SLO: "batch", PEAK: "2Gi"},
        None,
        [
            (
                "exceeds-device-memory",
                "the pod needs 2 GiB (2048 MiB) per device (gpu-admission.io/peak-memory=2Gi), "
                'but container "pod1-ctr" asks for part of a GPU (volcano.sh/gpu-memory: 1024, '
                "Volcano GPU share), which gives it 1 GiB (1024 MiB) per device: the workload "
                "would take memory promised to the pods it shares the GPU with, or run out of "
                "it. Ask for at least 2 GiB (2048 MiB) per device (volcano.sh/gpu-memory: "
                "2048).",
            ),
        ],
    ),
    (
        "rocm-fits-mi300x",
        "rocm/pytorch.yaml",
        {SLO: "latency-sensitive", PEAK: "180Gi"},
        [MI300X],
        [],
    ),
    (
        "rocm-exceeds-mi300x",
        "rocm/pytorch.yaml",
        {SLO: "latency-sensitive", PEAK: "192Gi"},
        [MI300X],
        [
            (
                "exceeds-device-memory",
                "the pod needs 192 GiB (196608 MiB) per device "
                "(gpu-admission.io/peak-memory=192Gi), but amd.com/gpu offers 196096 MiB (label "
                "amd.com/gpu.vram=192G, rounded to the nearest GiB: at least 196096 MiB) on "
                "node mi300x-0, where the scheduler may place it: the workload would run out of "
                "GPU memory. No GPU resource in the cluster has that much memory per device: "
                "reduce the peak.",
            ),
        ],
    ),
    (
        "intel-shared-flex",
        "intel/intelgpu-job.yaml",
        {SLO: "latency-sensitive", PEAK: "1Gi"},
        [FLEX170],
        [
            (
                "sharing-mode-not-accepted",
                "the pod is latency-sensitive (gpu-admission.io/slo-class), which accepts only "
                'exclusive or mig GPUs, but container "intelgpu-demo-job" requests '
                "gpu.intel.com/i915, which is time-slicing (10 replicas per device) on node "
                "flex-0, where it can land: time-sliced replicas share the GPU's time and "
                "memory with no isolation, so another tenant can stall this one or take its "
                "memory. Request exclusive GPUs.",
            ),
        ],
    ),
    (
        "intel-batch-flex",
        "intel/intelgpu-job.yaml",
        {SLO: "batch", PEAK: "1Gi"},
        [FLEX170],
        [],
    ),
]


@pytest.mark.parametrize(
    ("source", "labels", "nodes", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_real_share_and_vendor_manifests(
    source: str,
    labels: dict[str, str],
    nodes: list[dict[str, Any]] | None,
    expected: list[tuple[str, str]],
    tmp_path: Path,
) -> None:
    assert check(labelled(source, labels, tmp_path), nodes, tmp_path) == expected
