"""gpu-resource-names through the engine: names, counts and candidate nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.builders import (
    POLICIES,
    cluster,
    container,
    gpu,
    messages,
    node,
    only,
    pod,
    policy_file,
    rules,
    run,
    template_of,
)
from tests.support.paths import ROOT
from webhook.core.supply.inventory import Inventory

POLICY = only("gpu-resource-names")
TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
ON_H100 = {"nodeSelector": {"nvidia.com/gpu.sharing-strategy": "none"}, "tolerations": TOLERATE}
LIMIT = 'spec.containers[0].resources.limits["{}"]'
INTEL = Inventory.from_nodes(
    [node("arc", allocatable={"gpu.intel.com/i915": "1", "gpu.intel.com/xe": "1"})]
)


@pytest.mark.parametrize(
    "resource",
    [
        "nvidia.com/gpu",
        "nvidia.com/gpu.shared",
        "nvidia.com/mig-1g.10gb",
        "nvidia.com/mig-1g.10gb.me",
        "nvidia.com/mig-3g.40gb.shared",
        "nvidia.com/mig-1g.5gb",
        "nvidia.com/mig-7g.141gb",
        "amd.com/gpu",
        "gpu.intel.com/i915",
        "gpu.intel.com/xe",
        "nvidia.com/hostdev",  # a NIC, not a GPU: ignored
        "nvidia.com/sriovlegacy",  # network operator's SR-IOV VF (its sriov example)
        "nvidia.com/sriov_rdma_vf",  # its sosreport's VF name
        "nvidia.com/rdma-vf",  # OCI's add-on VF name
        "nvidia.com/rdma_shared_device_a",  # RDMA shared device plugin, nvidia.com prefix
        "rdma/rdma_shared_device_a",  # not a GPU vendor prefix
        "example.com/foo",
    ],
)
def test_names_known_without_inventory(resource: str) -> None:
    assert rules(run(POLICY, pod(gpu(resource)))) == []


@pytest.mark.parametrize(
    ("resource", "inventory", "tail"),
    [
        ("nvidia.com/gpus", None, "did you mean nvidia.com/gpu?"),
        ("amd.com/gpus", None, "did you mean amd.com/gpu?"),
        (
            "nvidia.com/mig-1g.11gb",
            None,
            "did you mean nvidia.com/mig-1g.18gb or nvidia.com/mig-1g.12gb or "
            "nvidia.com/mig-1g.10gb?",
        ),
        (
            "nvidia.com/mig-1g.10gb+me",
            None,
            "did you mean nvidia.com/mig-1g.10gb.me or nvidia.com/mig-1g.10gb?",
        ),
        ("nvidia.com/gpumemory", None, "did you mean nvidia.com/gpu?"),  # HAMi's, misspelt
        ("nvidia.com/mig-1g.5gb", cluster(), "did you mean nvidia.com/mig-1g.10gb?"),
        ("nvidia.com/gpu.shared", cluster(), "did you mean nvidia.com/gpu?"),
        ("amd.com/gpu", cluster(), "no node advertises any amd.com/ resource."),
        (
            "gpu.intel.com/millicores-of-something",
            INTEL,
            "advertised gpu.intel.com/ resources: gpu.intel.com/i915, gpu.intel.com/xe.",
        ),
    ],
)
def test_unknown_resource(resource: str, inventory: Inventory | None, tail: str) -> None:
    decision = run(POLICY, pod(gpu(resource)), inventory)
    assert rules(decision) == ["unknown-resource"]
    scope = (
        f"no node in the inventory ({len(inventory.nodes)} node"
        f"{'s' if len(inventory.nodes) > 1 else ''}) advertises"
        if inventory
        else "is not a name any GPU device plugin advertises"
    )
    (message,) = messages(decision)
    assert message.startswith(
        f'container "main" requests {resource} ({LIMIT.format(resource)}), which {scope}: the Pod '
        f"would stay Pending forever (Insufficient {resource}); "
    )
    assert message.endswith(tail)


def test_unknown_resource_reported_once_per_name() -> None:
    obj = pod(gpu("nvidia.com/gpus", name="a"), gpu("nvidia.com/gpus", name="b"))
    assert rules(run(POLICY, obj)) == ["unknown-resource"]


@pytest.mark.parametrize(
    ("obj", "requested", "offered"),
    [
        # 9 > 8: the H100 nodes are the only ones this pod can use.
        (pod(gpu(count=9), **ON_H100), 9, "8 (node h100-a)"),
        # Without a toleration only the time-sliced node is left: 16 replicas.
        (pod(gpu(count=17)), 17, "16 (node a10g-ts)"),
        (pod(gpu("nvidia.com/mig-3g.40gb", 3)), 3, "2 (node a100-mig)"),
        # The effective request: the sum of the containers, or the largest init container.
        (pod(gpu(count=5, name="a"), gpu(count=4, name="b"), **ON_H100), 9, "8 (node h100-a)"),
        (pod(gpu(count=1), initContainers=[gpu(count=9, name="warm")], **ON_H100), 9, "8"),
    ],
)
def test_insufficient_capacity(obj: dict[str, Any], requested: int, offered: str) -> None:
    decision = run(POLICY, obj, cluster())
    assert rules(decision) == ["insufficient-capacity"]
    (message,) = messages(decision)
    assert message.startswith(f"the pod requests {requested} nvidia.com/")
    assert f"the most any node that can take this pod offers is {offered}" in message


def test_insufficient_capacity_message_in_full() -> None:
    (message,) = messages(run(POLICY, pod(gpu(count=9), **ON_H100), cluster()))
    assert message == (
        "the pod requests 9 nvidia.com/gpu in all "
        '(spec.containers[0].resources.limits["nvidia.com/gpu"]; the larger of its biggest '
        "init container and the sum of its containers); the most any node that can take this "
        "pod offers is 8 (node h100-a), so it would stay Pending forever. Request at most 8, "
        "or split the work across Pods."
    )


@pytest.mark.parametrize(
    "obj",
    [
        pod(gpu(count=8), **ON_H100),
        pod(gpu(count=16)),
        pod(gpu(count=4, name="a"), gpu(count=4, name="b"), **ON_H100),
        pod(gpu(count=8), initContainers=[gpu(count=8, name="warm")], **ON_H100),
        pod(gpu("nvidia.com/mig-3g.40gb", 2)),
        pod(gpu(count=0)),
    ],
)
def test_capacity_that_fits(obj: dict[str, Any]) -> None:
    assert rules(run(POLICY, obj, cluster())) == []


def test_no_capacity_check_without_inventory() -> None:
    assert rules(run(POLICY, pod(gpu(count=100)))) == []


def test_no_candidate_node_because_of_taint() -> None:
    obj = pod(gpu(), nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    decision = run(POLICY, obj, cluster())
    assert rules(decision) == ["no-candidate-node"]
    assert decision.findings[0].path == (
        "spec",
        "containers",
        0,
        "resources",
        "limits",
        "nvidia.com/gpu",
    )
    assert messages(decision) == [
        'the pod requests nvidia.com/gpu (spec.containers[0].resources.limits["nvidia.com/gpu"]), '
        "but none of the 3 nodes that advertise it can take this pod (h100-a: taint "
        "nvidia.com/gpu=present:NoSchedule, h100-b: taint nvidia.com/gpu=present:NoSchedule, "
        "a10g-ts: nodeSelector nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3), so it would stay "
        "Pending forever. Fix the nodeSelector/affinity, or add a toleration for the taint."
    ]


def test_no_candidate_node_because_of_affinity() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
                ]
            }
        }
    }
    (message,) = messages(
        run(POLICY, pod(gpu("nvidia.com/mig-1g.10gb"), affinity=affinity), cluster())
    )
    assert (
        "the one node that advertises it cannot take this pod (a100-mig: required node " in message
    )


@pytest.mark.parametrize(
    ("placement", "hint"),
    [
        # A typo of a real product label: the closest value any node carries.
        (
            {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM"}},
            "; nodeSelector nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM matches no node: "
            "did you mean nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3? Fix",
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "nvidia.com/gpu.product",
                                            "operator": "In",
                                            "values": ["NVIDIA-A10G-SHARD"],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                }
            },
            "; node affinity nvidia.com/gpu.product=NVIDIA-A10G-SHARD matches no node: "
            "did you mean nvidia.com/gpu.product=NVIDIA-A10G-SHARED? Fix",
        ),
        # A real value (the nodes are refused for their taint) and a value close to
        # nothing get no guess.
        ({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}, ""),
        ({"nodeSelector": {"nvidia.com/gpu.product": "tpu-v5-lite-podslice"}}, ""),
        ({"nodeSelector": {"no-such-key": "NVIDIA-H100-80GB-HBM"}}, ""),
        ({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3" * 10}}, ""),
    ],
)
def test_no_candidate_node_did_you_mean(placement: dict[str, Any], hint: str) -> None:
    (message,) = messages(run(POLICY, pod(gpu(), **placement), cluster()))
    if hint:
        assert hint in message
    else:
        assert "did you mean" not in message
        assert "Pending forever. Fix the nodeSelector/affinity" in message


@pytest.mark.parametrize(
    ("c", "rule", "text"),
    [
        (gpu(count="0.5"), "non-integer-count", 'asks for "0.5" nvidia.com/gpu'),
        (gpu(count="500m"), "non-integer-count", 'asks for "500m" nvidia.com/gpu'),
        (gpu(count="one"), "non-integer-count", 'asks for "one" nvidia.com/gpu'),
        (gpu(count=-1), "non-integer-count", 'asks for "-1" nvidia.com/gpu'),
        (
            container(requests={"nvidia.com/gpu": 1}),
            "request-without-limit",
            'container "main" (spec.containers[0].resources.requests["nvidia.com/gpu"]) requests '
            "nvidia.com/gpu without a limit: the apiserver rejects extended resources without "
            "limits. Set resources.limits[nvidia.com/gpu] to the same count (a limit alone is "
            "enough; the request defaults to it).",
        ),
        (
            container(requests={"nvidia.com/gpu": 1}, limits={"nvidia.com/gpu": 2}),
            "request-limit-mismatch",
            'container "main" (spec.containers[0].resources.limits["nvidia.com/gpu"]) requests 1 '
            "but limits 2 nvidia.com/gpu: extended resources cannot be overcommitted, so the "
            "apiserver rejects the Pod. Make them equal.",
        ),
        (container(requests={"nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": 1}), None, None),
        (container(requests={"nvidia.com/gpu": "1000m"}, limits={"nvidia.com/gpu": 1}), None, None),
        (container(requests={"example.com/foo": 1}), None, None),  # not a GPU vendor
    ],
)
def test_what_the_apiserver_would_reject(
    c: dict[str, Any], rule: str | None, text: str | None
) -> None:
    decision = run(POLICY, pod(c))
    if rule is None:
        assert rules(decision) == []
        return
    assert rules(decision) == [rule]
    assert text is not None and text in decision.findings[0].message


def test_non_integer_count_message_in_full() -> None:
    (message,) = messages(run(POLICY, pod(gpu(count="500m"))))
    assert message == (
        'container "main" (spec.containers[0].resources.limits["nvidia.com/gpu"]) asks for '
        '"500m" nvidia.com/gpu: extended resources must be whole numbers, so the apiserver '
        "rejects the Pod. Request a whole count, or a smaller unit such as a MIG or shared "
        "resource."
    )


def test_init_and_ephemeral_containers_count() -> None:
    obj = pod(
        container("app"),
        initContainers=[gpu("nvidia.com/gpus", name="warm")],
        ephemeralContainers=[gpu(count="0.5", name="dbg")],
    )
    decision = run(POLICY, obj)
    assert rules(decision) == ["non-integer-count", "unknown-resource"]
    assert decision.findings[0].message.startswith('ephemeral container "dbg"')
    assert decision.findings[1].message.startswith('init container "warm" requests nvidia.com/gpus')


def test_findings_on_a_controller_point_into_its_template() -> None:
    template = template_of(pod(gpu(count=9), **ON_H100))
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": template},
    }
    decision = run(POLICY, job, cluster())
    assert rules(decision) == ["insufficient-capacity"]
    assert decision.findings[0].path == (
        "spec",
        "template",
        "spec",
        "containers",
        0,
        "resources",
        "limits",
        "nvidia.com/gpu",
    )
    assert '(spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"];' in (
        decision.findings[0].message
    )


@pytest.mark.parametrize("inventory", [None, cluster()], ids=["no inventory", "inventory"])
def test_hami_shares_and_nvidia_nics_are_not_gpu_counts(inventory: Inventory | None) -> None:
    limits = {"nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30,
              "nvidia.com/gpumem-percentage": 50, "nvidia.com/hostdev": 1}  # fmt: skip
    decision = run(POLICY, pod(container(limits=limits)), inventory)
    assert rules(decision) == []


_UNTAINTED = Inventory.from_nodes(
    [node("a1", labels={"zone": "a"}, allocatable={"nvidia.com/gpu": "1"})]
)


@pytest.mark.parametrize(
    ("inventory", "spec", "reason", "fix"),
    [
        # Only a selector in the way: no word about tolerations.
        (_UNTAINTED, {"nodeSelector": {"zone": "b"}}, "a1: nodeSelector zone=b",
         "Fix the nodeSelector/affinity."),
        # A taint among the reasons: the toleration is part of the fix.
        (cluster(), {"nodeSelector": {"nvidia.com/gpu.sharing-strategy": "none"}}, None,
         "Fix the nodeSelector/affinity, or add a toleration for the taint."),
    ],
)  # fmt: skip
def test_no_candidate_node_names_a_toleration_only_for_a_taint(
    inventory: Inventory, spec: dict[str, Any], reason: str | None, fix: str
) -> None:
    (message,) = messages(run(POLICY, pod(gpu(), **spec), inventory))
    assert message.endswith(f"so it would stay Pending forever. {fix}")
    if reason is not None:
        assert f"({reason})" in message


NETWORK = ROOT / "tests" / "data" / "network"


@pytest.mark.parametrize(
    "name", ["example__sriov-network__sriov-network-pod1.yaml", "example__rdma-gpu-test-pod1.yml"]
)
@pytest.mark.parametrize("inventory", [None, cluster()], ids=["no inventory", "inventory"])
def test_network_operator_pods_are_not_unknown_gpus(name: str, inventory: Inventory | None) -> None:
    (obj,) = yaml.safe_load_all((NETWORK / name).read_text())
    assert "unknown-resource" not in rules(run(POLICY, obj, inventory))


def test_network_resources_is_what_keeps_them_apart(tmp_path: Path) -> None:
    # Without the parameter the network operator's VF is an unknown GPU again: the
    # parameter, not a hidden exception, decides.
    text = (POLICIES / "gpu-resource-names.yaml").read_text()
    text = text.replace("      - nvidia.com/sriov*\n", "")
    policy_set = policy_file(tmp_path, "gpu-resource-names", text)
    (obj,) = yaml.safe_load_all(
        (NETWORK / "example__sriov-network__sriov-network-pod1.yaml").read_text()
    )
    assert rules(run(policy_set, obj)) == ["unknown-resource"]
