"""gpu-memory-fit through the engine: the declared peak against the devices a pod can get."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.builders import (
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
    time_sliced_node,
)
from webhook.core.supply.inventory import Inventory

POLICY = only("gpu-memory-fit")
TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
LIMITS = ("spec", "containers", 0, "resources", "limits")
# The time-sliced node (5757 MiB per replica) and a GPU node without GFD labels.
HALF_KNOWN = Inventory.from_nodes(
    [time_sliced_node(), node("t4", allocatable={"nvidia.com/gpu": "1"})]
)


def peak(value: str) -> dict[str, str]:
    return {"gpu-admission.io/peak-memory": value, "gpu-admission.io/slo-class": "batch"}


def any_policy(tmp_path: Path) -> Any:
    return policy_file(
        tmp_path,
        "any",
        "apiVersion: gpu-admission.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: fit-any}\n"
        "spec:\n  enforcementAction: deny\n  check: memory-fit\n  parameters: {require: any}\n",
    )


def test_missing_peak_memory() -> None:
    decision = run(POLICY, pod(gpu("nvidia.com/mig-1g.10gb"), labels={}))
    assert rules(decision) == ["missing-peak-memory"]
    assert decision.findings[0].path == (*LIMITS, "nvidia.com/mig-1g.10gb")
    assert messages(decision) == [
        'container "main" requests nvidia.com/mig-1g.10gb but the pod has no '
        "gpu-admission.io/peak-memory label: without the peak GPU memory per device nothing can "
        "tell whether the model fits the device. Add the label to the pod (template) metadata, "
        "e.g. gpu-admission.io/peak-memory: 12Gi."
    ]


@pytest.mark.parametrize(
    ("value", "what"),
    [
        ("12GB", "a Kubernetes memory quantity"),
        ("12 Gi", "a Kubernetes memory quantity"),
        ("lots", "a Kubernetes memory quantity"),
        ("", "a Kubernetes memory quantity"),
        ("0", "a positive amount of memory"),
        ("-4Gi", "a positive amount of memory"),
    ],
)
def test_invalid_peak_memory(value: str, what: str) -> None:
    decision = run(POLICY, pod(gpu(), labels=peak(value)), cluster())
    assert rules(decision) == ["invalid-peak-memory"]
    assert decision.findings[0].path == ("metadata", "labels", "gpu-admission.io/peak-memory")
    assert messages(decision) == [
        f'label gpu-admission.io/peak-memory="{value}" is not {what}: write the peak GPU memory '
        "per device with a unit, e.g. 12Gi, 11G or 12000Mi."
    ]


@pytest.mark.parametrize(
    "obj",
    [
        pod(container("cpu-only"), labels={}),  # no GPU: no label needed
        pod(gpu(count=0), labels={}),
        pod(gpu("nvidia.com/hostdev"), labels={}),
    ],
)
def test_pods_without_gpus_need_no_label(obj: dict[str, Any]) -> None:
    assert rules(run(POLICY, obj, cluster())) == []


NEEDS = "the pod needs {} per device (gpu-admission.io/peak-memory={}), but "
RUN_OUT = "where the scheduler may place it: the workload would run out of GPU memory. "


@pytest.mark.parametrize(
    ("resource", "value", "extra", "offer", "fix"),
    [
        (
            "nvidia.com/mig-1g.10gb",
            "12Gi",
            {},
            "nvidia.com/mig-1g.10gb offers 9856 MiB (label nvidia.com/mig-1g.10gb.memory) "
            "on node a100-mig, ",
            "Request nvidia.com/mig-2g.20gb (19968 MiB per device) instead.",
        ),
        (
            "nvidia.com/mig-1g.10gb",
            "11G",  # decimal gigabytes: 10491 MiB, still more than the slice has
            {},
            "nvidia.com/mig-1g.10gb offers 9856 MiB (label nvidia.com/mig-1g.10gb.memory) "
            "on node a100-mig, ",
            "Request nvidia.com/mig-2g.20gb (19968 MiB per device) instead.",
        ),
        (
            "nvidia.com/mig-2g.20gb",
            "20Gi",  # "20gb" is nominal: the catalog says 19968 MiB
            {},
            "nvidia.com/mig-2g.20gb offers 19968 MiB (catalog value for A100 80GB) on node "
            "a100-mig, ",
            "Request nvidia.com/mig-3g.40gb (40192 MiB per device) instead.",
        ),
        (
            "nvidia.com/gpu",
            "6Gi",  # a time-sliced replica gets 23028 / 4 = 5757 MiB
            {},
            "nvidia.com/gpu offers 5757 MiB per replica (23028 MiB shared by 4 time-slicing "
            "replicas, label nvidia.com/gpu.memory) on node a10g-ts, ",
            "Request nvidia.com/mig-1g.10gb (9856 MiB per device) instead.",
        ),
        (
            "nvidia.com/gpu",
            "8Gi",  # fits the H100 nodes, not the time-sliced one the scheduler may pick
            {"tolerations": TOLERATE},
            "nvidia.com/gpu offers 5757 MiB per replica (23028 MiB shared by 4 time-slicing "
            "replicas, label nvidia.com/gpu.memory) on node a10g-ts, ",
            "Pin the pod to nodes where it fits with nodeSelector "
            "nvidia.com/gpu.sharing-strategy: none.",
        ),
        (
            "nvidia.com/mig-3g.40gb",
            "100Gi",
            {},
            "nvidia.com/mig-3g.40gb offers 40192 MiB (label nvidia.com/mig-3g.40gb.memory) on "
            "node a100-mig, ",
            "No GPU resource in the cluster has that much memory per device: reduce the peak.",
        ),
    ],
)
def test_exceeds_device_memory(
    resource: str, value: str, extra: dict[str, Any], offer: str, fix: str
) -> None:
    decision = run(POLICY, pod(gpu(resource), labels=peak(value), **extra), cluster())
    assert rules(decision) == ["exceeds-device-memory"]
    assert decision.findings[0].path == (*LIMITS, resource)
    (message,) = messages(decision)
    assert message.endswith(offer + RUN_OUT + fix)


def test_exceeds_device_memory_message_in_full() -> None:
    (message,) = messages(
        run(POLICY, pod(gpu("nvidia.com/mig-1g.10gb"), labels=peak("12Gi")), cluster())
    )
    assert message == (
        "the pod needs 12 GiB (12288 MiB) per device (gpu-admission.io/peak-memory=12Gi), but "
        "nvidia.com/mig-1g.10gb offers 9856 MiB (label nvidia.com/mig-1g.10gb.memory) on node "
        "a100-mig, where the scheduler may place it: the workload would run out of GPU memory. "
        "Request nvidia.com/mig-2g.20gb (19968 MiB per device) instead."
    )


@pytest.mark.parametrize(
    ("resource", "value", "extra"),
    [
        ("nvidia.com/mig-1g.10gb", "9856Mi", {}),  # exactly the slice
        ("nvidia.com/mig-1g.10gb", "9Gi", {}),
        ("nvidia.com/mig-2g.20gb", "19Gi", {}),
        ("nvidia.com/mig-3g.40gb", "39Gi", {}),
        ("nvidia.com/gpu", "5757Mi", {}),  # exactly one replica's share
        (
            "nvidia.com/gpu",
            "70Gi",
            {"tolerations": TOLERATE, "nodeSelector": {"nvidia.com/gpu.sharing-strategy": "none"}},
        ),
        ("nvidia.com/gpu", "70Gi", {"nodeSelector": {"kubernetes.io/hostname": "cpu"}}),  # no node
        ("nvidia.com/mig-7g.80gb", "79Gi", {}),  # not offered: resource-names reports it
    ],
)
def test_fits(resource: str, value: str, extra: dict[str, Any]) -> None:
    assert rules(run(POLICY, pod(gpu(resource), labels=peak(value), **extra), cluster())) == []


@pytest.mark.parametrize(
    ("value", "require", "found"),
    [
        # 4 GiB fits the time-sliced share; the T4's memory is unknown.
        ("4Gi", "all", ["unknown-device-memory"]),
        ("4Gi", "any", []),
        # 8 GiB misses the time-sliced share; the T4 might hold it.
        ("8Gi", "all", ["exceeds-device-memory"]),
        ("8Gi", "any", ["unknown-device-memory"]),
    ],
)
def test_require_all_or_any(tmp_path: Path, value: str, require: str, found: list[str]) -> None:
    policy = POLICY if require == "all" else any_policy(tmp_path)
    assert rules(run(policy, pod(gpu(), labels=peak(value)), HALF_KNOWN)) == found


def test_require_any_passes_when_one_candidate_fits(tmp_path: Path) -> None:
    obj = pod(gpu(), labels=peak("8Gi"), tolerations=TOLERATE)
    assert rules(run(POLICY, obj, cluster())) == ["exceeds-device-memory"]
    assert rules(run(any_policy(tmp_path), obj, cluster())) == []


def test_unknown_device_memory_message() -> None:
    assert messages(run(POLICY, pod(gpu(), labels=peak("4Gi")), HALF_KNOWN)) == [
        "the pod needs 4 GiB (4096 MiB) per device (gpu-admission.io/peak-memory=4Gi), but the "
        "memory of nvidia.com/gpu on node t4 is unknown (no GFD memory label and no catalog "
        "entry), so the fit cannot be proven. Label the nodes with nvidia.com/gpu.memory (GPU "
        "Feature Discovery does), or pin the pod to nodes whose memory is known."
    ]


@pytest.mark.parametrize(
    ("resource", "value", "found"),
    [
        ("nvidia.com/mig-1g.10gb", "12Gi", ["exceeds-device-memory"]),
        ("nvidia.com/mig-1g.10gb", "9Gi", []),
        ("nvidia.com/mig-1g.10gb.me", "10Gi", ["exceeds-device-memory"]),
        ("nvidia.com/mig-7g.80gb", "78Gi", []),  # the smaller of A100 and H100: 80384 MiB
        ("nvidia.com/mig-7g.80gb", "79Gi", ["exceeds-device-memory"]),
        ("nvidia.com/gpu", "500Gi", []),  # a whole GPU of unknown size: nothing to compare
        ("nvidia.com/gpu.shared", "500Gi", []),
    ],
)
def test_without_inventory_the_catalog_speaks_for_mig(
    resource: str, value: str, found: list[str]
) -> None:
    assert rules(run(POLICY, pod(gpu(resource), labels=peak(value)))) == found


def test_catalog_message_without_inventory() -> None:
    (message,) = messages(run(POLICY, pod(gpu("nvidia.com/mig-1g.10gb"), labels=peak("12Gi"))))
    assert message == (
        "the pod needs 12 GiB (12288 MiB) per device (gpu-admission.io/peak-memory=12Gi), but "
        "nvidia.com/mig-1g.10gb offers 9856 MiB (smallest catalog value of this profile, "
        "A100 40GB; no inventory "
        "given): the workload would run out of GPU memory. Request a larger MIG profile, or "
        "pass --inventory to compare with the real nodes."
    )


def test_each_gpu_resource_is_judged() -> None:
    obj = pod(
        gpu("nvidia.com/mig-1g.10gb", name="small"),
        gpu("nvidia.com/mig-3g.40gb", name="large"),
        labels=peak("12Gi"),
    )
    decision = run(POLICY, obj, cluster())
    assert rules(decision) == ["exceeds-device-memory"]
    assert decision.findings[0].path == (
        "spec",
        "containers",
        0,
        "resources",
        "limits",
        "nvidia.com/mig-1g.10gb",
    )


def test_init_container_gpu_needs_the_label() -> None:
    obj = pod(container("app"), initContainers=[gpu(name="warmup")], labels={})
    (message,) = messages(run(POLICY, obj, cluster()))
    assert message.startswith('init container "warmup" requests nvidia.com/gpu but the pod has no')


def test_template_labels_count_not_the_controller_labels() -> None:
    template = template_of(pod(gpu("nvidia.com/mig-1g.10gb"), labels={}))
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "labels": peak("4Gi")},
        "spec": {"template": template},
    }
    decision = run(POLICY, deployment, cluster())
    assert rules(decision) == ["missing-peak-memory"]
    template["metadata"]["labels"] = peak("4Gi")
    assert rules(run(POLICY, deployment, cluster())) == []


def test_custom_label_key(tmp_path: Path) -> None:
    policy = policy_file(
        tmp_path,
        "custom-label",
        "apiVersion: gpu-admission.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: fit}\n"
        "spec:\n  enforcementAction: deny\n  check: memory-fit\n"
        "  parameters: {label: example.com/gpu-peak}\n",
    )
    obj = pod(gpu("nvidia.com/mig-1g.10gb"), labels={"example.com/gpu-peak": "12Gi"})
    (message,) = messages(run(policy, obj, cluster()))
    assert message.startswith(
        "the pod needs 12 GiB (12288 MiB) per device (example.com/gpu-peak=12Gi)"
    )


def test_a_peak_without_a_unit_is_bytes_and_reported() -> None:
    labels = {"gpu-admission.io/peak-memory": "12", "gpu-admission.io/slo-class": "batch"}
    decision = run(POLICY, pod(gpu("nvidia.com/mig-3g.40gb"), labels=labels), cluster())
    assert rules(decision) == ["invalid-peak-memory"]
    assert messages(decision) == [
        'label gpu-admission.io/peak-memory="12" has no unit, so it means 12 bytes: write the '
        "peak GPU memory per device with a unit, e.g. 12Gi or 12G."
    ]


SMALLEST = "smallest catalog value of this profile"


@pytest.mark.parametrize(
    ("resource", "offer"),
    [
        # A slice exposes less than its name: 16 GiB fits none of these (measured figures).
        ("nvidia.com/mig-1g.18gb", f"16384 MiB ({SMALLEST}, H200 141GB"),
        ("nvidia.com/mig-1g.12gb", f"11008 MiB ({SMALLEST}, H100 NVL 94GB"),
        ("nvidia.com/mig-1g.23gb", f"20992 MiB ({SMALLEST}, B200 180GB"),
    ],
)  # fmt: skip
def test_newer_gpus_slices_are_judged_by_what_they_expose(resource: str, offer: str) -> None:
    peak_of = {"1g.18gb": "17Gi", "1g.12gb": "11Gi", "1g.23gb": "21Gi"}
    value = next(v for k, v in peak_of.items() if k in resource)
    (message,) = messages(run(POLICY, pod(gpu(resource), labels=peak(value))))
    assert f"{resource} offers {offer}; no inventory given)" in message
