"""gpu-slo-class through the engine: which sharing modes a pod's SLO class accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.builders import (
    cluster,
    container,
    gpu,
    h100_node,
    messages,
    mig_node,
    node,
    only,
    pod,
    policy_file,
    rules,
    run,
    template_of,
)
from webhook.core.supply.inventory import Inventory

POLICY = only("gpu-slo-class")
TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
ON_H100 = {"nodeSelector": {"nvidia.com/gpu.sharing-strategy": "none"}, "tolerations": TOLERATE}
MPS = Inventory.from_nodes(
    [
        node(
            "mps",
            labels={
                "nvidia.com/gpu.memory": "81559",
                "nvidia.com/gpu.sharing-strategy": "mps",
                "nvidia.com/gpu.replicas": "2",
            },
            allocatable={"nvidia.com/gpu": "16"},
        ),
        h100_node("h100-a"),
    ]
)
# A MIG node whose 1g.10gb slices are time-sliced, two replicas each.
SHARED_MIG = Inventory.from_nodes(
    [
        node(
            "mig-ts",
            labels={
                **mig_node()["metadata"]["labels"],
                "nvidia.com/mig-1g.10gb.replicas": "2",
                "nvidia.com/mig-1g.10gb.sharing-strategy": "time-slicing",
            },
            allocatable={"nvidia.com/mig-1g.10gb": "14"},
        )
    ]
)


def slo(value: str) -> dict[str, str]:
    return {"gpu-admission.io/peak-memory": "4Gi", "gpu-admission.io/slo-class": value}


LS = slo("latency-sensitive")
SHARED_WHY = (
    "time-sliced replicas share the GPU's time and memory with no isolation, so another "
    "tenant can stall this one or take its memory."
)


MPS_WHY = (
    "MPS clients split the GPU's memory but share its compute and fault domain, so another "
    "tenant's load or crash reaches this one."
)


def test_missing_slo_class() -> None:
    decision = run(POLICY, pod(gpu(), labels={"gpu-admission.io/peak-memory": "4Gi"}))
    assert rules(decision) == ["missing-slo-class"]
    assert decision.findings[0].path == (
        "spec",
        "containers",
        0,
        "resources",
        "limits",
        "nvidia.com/gpu",
    )
    assert messages(decision) == [
        'container "main" requests nvidia.com/gpu but the pod has no gpu-admission.io/slo-class '
        "label: it decides which GPU sharing modes the pod may use. Add the label to the pod "
        "(template) metadata with one of: latency-sensitive, batch."
    ]


@pytest.mark.parametrize("value", ["realtime", "Latency-Sensitive", "", "batch "])
def test_unknown_slo_class(value: str) -> None:
    decision = run(POLICY, pod(gpu(), labels=slo(value)), cluster())
    assert rules(decision) == ["unknown-slo-class"]
    assert decision.findings[0].path == ("metadata", "labels", "gpu-admission.io/slo-class")
    assert messages(decision) == [
        f'label gpu-admission.io/slo-class="{value}" is not a configured SLO class; use one of: '
        "latency-sensitive, batch."
    ]


def test_pods_without_gpus_need_no_class() -> None:
    assert rules(run(POLICY, pod(container("web"), labels={}), cluster())) == []


@pytest.mark.parametrize(
    ("obj", "inventory", "mode", "nodes"),
    [
        # Without a toleration the only nvidia.com/gpu node left is the time-sliced one.
        (pod(gpu(), labels=LS), cluster(), "time-slicing (4 replicas per device)", "a10g-ts"),
        # With it the scheduler may still pick the time-sliced node.
        (
            pod(gpu(), labels=LS, tolerations=TOLERATE),
            cluster(),
            "time-slicing (4 replicas per device)",
            "a10g-ts",
        ),
        (
            pod(gpu(), labels=LS, tolerations=TOLERATE),
            MPS,
            "mps (2 replicas per device)",
            "mps",
        ),
        (
            pod(gpu("nvidia.com/mig-1g.10gb"), labels=LS),
            SHARED_MIG,
            "time-slicing (2 replicas per device)",
            "mig-ts",
        ),
    ],
)
def test_sharing_mode_not_accepted(
    obj: dict[str, Any], inventory: Inventory, mode: str, nodes: str
) -> None:
    decision = run(POLICY, obj, inventory)
    assert rules(decision) == ["sharing-mode-not-accepted"]
    (message,) = messages(decision)
    resource = next(iter(obj["spec"]["containers"][0]["resources"]["limits"]))
    assert message.startswith(
        "the pod is latency-sensitive (gpu-admission.io/slo-class), which accepts only exclusive "
        f'or mig GPUs, but container "main" requests {resource}, which is {mode} on node '
        f"{nodes}, where it can land: {MPS_WHY if nodes == 'mps' else SHARED_WHY} Request a MIG "
        "resource (nvidia.com/mig-<profile>) or exclusive GPUs"
    )


@pytest.mark.parametrize(
    ("tolerations", "tail"),
    [
        (TOLERATE, "."),
        # The exclusive nodes are tainted: pinning alone would leave the pod Pending.
        ([], " and tolerate nvidia.com/gpu=present:NoSchedule."),
    ],
)
def test_sharing_mode_message_names_the_pinning_label(
    tolerations: list[dict[str, str]], tail: str
) -> None:
    (message,) = messages(run(POLICY, pod(gpu(), labels=LS, tolerations=tolerations), cluster()))
    assert message.endswith(
        "Request a MIG resource (nvidia.com/mig-<profile>) or exclusive GPUs, or pin the pod "
        "with nodeSelector nvidia.com/gpu.sharing-strategy: none" + tail
    )


@pytest.mark.parametrize(
    ("obj", "inventory"),
    [
        (pod(gpu(), labels=LS, **ON_H100), cluster()),  # exclusive H100s only
        (pod(gpu("nvidia.com/mig-1g.10gb"), labels=LS), cluster()),  # MIG
        (pod(gpu("nvidia.com/mig-3g.40gb"), labels=LS), cluster()),
        (pod(gpu(), labels=slo("batch")), cluster()),  # batch on the time-sliced node
        (pod(gpu(), labels=slo("batch"), tolerations=TOLERATE), MPS),
        (pod(gpu("nvidia.com/mig-1g.10gb"), labels=slo("batch")), SHARED_MIG),
        # No candidate node at all: resource-names reports that, not this policy.
        (pod(gpu(), labels=LS, nodeSelector={"kubernetes.io/hostname": "cpu"}), cluster()),
        (pod(gpu("nvidia.com/mig-9g.99gb"), labels=LS), cluster()),
    ],
)
def test_accepted(obj: dict[str, Any], inventory: Inventory) -> None:
    assert rules(run(POLICY, obj, inventory)) == []


@pytest.mark.parametrize(
    ("resource", "fix"),
    [
        ("nvidia.com/gpu.shared", "Request nvidia.com/gpu instead."),
        ("nvidia.com/mig-3g.40gb.shared", "Request nvidia.com/mig-3g.40gb instead."),
        ("nvidia.com/mig-1g.10gb.me.shared", "Request nvidia.com/mig-1g.10gb.me instead."),
        ("nvidia.com/gpu", None),  # a whole GPU of unknown sharing: nothing to say
        ("nvidia.com/mig-1g.10gb", None),
    ],
)
def test_without_inventory_the_name_speaks(resource: str, fix: str | None) -> None:
    decision = run(POLICY, pod(gpu(resource), labels=LS))
    if fix is None:
        assert rules(decision) == []
        return
    assert messages(decision) == [
        "the pod is latency-sensitive (gpu-admission.io/slo-class), which accepts only "
        f'exclusive or mig GPUs, but container "main" requests {resource}, a time-sliced or MPS '
        f"resource by its name: {SHARED_WHY} {fix}"
    ]


CUSTOM = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {name: slo-custom}
spec:
  enforcementAction: deny
  check: slo-class
  parameters:
    label: example.com/tier
    classes:
      gold: [exclusive]
      silver: [exclusive, mig]
"""


@pytest.mark.parametrize(
    ("tier", "resource", "inventory", "found"),
    [
        ("gold", "nvidia.com/mig-1g.10gb", None, ["sharing-mode-not-accepted"]),
        ("gold", "nvidia.com/mig-1g.10gb", "cluster", ["sharing-mode-not-accepted"]),
        ("silver", "nvidia.com/mig-1g.10gb", "cluster", []),
        ("bronze", "nvidia.com/mig-1g.10gb", "cluster", ["unknown-slo-class"]),
        ("gold", "nvidia.com/gpu.shared", None, ["sharing-mode-not-accepted"]),
    ],
)
def test_custom_classes(
    tmp_path: Path, tier: str, resource: str, inventory: str | None, found: list[str]
) -> None:
    policy = policy_file(tmp_path, "custom", CUSTOM)
    decision = run(
        policy,
        pod(gpu(resource), labels={"example.com/tier": tier}),
        cluster() if inventory else None,
    )
    assert rules(decision) == found


def test_custom_class_messages(tmp_path: Path) -> None:
    policy = policy_file(tmp_path, "custom", CUSTOM)
    obj = pod(gpu("nvidia.com/mig-1g.10gb"), labels={"example.com/tier": "gold"})
    assert messages(run(policy, obj)) == [
        "the pod is gold (example.com/tier), which accepts only exclusive GPUs, but container "
        '"main" requests nvidia.com/mig-1g.10gb, a MIG slice. Request nvidia.com/gpu instead.'
    ]
    (message,) = messages(run(policy, obj, cluster()))
    assert ", which is mig on node a100-mig, where it can land: " in message
    assert message.endswith("Request exclusive GPUs.")
    obj["metadata"]["labels"] = {}
    assert messages(run(policy, obj)) == [
        'container "main" requests nvidia.com/mig-1g.10gb but the pod has no example.com/tier '
        "label: it decides which GPU sharing modes the pod may use. Add the label to the pod "
        "(template) metadata with one of: gold, silver."
    ]


def test_every_resource_of_a_pod_is_judged() -> None:
    obj = pod(gpu("nvidia.com/mig-1g.10gb", name="a"), gpu(name="b"), labels=LS)
    decision = run(POLICY, obj, cluster())
    assert rules(decision) == ["sharing-mode-not-accepted"]
    assert decision.findings[0].path == (
        "spec",
        "containers",
        1,
        "resources",
        "limits",
        "nvidia.com/gpu",
    )


def test_on_a_statefulset_template() -> None:
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "s"},
        "spec": {"template": template_of(pod(gpu(), labels=LS))},
    }
    decision = run(POLICY, sts, cluster())
    assert rules(decision) == ["sharing-mode-not-accepted"]
    assert decision.findings[0].path[:3] == ("spec", "template", "spec")
