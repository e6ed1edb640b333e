"""A Pending rank diagnosed as part of its job, through the real Diagnoser with the
shipped policies' WorkloadKinds: which job a Pod is a rank of (by the labels each
operator writes), the rank map, ever and now, the GPUs placed ranks hold, the records'
evidence. The real scheduler's side of the same cases is tests/e2e/test_gang_cluster.py."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tests.support.builders import shipped
from webhook.commands.diagnose import Diagnoser, DiagnoseReport, diagnosis_rules, job_rules
from webhook.core.jobs.members import identities, member_of

Obj = dict[str, Any]
NOW = datetime(2026, 12, 7, 12, 0, 0, tzinfo=UTC)
H100 = "NVIDIA-H100-80GB-HBM3"
TORCH = {
    "training.kubeflow.org/job-name": "train",
    "training.kubeflow.org/replica-type": "worker",
}


def node(name: str, gpus: int = 8, **labels: str) -> Obj:
    alloc = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    meta = {"name": name, "labels": {"nvidia.com/gpu.product": H100, **labels}}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "status": {"allocatable": alloc}}


def rank(
    i: int,
    *,
    on: str | None = None,
    gpus: int = 8,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> Obj:
    meta: Obj = {
        "name": f"train-worker-{i}",
        "namespace": "ml",
        "uid": f"uid-{i}",
        "labels": {**TORCH, "training.kubeflow.org/replica-index": str(i)}
        if labels is None
        else {**labels},
        "annotations": annotations or {},
    }
    limits = {"nvidia.com/gpu": str(gpus)}
    body: Obj = {"containers": [{"name": "pytorch", "resources": {"limits": limits}}], **spec}
    if on:
        body["nodeName"] = on
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": body,
        "status": {"phase": "Running" if on else "Pending"},
    }


def report(*objects: Obj) -> DiagnoseReport:
    policies = shipped()
    d = Diagnoser(rules=diagnosis_rules(policies), jobs=job_rules(policies))
    for obj in objects:
        d.add(obj)
    found = d.report(now=NOW)
    assert found.errors == ()
    return found


def test_partial_placement_holds_gpus_and_never_fits() -> None:
    found = report(node("a"), node("b"), rank(0, on="a"), rank(1, on="b"), rank(2))
    (job,) = found.jobs
    assert job.job == "job ml/train"  # no owner reference: the kinds that label alike
    assert job.fit == "never"
    assert job.placed == 2 and job.waiting == 1
    assert dict(job.held) == {"nvidia.com/gpu": 16}
    assert job.verdict.startswith("1 of 3 ranks waits. The job can never be placed at once: ")
    assert job.verdict.endswith(
        "The 2 placed ranks hold 16 nvidia.com/gpu on a, b while they wait, with no gang "
        "mechanism (no Kueue queue, PodGroup, gang scheduler or Workload API pod group): the "
        "scheduler places each rank alone."
    )
    assert [(r.rank, r.node, r.product, r.state, r.domain) for r in job.ranks] == [
        ("worker 0", "a", H100, "placed", ""),
        ("worker 1", "b", H100, "placed", ""),
        ("worker 2", "", "", "waiting", "capacity-exhausted"),
    ]
    assert "kubectl get pods -n ml -l training.kubeflow.org/job-name=train -o wide" in (
        job.commands
    )
    assert "kubectl describe node a" in job.commands
    (pod,) = found.records
    assert pod.job == job.job and pod.domain == "capacity-exhausted"
    assert any(a.startswith("gang-does-not-fit: its job") for a in pod.also)
    assert pod.commands[0] == "kubectl describe pod -n ml train-worker-2"
    assert found.exit_code == 1


def test_each_rank_fits_alone_but_not_together_now() -> None:
    """Two free nodes, three waiting ranks of a gang (workloadRef): each rank alone fits,
    the three together do not; the third node is held by another Pod."""
    ref = {"workloadRef": {"name": "train", "podGroup": "workers"}}
    other = rank(9, on="c", labels={"app": "other"})
    other["metadata"]["name"] = "other"
    found = report(node("a"), node("b"), node("c"), other, *(rank(i, **ref) for i in range(3)))
    (job,) = found.jobs
    assert job.fit == "not-now"
    assert job.gang == "gang: spec.workloadRef"
    assert job.verdict == (
        "3 of 3 ranks wait. The job does not fit at once now: role worker has 3 waiting ranks "
        "of 8 nvidia.com/gpu and the nodes it may use have room for 2 now."
    )
    assert {r.domain for r in found.records} == {"gang-does-not-fit"}
    assert any(f.name == "held by Pod ml/other" for f in job.facts)


def test_a_job_that_fits_now_is_not_stuck() -> None:
    found = report(node("a"), node("b"), rank(0, on="a"), rank(1))
    (job,) = found.jobs
    assert job.fit == "fits-now" and not job.stuck
    assert [r.domain for r in found.records] == ["not-stuck"]


def test_anti_affinity_one_rank_per_node_counts_now() -> None:
    """Own-label anti-affinity on the hostname: the node of a placed rank takes no other
    now, though it has room for one. Without the term the two waiting ranks fit now (a's
    and b's free 8 GPUs); with it only b is left: not now (three nodes: it may fit ever)."""
    anti = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": TORCH},
                    }
                ]
            }
        }
    }
    others = []
    for name, on, gpus in (("other-b", "b", 8), ("other-c", "c", 16)):
        other = rank(8, on=on, gpus=gpus, labels={"app": "other"})
        other["metadata"]["name"] = other["metadata"]["uid"] = name
        others.append(other)
    nodes = [node("a", 16), node("b", 16), node("c", 16)]
    plain = report(*nodes, *others, rank(0, on="a"), rank(1), rank(2))
    assert [j.fit for j in plain.jobs] == ["fits-now"]
    spread = report(
        *nodes, *others, *(rank(i, on="a" if i == 0 else None, **anti) for i in range(3))
    )
    (job,) = spread.jobs
    assert job.fit == "not-now"
    assert job.verdict.startswith(
        "2 of 3 ranks wait. The job does not fit at once now: role worker has 2 waiting ranks "
        "of 8 nvidia.com/gpu and the nodes it may use have room for 1 now."
    )
    assert [(f.about, f.value) for f in job.facts if f.name == "room now"] == [
        ("node b", "1 rank of 8 nvidia.com/gpu")
    ]


def test_a_hostile_owner_reference_list_names_the_job_by_its_labels() -> None:
    meta = {"namespace": "ml", "labels": dict(TORCH), "ownerReferences": 5}
    member = member_of(meta, {}, known=identities(shipped().custom_kinds))
    assert member is not None and member.job == "job ml/train"


@pytest.mark.parametrize(
    ("labels", "annotations", "spec", "job", "rank_name"),
    [
        (  # training-operator (PyTorchJob, TFJob, ...): common_types.go labels
            {**TORCH, "training.kubeflow.org/replica-index": "3"},
            {},
            {},
            "PyTorchJob ml/train",
            "worker 3",
        ),
        (  # mpi-operator v2beta1
            {
                "training.kubeflow.org/job-name": "pi",
                "training.kubeflow.org/job-role": "worker",
                "training.kubeflow.org/replica-index": "1",
            },
            {},
            {},
            "MPIJob ml/pi",
            "worker 1",
        ),
        (  # JobSet: replicated job, child Job index and completion index
            {
                "jobset.sigs.k8s.io/jobset-name": "js",
                "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                "jobset.sigs.k8s.io/job-index": "1",
                "batch.kubernetes.io/job-completion-index": "3",
            },
            {},
            {},
            "JobSet ml/js",
            "workers 1/3",
        ),
        (  # LeaderWorkerSet: one gang per group
            {
                "leaderworkerset.sigs.k8s.io/name": "vllm",
                "leaderworkerset.sigs.k8s.io/group-index": "2",
                "leaderworkerset.sigs.k8s.io/worker-index": "1",
            },
            {},
            {},
            "LeaderWorkerSet ml/vllm group 2",
            "1",
        ),
        (  # Volcano Job
            {"volcano.sh/job-name": "vj", "volcano.sh/task-spec": "worker"},
            {"scheduling.k8s.io/group-name": "vj-pg"},
            {},
            "Job ml/vj",
            "worker",
        ),
        (  # a PodGroup of any kind (Volcano's annotation)
            {},
            {"scheduling.k8s.io/group-name": "pg-1"},
            {},
            "PodGroup ml/pg-1",
            "",
        ),
        ({"kueue.x-k8s.io/pod-group-name": "g"}, {}, {}, "Kueue pod group ml/g", ""),
        ({}, {}, {"workloadRef": {"name": "w", "podGroup": "p"}}, "Workload ml/w/p", ""),
        ({}, {}, {"schedulingGroup": {"podGroupName": "pg"}}, "PodGroup ml/pg", ""),
        ({"app": "web"}, {}, {}, None, None),
        ({"training.kubeflow.org/job-name": "x" * 300}, {}, {}, None, None),
    ],
)
def test_which_job_a_pod_is_a_rank_of(
    labels: dict[str, str],
    annotations: dict[str, str],
    spec: Obj,
    job: str | None,
    rank_name: str | None,
) -> None:
    meta = {"namespace": "ml", "labels": labels, "annotations": annotations}
    owner = {"kind": "PyTorchJob", "name": "train", "controller": True}
    if "training.kubeflow.org/replica-type" in labels:
        meta["ownerReferences"] = [owner]
    member = member_of(meta, spec, known=identities(shipped().custom_kinds))
    if job is None:
        assert member is None
        return
    assert member is not None
    # The training-operator's kinds label alike: its owner reference names the kind.
    assert (member.job, member.rank) == (job, rank_name)
