"""Whether a job's ranks can ever all be placed at once (webhook.core.jobs.feasibility)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.builders import GPU_TAINT, TOLERATE_GPU, node, shipped
from tests.support.paths import ROOT
from webhook.core.jobs.feasibility import FIXED_DOMAINS, gang_never_fits
from webhook.core.kit.selectors import selects
from webhook.core.supply.inventory import Inventory
from webhook.core.supply.profiles import GENERIC
from webhook.core.workloads.targets import workload_of

ZONE = "topology.kubernetes.io/zone"
CLIQUE = "nvidia.com/gpu.clique"
JOB = {"training.kubeflow.org/job-name": "llm"}


def is_gpu(name: str) -> bool:
    return name.startswith("nvidia.com/")


def gpu_nodes(
    count: int,
    *,
    gpus: int = 8,
    zone: str = "z1",
    clique: str | None = None,
    prefix: str = "n",
    taint: bool = True,
) -> list[dict[str, Any]]:
    labels = {ZONE: zone, **({CLIQUE: clique} if clique else {})}
    return [
        node(
            f"{prefix}{i}",
            labels=labels,
            taints=[GPU_TAINT] if taint else None,
            allocatable={"nvidia.com/gpu": str(gpus)},
        )
        for i in range(count)
    ]


def rank(gpus: int = 8, *, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": {**JOB, **(labels or {})}},
        "spec": {
            "tolerations": [TOLERATE_GPU],
            "containers": [
                {
                    "name": "pytorch",
                    "image": "pytorch",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
            **spec,
        },
    }


def pytorchjob(**roles: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "llm"},
        "spec": {
            "pytorchReplicaSpecs": {
                name: {"replicas": n, "template": t} for name, (n, t) in roles.items()
            }
        },
    }


def same_zone(key: str = ZONE) -> dict[str, Any]:
    return {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": JOB}, "topologyKey": key}
            ]
        }
    }


ONE_PER_NODE = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": JOB}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
}


def judge(obj: dict[str, Any], nodes: list[dict[str, Any]]) -> str | None:
    workload = workload_of(obj, custom=shipped().custom_kinds)
    assert workload is not None
    found = gang_never_fits(
        workload, inventory=Inventory.from_nodes(nodes), profile=GENERIC, is_gpu=is_gpu
    )
    return None if found is None else found.message


TWO_ZONES = gpu_nodes(48, zone="us-west-2a") + gpu_nodes(40, zone="us-west-2b", prefix="m")

CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], str | None]] = [
    ("fits", pytorchjob(Master=(1, rank()), Worker=(63, rank())), TWO_ZONES, None),
    ("fits in one zone", pytorchjob(Worker=(48, rank(affinity=same_zone()))), TWO_ZONES, None),
    (
        "never fits by capacity",
        pytorchjob(Worker=(100, rank())),
        TWO_ZONES,
        "role Worker runs 100 ranks of 8 nvidia.com/gpu at once, but the 88 nodes that can "
        "take a rank hold at most 88 such ranks; the whole job can never be placed at once on "
        "the nodes the inventory shows, while each rank alone fits. Lower the replicas to 88, "
        "or widen the nodeSelector/affinity.",
    ),
    (
        "never fits by topology",
        pytorchjob(Worker=(64, rank(affinity=same_zone()))),
        TWO_ZONES,
        "64 ranks of 8 nvidia.com/gpu need 512 nvidia.com/gpu in one "
        "topology.kubernetes.io/zone (required podAffinity); the largest, us-west-2a, "
        "holds 48 such ranks (48 nodes). The job can never be placed at once on the nodes the "
        "inventory shows, while each rank alone fits. Lower the replicas, or require a wider "
        "topology.",
    ),
    (
        "never fits by selector",
        pytorchjob(Worker=(50, rank(nodeSelector={ZONE: "us-west-2b"}))),
        TWO_ZONES,
        "role Worker runs 50 ranks of 8 nvidia.com/gpu at once, but the 40 nodes that can "
        "take a rank hold at most 40 such ranks; the whole job can never be placed at once on "
        "the nodes the inventory shows, while each rank alone fits. Lower the replicas to 40, "
        "or widen the nodeSelector/affinity.",
    ),
    ("packs two per node", pytorchjob(Worker=(176, rank(4))), TWO_ZONES, None),
    (
        "one per node",
        pytorchjob(Worker=(100, rank(4, affinity=ONE_PER_NODE))),
        TWO_ZONES,
        "role Worker runs 100 ranks of 4 nvidia.com/gpu at once, but the 88 nodes that can "
        "take a rank hold one per node (its required podAntiAffinity) 88 such ranks; the whole "
        "job can never be placed at once on the nodes the inventory shows, while each rank "
        "alone fits. Lower the replicas to 88, or widen the nodeSelector/affinity.",
    ),
    (
        "roles sharing nodes",
        pytorchjob(Master=(40, rank(8)), Worker=(100, rank(4))),
        TWO_ZONES,
        "the roles need 720 nvidia.com/gpu at once (40 x 8 (role Master), 100 x 4 (role "
        "Worker)), but the nodes that can take them hold 704; the whole job can never be "
        "placed at once on the nodes the inventory shows, while each role alone may fit.",
    ),
    (
        "roles sharing one zone",
        pytorchjob(
            Master=(1, rank(8, affinity=same_zone())), Worker=(48, rank(8, affinity=same_zone()))
        ),
        TWO_ZONES,
        "the ranks of 1 (role Master), 48 (role Worker) in one "
        "topology.kubernetes.io/zone (required podAffinity); the largest, us-west-2a, holds "
        "48 such ranks (48 nodes). The job can never be placed at once on the nodes the "
        "inventory shows, while each rank alone fits. Lower the replicas, or require a wider "
        "topology.",
    ),
    # A role the selector picks but that carries no such term may spread: no proof.
    (
        "one role bound, the other free",
        pytorchjob(Master=(1, rank(8)), Worker=(48, rank(8, affinity=same_zone()))),
        TWO_ZONES,
        None,
    ),
    (
        "nvlink domain",
        pytorchjob(Worker=(8, rank(4, affinity=same_zone(CLIQUE)))),
        gpu_nodes(18, gpus=4, clique="c.1") + gpu_nodes(18, gpus=4, clique="c.2", prefix="m"),
        None,
    ),
    (
        "nvlink domain too small",
        pytorchjob(Worker=(19, rank(4, affinity=same_zone(CLIQUE)))),
        gpu_nodes(18, gpus=4, clique="c.1") + gpu_nodes(18, gpus=4, clique="c.2", prefix="m"),
        "19 ranks of 4 nvidia.com/gpu need 76 nvidia.com/gpu in one nvidia.com/gpu.clique "
        "(required podAffinity); the largest, c.2, holds 18 such ranks (18 nodes). The job "
        "can never be placed at once on the nodes the inventory shows, while each rank alone "
        "fits. Lower the replicas, or require a wider topology.",
    ),
    # A rank that fits nowhere is resource-names' finding, not the gang's.
    ("no rank fits", pytorchjob(Worker=(4, rank(16))), TWO_ZONES, None),
    ("untolerated taint", pytorchjob(Worker=(4, rank(8, tolerations=[]))), TWO_ZONES, None),
]


@pytest.mark.parametrize(
    ("obj", "nodes", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_gang(obj: dict[str, Any], nodes: list[dict[str, Any]], expected: str | None) -> None:
    assert judge(obj, nodes) == expected


def kueue(annotations: dict[str, str], queue: bool = True) -> dict[str, Any]:
    template = rank()
    template["metadata"]["annotations"] = annotations
    job = pytorchjob(Worker=(64, template))
    if queue:
        job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "train"}
    return job


@pytest.mark.parametrize(
    ("obj", "found"),
    [
        (kueue({"kueue.x-k8s.io/podset-required-topology": ZONE}), True),
        (kueue({"kueue.x-k8s.io/podset-required-topology": ZONE}, queue=False), False),
        (kueue({"kueue.x-k8s.io/podset-preferred-topology": ZONE}), False),
    ],
)
def test_kueue_required_topology(obj: dict[str, Any], found: bool) -> None:
    message = judge(obj, TWO_ZONES)
    assert (message is not None) == found
    if found:
        assert (
            message is not None
            and "(required by kueue.x-k8s.io/podset-required-topology)" in message
        )


def jobset(jobs: int, parallelism: int, annotation_on_template: bool = False) -> dict[str, Any]:
    ann = {"alpha.jobset.sigs.k8s.io/exclusive-topology": ZONE}
    template = {
        "metadata": {},
        "spec": {"parallelism": parallelism, "completions": parallelism, "template": rank()},
    }
    if annotation_on_template:
        template["metadata"]["annotations"] = ann
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "llm", **({} if annotation_on_template else {"annotations": ann})},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": jobs, "template": template}]},
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (jobset(2, 40), None),
        (
            jobset(3, 25),
            "role workers: 3 child Jobs of 25 Pods with 8 nvidia.com/gpu each need a "
            "topology.kubernetes.io/zone each (exclusive-topology), but only 2 values of it can "
            "hold one; the job can never be placed at once on the nodes the inventory shows. Lower "
            "the replicas to 2, or choose a wider topology.",
        ),
        (jobset(2, 41, annotation_on_template=True), "only 1 value"),
    ],
)
def test_jobset_exclusive(obj: dict[str, Any], expected: str | None) -> None:
    message = judge(obj, TWO_ZONES)
    if expected is None or message is None:
        assert message == expected
    else:
        assert message == expected or expected in message


def test_example_inventory() -> None:
    nodes = json.loads((ROOT / "examples/cluster/nodes.json").read_text())["items"]
    # Two H100 nodes of 8 and an A10G node time-sliced into 16 replicas: the scheduler
    # counts replicas, so four 8-GPU ranks fit at once and five never do.
    assert judge(pytorchjob(Worker=(4, rank())), nodes) is None
    message = judge(pytorchjob(Worker=(5, rank())), nodes)
    assert message is not None and "the 3 nodes that can take a rank hold at most 4" in message


def test_fixed_only_for_nvlink_domains() -> None:
    nodes = gpu_nodes(18, gpus=4, clique="c.1") + gpu_nodes(18, gpus=4, clique="c.2", prefix="m")
    workload = workload_of(
        pytorchjob(Worker=(19, rank(4, affinity=same_zone(CLIQUE)))), custom=shipped().custom_kinds
    )
    assert workload is not None
    found = gang_never_fits(
        workload, inventory=Inventory.from_nodes(nodes), profile=GENERIC, is_gpu=is_gpu
    )
    assert found is not None and found.fixed and CLIQUE in FIXED_DOMAINS
    assert found.violation().rule == "gang-never-fits"
    assert found.violation().path[-1] == "topologyKey"


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (None, {"a": "1"}, False),
        ({}, {"a": "1"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "1"}, True),
        ({"matchLabels": {"a": "2"}}, {"a": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {"a": "1"}, True),
        (
            {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]},
            {"a": "1"},
            False,
        ),
        ({"matchExpressions": [{"key": "b", "operator": "Exists"}]}, {"a": "1"}, False),
        ({"matchExpressions": [{"key": "b", "operator": "DoesNotExist"}]}, {"a": "1"}, True),
        (
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["0"]}]},
            {"a": "1"},
            False,
        ),
    ],
)
def test_selects(selector: object, labels: dict[str, str], expected: bool) -> None:
    assert selects(selector, labels) is expected
