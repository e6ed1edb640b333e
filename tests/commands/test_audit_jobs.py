"""The audit compares a running job's ranks where they landed (webhook.core.jobs.running):
GPU product of each rank's node, GPUs held, MIG or not, network attachments; the finding
is gpu-distributed's `ranks-differ`, under the job's top owner when it is in the audit."""

from __future__ import annotations

from typing import Any

from tests.core.test_diagnose_jobs import node, rank
from tests.support.builders import shipped
from webhook.commands.audit import Auditor, AuditReport
from webhook.core.supply.inventory import Inventory

A100 = "NVIDIA-A100-SXM4-80GB"
OWNER = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "train", "uid": "job-1"}


def audited(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> AuditReport:
    auditor = Auditor(shipped(), Inventory.from_nodes(nodes))
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}
    job["metadata"] = {"name": "train", "namespace": "ml", "uid": "job-1"}
    for obj in [job, *pods]:
        auditor.add(obj)
    return auditor.report()


def owned(pod: dict[str, Any]) -> dict[str, Any]:
    pod["metadata"]["ownerReferences"] = [{**OWNER, "controller": True}]
    return pod


def differ(report: AuditReport) -> list[tuple[str, int, str]]:
    return [
        (str(e.resource), e.pods, e.finding.message)
        for e in report.entries
        if e.finding.rule == "ranks-differ"
    ]


def test_ranks_on_two_products_and_networks_are_reported_under_the_job() -> None:
    a100 = node("b")
    a100["metadata"]["labels"]["nvidia.com/gpu.product"] = A100
    ib = owned(rank(1, on="b"))
    ib["metadata"]["annotations"] = {"k8s.v1.cni.cncf.io/networks": "ib-a@net1"}
    report = audited([node("a"), a100], [owned(rank(0, on="a")), ib, owned(rank(2))])
    assert differ(report) == [
        (
            "PyTorchJob ml/train",
            2,
            "PyTorchJob ml/train: its 2 running ranks differ in GPU product: "
            "NVIDIA-H100-80GB-HBM3 on worker 0 (node a) and NVIDIA-A100-SXM4-80GB on worker 1 "
            "(node b); network attachments: none on worker 0 (node a) and ib-a on worker 1 "
            "(node b). Every rank joins one NCCL communicator, which runs at the slowest "
            "rank's speed or hangs in ncclCommInitRank; pin the product (nodeSelector on "
            "nvidia.com/gpu.product) and give every rank the same GPUs and networks",
        )
    ]


def test_alike_ranks_and_ended_ranks_are_not_reported() -> None:
    ended = owned(rank(2, on="c", gpus=4))
    ended["status"]["phase"] = "Succeeded"
    pods = [owned(rank(0, on="a")), owned(rank(1, on="b")), ended]
    assert differ(audited([node("a"), node("b"), node("c")], pods)) == []


def test_gpu_counts_that_differ() -> None:
    pods = [owned(rank(0, on="a")), owned(rank(1, on="b", gpus=4))]
    (found,) = differ(audited([node("a"), node("b")], pods))
    assert (
        "differ in GPUs: 8 nvidia.com/gpu on worker 0 (node a) and 4 nvidia.com/gpu on "
        in (found[2])
    )


def test_ranks_in_a_namespace_the_policy_leaves_out_are_not_compared() -> None:
    pods = [owned(rank(0, on="a")), owned(rank(1, on="b", gpus=4))]
    for pod in pods:
        pod["metadata"]["namespace"] = "gpu-operator"  # excludedNamespaces of the policy
    assert differ(audited([node("a"), node("b")], pods)) == []
