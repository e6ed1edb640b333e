"""gpu-distributed on verbatim upstream manifests (tests/data/workloads PROVENANCE.md,
tests/realworld SOURCES.md) and on variants of them made here, one row per case."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.builders import only, rules, run
from tests.support.paths import TESTS

DATA = TESTS / "data" / "workloads"
REALWORLD = TESTS / "realworld"


def document(path: Path) -> dict[str, Any]:
    found = [d for d in yaml.safe_load_all(path.read_text()) if d and "kind" in d]
    return found[0]  # type: ignore[no-any-return]


def judged(obj: dict[str, Any]) -> list[str]:
    return rules(run(only("gpu-distributed"), obj))


# (file, the gpu-distributed rules it draws): upstream files as they are.
REAL: list[tuple[Path, list[str]]] = [
    # training-operator's example: a Master and a Worker of 1 GPU, no gang.
    (DATA / "examples__pytorch__mnist__v1__pytorch_job_mnist_nccl.yaml", ["gang-not-wired"]),
    # mpi-operator's nccl-tests: two 8-GPU workers, no schedulingPolicy, no queue; its
    # /dev/shm emptyDir has no sizeLimit, and its workers run privileged (host RDMA).
    (
        DATA / "examples__v2beta1__nccl-tests__nccl-tests.yaml",
        ["gang-not-wired", "shm-unbounded", "host-rdma"],
    ),
    # The Kueue samples: queued jobs are admitted whole.
    (DATA / "samples__kueue__02-pytorchjob.yaml", []),
    (DATA / "samples__kueue__04-jobset.yaml", []),
    (DATA / "samples__kueue__05-leaderworkerset.yaml", []),
    # LWS's vLLM example: groups of a leader and a worker, 8 GPUs each, no gang.
    (DATA / "docs__examples__vllm__GPU__lws.yaml", ["gang-not-wired"]),
    # Volcano's MindSpore job: every Volcano Job is a gang of its tasks' Pods.
    (REALWORLD / "volcano" / "mindspore-gpu.yaml", []),
    # A TrainJob's gang lives in its runtime: never reported as none.
    (REALWORLD / "trainer" / "lammps-train-gpus.yaml", []),
]


@pytest.mark.parametrize(("path", "expected"), REAL, ids=lambda v: getattr(v, "name", ""))
def test_upstream_manifests(path: Path, expected: list[str]) -> None:
    assert judged(document(path)) == expected


def _pytorch() -> dict[str, Any]:
    return document(DATA / "examples__pytorch__mnist__v1__pytorch_job_mnist_nccl.yaml")


def _queued(obj: dict[str, Any]) -> dict[str, Any]:
    obj.setdefault("metadata", {}).setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "q"
    return obj


def _set(obj: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    node = obj
    *steps, last = dotted.split(".")
    for step in steps:
        node = node[int(step)] if isinstance(node, list) else node.setdefault(step, {})
    node[last] = value
    return obj


def _variant(base: dict[str, Any], *edits: tuple[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(base)
    for dotted, value in edits:
        _set(obj, dotted, value)
    return obj


W = "spec.pytorchReplicaSpecs.Worker"
M = "spec.pytorchReplicaSpecs.Master"
GPU = "template.spec.containers.0.resources.limits"
VARIANTS: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "a schedulingPolicy wires the gang",
        _variant(_pytorch(), ("spec.runPolicy", {"schedulingPolicy": {}})),
        [],
    ),
    (
        "minAvailable 1 of 2 Pods",
        _variant(_pytorch(), ("spec.runPolicy", {"schedulingPolicy": {"minAvailable": 1}})),
        ["gang-disabled"],
    ),
    (
        "minAvailable of every Pod",
        _variant(_pytorch(), ("spec.runPolicy", {"schedulingPolicy": {"minAvailable": 2}})),
        [],
    ),
    (
        "a gang-aware schedulerName on every rank",
        _variant(
            _pytorch(),
            (f"{M}.template.spec.schedulerName", "volcano"),
            (f"{W}.template.spec.schedulerName", "volcano"),
        ),
        [],
    ),
    (
        "a gang-aware schedulerName on one rank only",
        _variant(_pytorch(), (f"{M}.template.spec.schedulerName", "volcano")),
        ["gang-not-wired"],
    ),
    (
        "kueue, but the Worker asks 4 GPUs and the Master 1",
        _queued(_variant(_pytorch(), (f"{W}.{GPU}", {"nvidia.com/gpu": 4}))),
        ["ranks-differ", "shm-default"],  # 4 ranks in the Worker, on 64 MiB /dev/shm
    ),
    (
        "kueue, a Worker on MIG slices",
        _queued(_variant(_pytorch(), (f"{W}.{GPU}", {"nvidia.com/mig-1g.10gb": 1}))),
        ["ranks-differ"],
    ),
    (
        "kueue, an RDMA Worker and a TCP Master",
        _queued(_variant(_pytorch(), (f"{W}.{GPU}", {"nvidia.com/gpu": 1, "rdma/ib": 1}))),
        ["ranks-differ", "rdma-without-ipc-lock"],
    ),
    (
        "kueue, Multus on one rank",
        _queued(
            _variant(
                _pytorch(),
                (
                    f"{W}.template.metadata.annotations",
                    {"k8s.v1.cni.cncf.io/networks": "ib-a@net1"},
                ),
            )
        ),
        ["ranks-differ"],
    ),
    (
        "kueue, nprocPerNode 4 on 1-GPU Pods",
        _queued(_variant(_pytorch(), ("spec.nprocPerNode", "4"))),
        ["nproc-exceeds-gpus", "nproc-exceeds-gpus"],
    ),
    ("kueue, nprocPerNode auto", _queued(_variant(_pytorch(), ("spec.nprocPerNode", "auto"))), []),
]


@pytest.mark.parametrize(("name", "obj", "expected"), VARIANTS, ids=[v[0] for v in VARIANTS])
def test_variants(name: str, obj: dict[str, Any], expected: list[str]) -> None:
    assert judged(obj) == expected


def test_message_names_ranks_fields_and_numbers() -> None:
    obj = _queued(_variant(_pytorch(), ("spec.nprocPerNode", "4")))
    (first, _) = [f.message for f in run(only("gpu-distributed"), obj).findings]
    assert first == (
        "Master: spec.nprocPerNode starts 4 processes in each Pod, but the Pod requests 1 GPU "
        "(nvidia.com/gpu): local ranks 1..3 find no GPU of their own (torch.cuda.set_device: "
        "invalid device ordinal) or share one. Start as many processes as the Pod has GPUs "
        "(1), or request 4."
    )
