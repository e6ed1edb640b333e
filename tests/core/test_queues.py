"""The queue model: Kueue's objects read, the cohort's potential, flavor assignment, use."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core.queues.assign import first_unassigned
from webhook.core.queues.capacity import capacity
from webhook.core.queues.podsets import PodSet
from webhook.core.queues.supply import EMPTY, QueueSupply
from webhook.core.queues.usage import queue_uses
from webhook.core.supply.gpu_use import GpuUse, pod_use
from webhook.core.supply.inventory import Inventory
from webhook.errors import InventoryError

GPU = "nvidia.com/gpu"


def cq(name: str, quotas: dict[str, dict[str, Any]], *, cohort: str = "", **extra: Any) -> Any:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": [GPU],
                "flavors": [
                    {"name": f, "resources": [{"name": GPU, **q}]} for f, q in quotas.items()
                ],
            }
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    spec.update(extra)
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def flavor(name: str, **spec: Any) -> Any:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": spec,
    }


def supply(*objs: Any) -> QueueSupply:
    out = EMPTY
    for obj in objs:
        out = out.with_object(obj)
    return out


# (what the cohort holds, the most queue a gets in flavor f): Kueue's potentialAvailable
# (tests/data/kueue/FACTS.md c), including its own worked example.
POTENTIAL = [
    ("no cohort: its nominal quota", [cq("a", {"f": {"nominalQuota": 8}})], 8),
    (
        "a peer lends all of its nominal",
        [
            cq("a", {"f": {"nominalQuota": 8}}, cohort="c"),
            cq("b", {"f": {"nominalQuota": 8}}, cohort="c"),
        ],
        16,
    ),
    (
        "a peer lends at most its lendingLimit",
        [
            cq("a", {"f": {"nominalQuota": 8}}, cohort="c"),
            cq("b", {"f": {"nominalQuota": 8, "lendingLimit": 4}}, cohort="c"),
        ],
        12,
    ),
    (
        "the queue's borrowingLimit caps it",
        [
            cq("a", {"f": {"nominalQuota": 8, "borrowingLimit": 2}}, cohort="c"),
            cq("b", {"f": {"nominalQuota": 8, "lendingLimit": 4}}, cohort="c"),
        ],
        10,
    ),
    (
        "what the queue keeps back (8 - 2) still counts for itself, plus 2 + 4 lent",
        [
            cq("a", {"f": {"nominalQuota": 8, "lendingLimit": 2}}, cohort="c"),
            cq("b", {"f": {"nominalQuota": 4}}, cohort="c"),
        ],
        12,
    ),
    (
        "a parent cohort's own quota and its other children",
        [
            cq("a", {"f": {"nominalQuota": 4}}, cohort="child"),
            cq("x", {"f": {"nominalQuota": 2}}, cohort="root"),
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Cohort",
                "metadata": {"name": "child"},
                "spec": {"parentName": "root"},
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Cohort",
                "metadata": {"name": "root"},
                "spec": {
                    "resourceGroups": [
                        {
                            "coveredResources": [GPU],
                            "flavors": [
                                {"name": "f", "resources": [{"name": GPU, "nominalQuota": 10}]}
                            ],
                        }
                    ]
                },
            },
        ],
        16,
    ),
    (
        "a cycle of parents ends where it closes",
        [
            cq("a", {"f": {"nominalQuota": 4}}, cohort="p"),
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Cohort",
                "metadata": {"name": "p"},
                "spec": {"parentName": "q"},
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Cohort",
                "metadata": {"name": "q"},
                "spec": {"parentName": "p"},
            },
        ],
        4,
    ),
]


@pytest.mark.parametrize(
    ("objs", "most"), [(o, m) for _, o, m in POTENTIAL], ids=[n for n, _, _ in POTENTIAL]
)
def test_the_most_a_queue_can_ever_get(objs: list[Any], most: int) -> None:
    s = supply(*objs)
    found = capacity(s, s.cluster_queues["a"], "f", GPU)
    assert found is not None and found.most == most


BAD = [
    (
        {**cq("a", {"f": {"nominalQuota": 8}}), "apiVersion": "kueue.x-k8s.io/v1alpha1"},
        "ClusterQueue a: apiVersion: kueue.x-k8s.io/v1alpha1 is not a version Kueue serves for "
        "ClusterQueue (it serves kueue.x-k8s.io/v1beta2, kueue.x-k8s.io/v1beta1)",
    ),
    (
        cq("a", {"f": {"nominalQuota": "eight"}}),
        "ClusterQueue a: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "
        "'eight' is not a Kubernetes quantity",
    ),
    (
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "q", "namespace": "ml"},
            "spec": {"hard": {"requests.nvidia.com/gpu": "4x"}},
        },
        "ResourceQuota ml/q: spec.hard['requests.nvidia.com/gpu']: '4x' is not a Kubernetes "
        "quantity",
    ),
    (
        flavor("spot", nodeTaints=[{"value": "x"}]),
        "ResourceFlavor spot: spec.nodeTaints[0]: needs a key and an effect",
    ),
]


@pytest.mark.parametrize(("obj", "message"), BAD, ids=[m.split(":")[1].strip() for _, m in BAD])
def test_an_unreadable_object_names_itself_and_its_field(obj: Any, message: str) -> None:
    with pytest.raises(InventoryError) as caught:
        EMPTY.with_object(obj)
    assert str(caught.value) == message
    kept = EMPTY.with_unreadable(obj, str(caught.value))
    assert list(kept.unreadable.values()) == [message]
    assert (
        kept.with_object(
            {**obj, "spec": {}} if obj["kind"] != "ClusterQueue" else cq("a", {})
        ).unreadable
        == {}
    )


def test_v1beta1_names_the_cohort_spec_cohort() -> None:
    old = cq("a", {"f": {"nominalQuota": 1}})
    old["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    old["spec"]["cohort"] = "research"
    assert supply(old).cluster_queues["a"].cohort == "research"


def test_a_status_update_keeps_the_same_supply() -> None:
    s = supply(cq("a", {"f": {"nominalQuota": 8}}))
    updated = {**cq("a", {"f": {"nominalQuota": 8}}), "status": {"pendingWorkloads": 3}}
    assert s.with_object(updated) is s
    assert s.with_object(cq("a", {"f": {"nominalQuota": 9}})) is not s


def pod_set(name: str, count: int, gpus: int, **kw: Any) -> PodSet:
    return PodSet(
        name,
        count,
        {GPU: gpus},
        kw.get("selector", {}),
        kw.get("terms", ()),
        kw.get("tolerations", ()),
        ("spec", name),
    )


def test_pod_sets_are_summed_in_a_flavor_and_spill_to_the_next() -> None:
    s = supply(
        flavor("a"), flavor("b"), cq("q", {"a": {"nominalQuota": 8}, "b": {"nominalQuota": 8}})
    )
    queue = s.cluster_queues["q"]
    assert first_unassigned(s, queue, (pod_set("x", 1, 8), pod_set("y", 1, 8))) is None
    failed = first_unassigned(
        s, queue, (pod_set("x", 1, 8), pod_set("y", 1, 8), pod_set("z", 1, 1))
    )
    assert failed is not None and failed.kueue_words() == (
        "couldn't assign flavors to pod set z: insufficient quota for nvidia.com/gpu in flavor a, "
        "previously considered podsets requests (8) + current podset request (1) > maximum "
        "capacity (8), insufficient quota for nvidia.com/gpu in flavor b, previously considered "
        "podsets requests (8) + current podset request (1) > maximum capacity (8)"
    )


def test_node_affinity_is_judged_on_the_flavor_s_own_label_keys() -> None:
    s = supply(flavor("a100", nodeLabels={"gpu": "a100"}), cq("q", {"a100": {"nominalQuota": 8}}))
    queue = s.cluster_queues["q"]
    other_key = pod_set("x", 1, 1, selector={"zone": "eu"})
    assert first_unassigned(s, queue, (other_key,)) is None
    terms = ({"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]},)
    failed = first_unassigned(s, queue, (pod_set("x", 1, 1, terms=terms),))
    assert failed is not None and failed.skipped == ("flavor a100 doesn't match node affinity",)


def test_flavor_tolerations_count_for_its_own_taints() -> None:
    taint = {"key": "spot", "value": "true", "effect": "NoSchedule"}
    tolerated = flavor(
        "spot", nodeTaints=[taint], tolerations=[{"key": "spot", "operator": "Exists"}]
    )
    s = supply(tolerated, cq("q", {"spot": {"nominalQuota": 8}}))
    assert first_unassigned(s, s.cluster_queues["q"], (pod_set("x", 1, 1),)) is None


def test_queue_use_from_kueue_s_status() -> None:
    s = supply(
        cq("a", {"f": {"nominalQuota": 8}}, cohort="c"),
        cq("b", {"f": {"nominalQuota": 8}}, cohort="c"),
    )
    status = {
        "a": {
            "pendingWorkloads": 2,
            "flavorsUsage": [
                {"name": "f", "resources": [{"name": GPU, "total": "10", "borrowed": "2"}]}
            ],
        }
    }
    (a, b) = queue_uses(s, status, is_gpu=lambda r: r == GPU)
    assert (a.used, a.borrowed, a.most, a.state) == (10, 2, 16, "borrowing 2 from the cohort")
    assert (b.used, b.state) == (0, "within nominal quota")


def test_a_pod_holds_what_its_node_offers() -> None:
    nodes = [
        {
            "kind": "Node",
            "metadata": {
                "name": "mig",
                "labels": {
                    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                    "nvidia.com/mig.strategy": "mixed",
                },
            },
            "status": {"allocatable": {"nvidia.com/mig-1g.10gb": "7"}},
        },
        {
            "kind": "Node",
            "metadata": {
                "name": "t4",
                "labels": {
                    "nvidia.com/gpu.memory": "15360",
                    "nvidia.com/gpu.replicas": "4",
                    "nvidia.com/gpu.sharing-strategy": "time-slicing",
                },
            },
            "status": {"allocatable": {"nvidia.com/gpu": "4"}},
        },
    ]
    inventory = Inventory.from_nodes(nodes)

    def use(node: str, resource: str, n: int) -> GpuUse | None:
        spec = {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"limits": {resource: n}}}],
        }
        return pod_use(spec, inventory=inventory, is_gpu=lambda r: r.startswith("nvidia.com/"))

    assert use("mig", "nvidia.com/mig-1g.10gb", 2) == GpuUse(2, 2 * 9856, 0)
    assert use("t4", GPU, 1) == GpuUse(1, 3840, 0)  # a quarter of the T4: one of 4 replicas
    assert use("elsewhere", GPU, 1) == GpuUse(1, 0, 1)
