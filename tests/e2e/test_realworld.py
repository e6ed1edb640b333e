"""Real upstream manifests of every shipped workload shape, through the real `check`.

tests/realworld holds them verbatim (SOURCES.md: URL, commit, licence). None carries the
peak-memory and SLO labels, so every GPU pod is asked for both; the RayJob's head pins a
T4 node the inventory does not have. Before workload shapes, the RayService, the
InferenceServices, the NIMService, the TrainJob, the runtime, the TFJob, the PaddleJob
and the Volcano Job passed as "not a configured workload kind".
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.support.builders import EXAMPLES, ROOT
from tests.support.paths import TESTS

REALWORLD = TESTS / "realworld"
NODES = str(EXAMPLES / "cluster" / "nodes.json")
ASKED = ("missing-peak-memory", "missing-slo-class")

EXPECTED = {
    ("kserve/hf_isvc.yaml", "InferenceService"): 1,
    ("kserve/tensorflow-gpu.yaml", "InferenceService"): 1,
    ("kuberay/ray-job.batch-inference.yaml", "RayJob"): 1,
    ("kuberay/ray-service.text-summarizer.yaml", "RayService"): 1,
    ("lws/vllm-gpu-lws.yaml", "LeaderWorkerSet"): 2,
    ("nim-operator/standalone-basic-llm.yaml", "NIMService"): 1,
    ("trainer/lammps-train-gpus.yaml", "TrainJob"): 1,
    ("trainer/torchtune-llama3_2_1B.yaml", "ClusterTrainingRuntime"): 1,
    ("training-operator/multi_worker_tfjob.yaml", "TFJob"): 1,
    ("training-operator/paddle-simple-gpu.yaml", "PaddleJob"): 1,
    ("training-operator/pytorch_job_mnist_gloo.yaml", "PyTorchJob"): 2,
    ("volcano/mindspore-gpu.yaml", "Job"): 1,
    # GPU shares, asked for the labels through the share (before shares they passed
    # with no finding: a KAI pod asks no resource at all), and AMD and Intel GPUs.
    ("kai/gpu-sharing.yaml", "Pod"): 1,
    ("kai/gpu-memory.yaml", "Pod"): 1,
    ("hami/default_use.yaml", "Pod"): 1,
    ("hami/use_exclusive_card.yaml", "Pod"): 1,
    ("hami/use_memory_fraction.yaml", "Pod"): 1,
    ("volcano-vgpu/vgpu-case02.yml", "Pod"): 1,
    ("volcano-vgpu/gpu-share.yml", "Pod"): 1,
    ("rocm/pytorch.yaml", "Pod"): 1,
    ("intel/intelgpu-job.yaml", "Job"): 1,
}


def test_every_real_manifest_gets_the_expected_verdict() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "check",
            "-o",
            "json",
            "--inventory",
            NODES,
            str(REALWORLD),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.stderr == ""
    assert proc.returncode == 1  # GPU pods without the labels are denied
    body = json.loads(proc.stdout)
    assert body["errors"] == []
    found = Counter(
        (Path(r["file"]).relative_to(REALWORLD).as_posix(), r["kind"], r["rule"])
        for r in body["results"]
    )
    expected = Counter({(f, k, rule): n for (f, k), n in EXPECTED.items() for rule in ASKED})
    expected[("kuberay/ray-job.batch-inference.yaml", "RayJob", "no-candidate-node")] = 1
    # The example cluster has no AMD or Intel node (test_realworld_shares has them).
    expected[("rocm/pytorch.yaml", "Pod", "unknown-resource")] = 1
    expected[("intel/intelgpu-job.yaml", "Job", "unknown-resource")] = 1
    # gpu-distributed's warnings: jobs of several GPU Pods with no gang, several ranks on
    # the runtime's 64 MiB /dev/shm or on a /dev/shm without sizeLimit, and an LWS whose
    # groups of 2 x 8 GPUs no node of the example cluster can hold together.
    for where, rule in [
        (("hami/use_exclusive_card.yaml", "Pod"), "shm-default"),
        (("hami/use_memory_fraction.yaml", "Pod"), "shm-default"),
        (("lws/vllm-gpu-lws.yaml", "LeaderWorkerSet"), "gang-not-wired"),
        (("lws/vllm-gpu-lws.yaml", "LeaderWorkerSet"), "gang-never-fits"),
        (("trainer/torchtune-llama3_2_1B.yaml", "ClusterTrainingRuntime"), "shm-default"),
        (("training-operator/multi_worker_tfjob.yaml", "TFJob"), "gang-not-wired"),
        (("training-operator/paddle-simple-gpu.yaml", "PaddleJob"), "gang-not-wired"),
        (("training-operator/paddle-simple-gpu.yaml", "PaddleJob"), "shm-unbounded"),
        (("training-operator/pytorch_job_mnist_gloo.yaml", "PyTorchJob"), "gang-not-wired"),
    ]:
        expected[(*where, rule)] = 1
    assert found == expected
    # No GPU-bearing object passed as an unknown kind; the ones skipped hold no GPUs.
    assert body["summary"]["skippedReasons"] == {
        "kind NIMCache (apps.nvidia.com/v1alpha1) is not a configured workload kind "
        "(WorkloadKinds)": 1,
        "kind Service holds no pod spec": 1,
        "kind ConfigMap holds no pod spec": 1,
    }
    # Checked without findings: a CPU TrainJob, a Notebook, a Spark job without GPUs.
    assert body["summary"]["evaluated"] == 24  # 21 above and these 3


def test_sources_name_every_file() -> None:
    listed = (REALWORLD / "SOURCES.md").read_text()
    files = sorted(
        p.relative_to(REALWORLD).as_posix()
        for p in REALWORLD.rglob("*.y*ml")
        if p.suffix in (".yaml", ".yml")
    )
    for name in files:
        assert f"| {name} | https://github.com/" in listed, name
