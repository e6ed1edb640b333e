"""Cluster profiles through the real CLI: what GKE, EKS and AKS add at admission, and
the offers their node labels (and HAMi's register) describe.

Nodes: tests/realworld_nodes (SOURCES.md). The KServe sample is verbatim upstream
(tests/realworld/SOURCES.md): it requests a GPU and carries no toleration, because on GKE
the apiserver's ExtendedResourceToleration adds it.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import yaml

from tests.support.builders import POLICIES
from tests.support.clirun import gpu_admission
from tests.support.paths import TESTS
from tests.support.reviews import review
from tests.support.servers import Server

NODES = TESTS / "realworld_nodes"
KSERVE = str(TESTS / "realworld" / "kserve" / "tensorflow-gpu.yaml")

T4_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: infer, namespace: ml}
spec:
  selector: {matchLabels: {app: infer}}
  template:
    metadata:
      labels: {app: infer, gpu-admission.io/peak-memory: 16Gi, gpu-admission.io/slo-class: batch}
    spec:
      nodeSelector: {cloud.google.com/gke-accelerator: nvidia-tesla-t4}
      containers:
      - name: server
        image: vllm/vllm-openai
        resources: {limits: {nvidia.com/gpu: 1}}
"""
A10G_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: llm
  labels: {gpu-admission.io/peak-memory: 23Gi, gpu-admission.io/slo-class: batch}
spec:
  nodeSelector: {karpenter.k8s.aws/instance-gpu-name: a10g}
  containers:
  - name: server
    image: vllm/vllm-openai
    resources: {limits: {nvidia.com/gpu: 1}}
"""
LATENCY_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: api
  labels: {gpu-admission.io/peak-memory: 4Gi, gpu-admission.io/slo-class: latency-sensitive}
spec:
  containers:
  - name: server
    image: tritonserver
    resources: {limits: {nvidia.com/gpu: 1}}
"""

PENDING_ON_GKE = (
    'the pod requests nvidia.com/gpu (spec.predictor.tensorflow.resources.limits["nvidia.com/'
    'gpu"]), but none of the 3 nodes that advertise it can take this pod '
    "(gke-ml-t4-pool-4d0fa82d-ttxh: taint nvidia.com/gpu=present:NoSchedule, "
    "gke-ml-l4-shared-6c1b2e07-9q2x: taint nvidia.com/gpu=present:NoSchedule, "
    "gke-ml-a100-mig-0b9e41c2-7hd5: taint nvidia.com/gpu=present:NoSchedule), so it would "
    "stay Pending forever. Fix the nodeSelector/affinity, or add a toleration for the taint."
)
T4_TOO_SMALL = (
    "the pod needs 16 GiB (16384 MiB) per device (gpu-admission.io/peak-memory=16Gi), but "
    "nvidia.com/gpu offers 15360 MiB (catalog value for Tesla-T4, by "
    "cloud.google.com/gke-accelerator=nvidia-tesla-t4) on node gke-ml-t4-pool-4d0fa82d-ttxh, "
    "where the scheduler may place it: the workload would run out of GPU memory. No GPU "
    "resource in the cluster has that much memory per device: reduce the peak."
)
A10G_TOO_SMALL = (
    "the pod needs 23 GiB (23552 MiB) per device (gpu-admission.io/peak-memory=23Gi), but "
    "nvidia.com/gpu offers 23028 MiB (catalog value for NVIDIA-A10G, by "
    "karpenter.k8s.aws/instance-gpu-name=a10g) on node "
    "ip-10-32-136-67.eu-west-1.compute.internal, where the scheduler may place it: the "
    "workload would run out of GPU memory. No GPU resource in the cluster has that much "
    "memory per device: reduce the peak."
)
GKE_TIME_SHARED = (
    "the pod is latency-sensitive (gpu-admission.io/slo-class), which accepts only exclusive "
    'or mig GPUs, but container "server" requests nvidia.com/gpu, which is time-slicing '
    "(4 replicas per device) on node gke-ml-l4-shared-6c1b2e07-9q2x, where it can land: "
    "time-sliced replicas share the GPU's time and memory with no isolation, so another "
    "tenant can stall this one or take its memory. Request a MIG resource "
    "(nvidia.com/mig-<profile>) or exclusive GPUs, or pin the pod with nodeSelector "
    "cloud.google.com/gke-accelerator: nvidia-tesla-a100."
)
HAMI_SPLIT = (
    "the pod is latency-sensitive (gpu-admission.io/slo-class), which accepts only exclusive "
    'or mig GPUs, but container "server" requests nvidia.com/gpu, which is vgpu (10 vGPUs '
    "per device) on node hami-v100-0, where it can land: a vGPU scheduler (HAMi, Volcano) "
    "splits the GPU between tenants, who share its compute and fault domain with only "
    "software limits between them. Request a MIG resource (nvidia.com/mig-<profile>) or "
    "exclusive GPUs."
)
AKS_PENDING = (
    'the pod requests nvidia.com/gpu (spec.containers[0].resources.limits["nvidia.com/gpu"]), '
    "but the one node that advertises it cannot take this pod (aks-gpunp-28993262-vmss000000: "
    "taint sku=gpu:NoSchedule), so it would stay Pending forever. Fix the nodeSelector/"
    "affinity, or add a toleration for the taint."
)
ASKED = ("missing-peak-memory", "missing-slo-class")  # the KServe sample has neither label


def _check(*args: str, manifest: str, tmp_path: Path) -> tuple[int, list[tuple[str, str]]]:
    path = manifest
    if "\n" in manifest:
        (tmp_path / "manifest.yaml").write_text(manifest)
        path = str(tmp_path / "manifest.yaml")
    proc = gpu_admission("check", "-o", "json", *args, path)
    assert proc.stderr == ""
    found = [(r["rule"], r["message"]) for r in json.loads(proc.stdout)["results"]]
    return proc.returncode, [(rule, m) for rule, m in found if rule not in ASKED]


@pytest.mark.parametrize(
    ("args", "manifest", "expected"),
    [
        pytest.param(
            ("--inventory", str(NODES / "gke.yaml")),
            KSERVE,
            [("no-candidate-node", PENDING_ON_GKE)],
            id="GKE sample without the profile: Pending forever",
        ),
        pytest.param(
            ("--cluster-profile", "gke", "--inventory", str(NODES / "gke.yaml")),
            KSERVE,
            [],
            id="GKE sample with --cluster-profile gke: the apiserver adds the toleration",
        ),
        pytest.param(
            ("--cluster-profile", "eks", "--inventory", str(NODES / "eks.yaml")),
            KSERVE,
            [],
            id="EKS enables ExtendedResourceToleration too",
        ),
        pytest.param(
            ("--cluster-profile", "gke", "--inventory", str(NODES / "gke.yaml")),
            T4_DEPLOYMENT,
            [("exceeds-device-memory", T4_TOO_SMALL)],
            id="memory from gke-accelerator",
        ),
        pytest.param(
            ("--cluster-profile", "eks", "--inventory", str(NODES / "eks.yaml")),
            A10G_POD,
            [("exceeds-device-memory", A10G_TOO_SMALL)],
            id="karpenter's 24576 MiB A10G exposes 23028",
        ),
        pytest.param(
            ("--cluster-profile", "gke", "--inventory", str(NODES / "gke.yaml")),
            LATENCY_POD,
            [("sharing-mode-not-accepted", GKE_TIME_SHARED)],
            id="a GKE time-sharing node is shared",
        ),
        pytest.param(
            ("--inventory", str(NODES / "hami.yaml")),
            LATENCY_POD,
            [("sharing-mode-not-accepted", HAMI_SPLIT)],
            id="a HAMi-split node is not exclusive",
        ),
        pytest.param(
            ("--cluster-profile", "aks", "--inventory", str(NODES / "aks.yaml")),
            LATENCY_POD,
            [("no-candidate-node", AKS_PENDING)],
            id="AKS adds no toleration",
        ),
    ],
)
def test_verdicts_per_cluster(
    args: tuple[str, ...], manifest: str, expected: list[tuple[str, str]], tmp_path: Path
) -> None:
    code, found = _check(*args, manifest=manifest, tmp_path=tmp_path)
    assert found == expected
    assert code == 1  # every case above is denied for something (the labels, at least)


def _policies(tmp_path: Path, profile: str) -> str:
    target = tmp_path / "policies"
    shutil.copytree(POLICIES, target)
    (target / "cluster-profile.yaml").write_text(profile)
    return str(target)


def test_cluster_profile_document(tmp_path: Path) -> None:
    policies = _policies(
        tmp_path,
        "apiVersion: gpu-admission.io/v1alpha1\nkind: ClusterProfile\n"
        "metadata: {name: prod}\nspec: {profile: gke}\n",
    )
    args = ("--policies", policies, "--inventory", str(NODES / "gke.yaml"))
    assert _check(*args, manifest=KSERVE, tmp_path=tmp_path) == (1, [])
    # The flag takes the place of spec.profile.
    flagged = _check(*args, "--cluster-profile", "generic", manifest=KSERVE, tmp_path=tmp_path)
    assert flagged == (1, [("no-candidate-node", PENDING_ON_GKE)])


def test_sharing_list_narrows_the_vgpu_facts(tmp_path: Path) -> None:
    policies = _policies(
        tmp_path,
        "apiVersion: gpu-admission.io/v1alpha1\nkind: ClusterProfile\n"
        "metadata: {name: prod}\nspec: {sharing: [time-slicing, mps]}\n",
    )
    args = ("--policies", policies, "--inventory", str(NODES / "hami.yaml"))
    # Not HAMi's node then: whole GPUs, whose memory no GFD label gives.
    assert _check(*args, manifest=LATENCY_POD, tmp_path=tmp_path) == (
        1,
        [
            (
                "unknown-device-memory",
                "the pod needs 4 GiB (4096 MiB) per device (gpu-admission.io/peak-memory=4Gi), "
                "but the memory of nvidia.com/gpu on node hami-v100-0 is unknown (no GFD memory "
                "label and no catalog entry), so the fit cannot be proven. Label the nodes with "
                "nvidia.com/gpu.memory (GPU Feature Discovery does), or pin the pod to nodes "
                "whose memory is known.",
            )
        ],
    )


def test_explicit_toleration_setting_beats_the_profile(tmp_path: Path) -> None:
    policies = _policies(
        tmp_path,
        "apiVersion: gpu-admission.io/v1alpha1\nkind: ClusterProfile\n"
        "metadata: {name: prod}\nspec: {profile: gke, extendedResourceToleration: false}\n",
    )
    args = ("--policies", policies, "--inventory", str(NODES / "gke.yaml"))
    assert _check(*args, manifest=KSERVE, tmp_path=tmp_path) == (
        1,
        [("no-candidate-node", PENDING_ON_GKE)],
    )


@pytest.mark.parametrize(
    ("documents", "expected"),
    [
        pytest.param(
            ["spec: {profile: openshift}\n"],
            "cluster-profile-0.yaml: document 1 (line 1), line 4, field spec.profile: Input "
            "should be 'generic', 'gke', 'eks' or 'aks' (got 'openshift')",
            id="unknown profile",
        ),
        pytest.param(
            ["spec: {sharing: [nvshare]}\n"],
            "cluster-profile-0.yaml: document 1 (line 1), line 4, field spec.sharing.0: Input "
            "should be 'time-slicing', 'mps', 'hami', 'kai' or 'volcano' (got 'nvshare')",
            id="unknown mechanism",
        ),
        pytest.param(
            ["spec: {profile: gke}\n", "spec: {profile: eks}\n"],
            "more than one ClusterProfile document: ",
            id="two documents",
        ),
    ],
)
def test_bad_cluster_profile_documents(documents: list[str], expected: str, tmp_path: Path) -> None:
    target = tmp_path / "policies"
    shutil.copytree(POLICIES, target)
    for i, spec in enumerate(documents):
        (target / f"cluster-profile-{i}.yaml").write_text(
            "apiVersion: gpu-admission.io/v1alpha1\nkind: ClusterProfile\n"
            f"metadata: {{name: p{i}}}\n{spec}"
        )
    proc = gpu_admission("check", "--policies", str(target), KSERVE)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_flag_value_is_a_usage_error() -> None:
    proc = gpu_admission("check", "--cluster-profile", "openshift", KSERVE)
    assert proc.returncode == 2
    assert "Invalid value for '--cluster-profile': 'openshift' is not one of" in proc.stderr


@pytest.mark.parametrize(("profile", "expected"), [("generic", True), ("gke", False)])
def test_audit_takes_the_flag(profile: str, expected: bool) -> None:
    proc = gpu_admission(
        "audit",
        "--cluster-profile",
        profile,
        "--inventory",
        str(NODES / "gke.yaml"),
        "-o",
        "json",
        "--from",
        KSERVE,
    )
    assert proc.returncode == 1
    rules = [r["rule"] for r in json.loads(proc.stdout)["results"]]
    assert ("no-candidate-node" in rules) is expected


@pytest.mark.parametrize(("flag", "changed"), [((), 0), (("--cluster-profile", "gke"), 1)])
def test_diff_applies_the_flag_to_both_sets(
    flag: tuple[str, ...], changed: int, tmp_path: Path
) -> None:
    # The head set switches the toleration off: that only shows where the flag turned
    # it on, for the base set as much as for the head.
    head = _policies(
        tmp_path,
        "apiVersion: gpu-admission.io/v1alpha1\nkind: ClusterProfile\n"
        "metadata: {name: c}\nspec: {extendedResourceToleration: false}\n",
    )
    proc = gpu_admission(
        "diff",
        *flag,
        "--base-policies",
        str(POLICIES),
        "--policies",
        head,
        "--inventory",
        str(NODES / "gke.yaml"),
        "-o",
        "json",
        KSERVE,
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    report = json.loads(proc.stdout)
    assert report["summary"]["changed"] == changed
    added = [f["rule"] for c in report["changed"] for f in c["added"]]
    assert added == ["no-candidate-node"] * changed


def test_serve_reads_the_cluster_profile_and_its_reload(tmp_path: Path) -> None:
    server = Server(tmp_path, "--inventory", str(NODES / "gke.yaml"))
    try:
        deployment = yaml.safe_load(T4_DEPLOYMENT)
        before = server.validate(review(deployment)).json()["response"]
        assert before["allowed"] is False
        assert "so it would stay Pending forever" in before["status"]["message"]
        (server.policies / "cluster-profile.yaml").write_text(
            "apiVersion: gpu-admission.io/v1alpha1\nkind: ClusterProfile\n"
            "metadata: {name: prod}\nspec: {profile: gke}\n"
        )
        deadline = time.monotonic() + 20
        message = before["status"]["message"]
        while "Pending forever" in message and time.monotonic() < deadline:
            time.sleep(0.1)
            message = server.validate(review(deployment)).json()["response"]["status"]["message"]
        # The toleration GKE adds now counts, and the T4 pool's memory comes from its
        # gke-accelerator label: the reload rebuilt the offers.
        assert "Pending forever" not in message
        assert "offers 15360 MiB (catalog value for Tesla-T4, by " in message
    finally:
        server.stop()


# --- the image's env (docs/runtime-access.md, "The image's env") -----------------------------

IMAGE_PODS = """\
apiVersion: v1
kind: Pod
metadata: {name: tolerates, namespace: ml}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers: [{name: tools, image: nvcr.io/nvidia/cuda:12.4.0-base}]
---
apiVersion: v1
kind: Pod
metadata: {name: plain, namespace: ml}
spec:
  containers: [{name: tools, image: nvcr.io/nvidia/cuda:12.4.0-base}]
"""


def _docs_profile() -> str:
    text = (POLICIES.parent / "docs" / "runtime-access.md").read_text()
    start = text.index("```yaml\napiVersion: gpu-admission.io/v1alpha1\nkind: ClusterProfile")
    return text[start + len("```yaml\n") : text.index("```", start + 7)]


@pytest.mark.parametrize(
    ("profile", "warned"),
    [
        (None, {"tolerates"}),  # nothing declared: the Pods that ask for GPU nodes
        # GPU nodes all tainted, toolkit not hardened: the sound rule, same Pods here
        ("spec:\n  gpuNodes: {taints: [{key: nvidia.com/gpu, effect: NoSchedule}]}\n",
         {"tolerates"}),
        # GPU nodes untainted (labels only): any Pod may land on one
        ("spec:\n  gpuNodes: {labels: [nvidia.com/gpu.present=true]}\n",
         {"tolerates", "plain"}),
        ("DOCS", set()),  # the docs' hardened toolkit: nothing to report
    ],
    ids=["undeclared", "tainted", "untainted", "docs-hardened"],
)  # fmt: skip
def test_image_env_follows_the_cluster_profile(
    tmp_path: Path, profile: str | None, warned: set[str]
) -> None:
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    if profile is not None:
        head = "apiVersion: gpu-admission.io/v1alpha1\nkind: ClusterProfile\nmetadata: {name: c}\n"
        text = _docs_profile() if profile == "DOCS" else head + profile
        (policies / "cluster-profile.yaml").write_text(text)
    manifest = tmp_path / "pods.yaml"
    manifest.write_text(IMAGE_PODS)
    run = gpu_admission("check", "--policies", str(policies), "-o", "json", str(manifest))
    assert run.returncode == 0, run.stderr
    found = {
        r["name"] for r in json.loads(run.stdout)["results"] if r["rule"] == "image-visible-devices"
    }
    assert found == warned
