"""GPU shares in the access model, AMD and Intel offers, vendor-aware fixes, and
privileged pods that no GPU node can take: one table per concept, exact messages."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from tests.support.builders import cluster_nodes, container, messages, node, only, pod, rules, run
from webhook.checks import device_injection
from webhook.core.access.model import gpu_shares, pod_access
from webhook.core.supply.inventory import Inventory, make_offer, parse_node
from webhook.core.workloads.pods import PodView
from webhook.core.workloads.targets import pod_views

LABELS = {"gpu-admission.io/peak-memory": "8Gi", "gpu-admission.io/slo-class": "batch"}


def view(obj: dict[str, Any]) -> PodView:
    (only_view,) = pod_views(obj) or []
    return only_view


def share_of(obj: dict[str, Any]) -> tuple[Any, ...] | None:
    """(mechanism, container, field, resource, mode, MiB, fraction, problem) or None."""
    shares = gpu_shares(view(obj))
    if not shares:
        return None
    (s,) = shares
    who = s.container.name if s.container is not None else None
    return (s.mechanism, who, s.field, s.resource, s.mode, s.memory_mib, s.fraction, s.problem)


def limits(values: dict[str, Any] | None = None) -> dict[str, Any]:
    return container("app", limits=values)


SIDECAR = container("sidecar")
HALF, ONE = Fraction(1, 2), Fraction(1)


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        # KAI: the first container by default, the named one when the pod says so.
        (
            pod(limits(), SIDECAR, annotations={"gpu-fraction": "0.5"}),
            (
                "KAI scheduler",
                "app",
                'annotation gpu-fraction="0.5"',
                "nvidia.com/gpu",
                "time-slicing",
                None,
                HALF,
                "",
            ),
        ),
        (
            pod(
                SIDECAR,
                limits(),
                annotations={
                    "gpu-fraction": "0.25",
                    "gpu-fraction-container-name": "app",
                    "mps": "true",
                },
            ),
            (
                "KAI scheduler",
                "app",
                'annotation gpu-fraction="0.25"',
                "nvidia.com/gpu",
                "mps",
                None,
                Fraction(1, 4),
                "",
            ),
        ),
        (
            pod(limits(), annotations={"gpu-memory": "2000"}),
            (
                "KAI scheduler",
                "app",
                'annotation gpu-memory="2000"',
                "nvidia.com/gpu",
                "time-slicing",
                Fraction(2000),
                None,
                "",
            ),
        ),
        (
            pod(limits(), annotations={"gpu-fraction": "1.5"}),
            (
                "KAI scheduler",
                "app",
                'annotation gpu-fraction="1.5"',
                "nvidia.com/gpu",
                "time-slicing",
                None,
                None,
                'annotation gpu-fraction="1.5" is not a number between 0 and 1',
            ),
        ),
        (
            pod(limits(), annotations={"gpu-memory": "2Gi"}),
            (
                "KAI scheduler",
                "app",
                'annotation gpu-memory="2Gi"',
                "nvidia.com/gpu",
                "time-slicing",
                None,
                None,
                'annotation gpu-memory="2Gi" is not a whole number of MiB above zero',
            ),
        ),
        (
            pod(
                limits(), annotations={"gpu-fraction": "0.5", "gpu-fraction-container-name": "gone"}
            ),
            (
                "KAI scheduler",
                None,
                'annotation gpu-fraction="0.5"',
                "nvidia.com/gpu",
                "time-slicing",
                None,
                HALF,
                "",
            ),
        ),
        # HAMi: memory, a percentage, cores; a device of its own is no share.
        (
            pod(
                limits({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30})
            ),
            (
                "HAMi",
                "app",
                "nvidia.com/gpumem: 3000",
                "nvidia.com/gpu",
                "time-slicing",
                Fraction(3000),
                None,
                "",
            ),
        ),
        (
            pod(limits({"nvidia.com/gpu": 2, "nvidia.com/gpumem-percentage": 50})),
            (
                "HAMi",
                "app",
                "nvidia.com/gpumem-percentage: 50",
                "nvidia.com/gpu",
                "time-slicing",
                None,
                HALF,
                "",
            ),
        ),
        (
            pod(limits({"nvidia.com/gpu": 1, "nvidia.com/gpucores": 60})),
            (
                "HAMi",
                "app",
                "nvidia.com/gpucores: 60",
                "nvidia.com/gpu",
                "time-slicing",
                None,
                ONE,
                "",
            ),
        ),
        (
            pod(
                limits({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 8000}),
                annotations={"nvidia.com/vgpu-mode": "mig"},
            ),
            (
                "HAMi",
                "app",
                "nvidia.com/gpumem: 8000",
                "nvidia.com/gpu",
                "mig",
                Fraction(8000),
                None,
                "",
            ),
        ),
        (pod(limits({"nvidia.com/gpu": 1})), None),
        (
            pod(
                limits(
                    {
                        "nvidia.com/gpu": 2,
                        "nvidia.com/gpumem-percentage": 100,
                        "nvidia.com/gpucores": 100,
                    }
                )
            ),
            None,
        ),
        (pod(limits({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 100})), None),
        (
            pod(
                limits({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 100})
            ),
            None,
        ),
        (
            pod(
                limits({"hygon.com/dcunum": 1, "hygon.com/dcumem": 2000, "hygon.com/dcucores": 60})
            ),
            (
                "HAMi",
                "app",
                "hygon.com/dcumem: 2000",
                "hygon.com/dcunum",
                "time-slicing",
                Fraction(2000),
                None,
                "",
            ),
        ),
        # Volcano: vGPU (a bare count is still a share), the older GPU share.
        (
            pod(limits({"volcano.sh/vgpu-number": 1})),
            (
                "Volcano vGPU",
                "app",
                "volcano.sh/vgpu-number: 1",
                "volcano.sh/vgpu-number",
                "time-slicing",
                None,
                ONE,
                "",
            ),
        ),
        (
            pod(limits({"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory-percentage": 25})),
            (
                "Volcano vGPU",
                "app",
                "volcano.sh/vgpu-memory-percentage: 25",
                "volcano.sh/vgpu-number",
                "time-slicing",
                None,
                Fraction(1, 4),
                "",
            ),
        ),
        (
            pod(
                limits({"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 3000}),
                annotations={"volcano.sh/vgpu-mode": "mig"},
            ),
            (
                "Volcano vGPU",
                "app",
                "volcano.sh/vgpu-memory: 3000",
                "volcano.sh/vgpu-number",
                "mig",
                Fraction(3000),
                None,
                "",
            ),
        ),
        (pod(limits({"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-cores": 100})), None),
        (
            pod(limits({"volcano.sh/gpu-memory": 1024})),
            (
                "Volcano GPU share",
                "app",
                "volcano.sh/gpu-memory: 1024",
                "volcano.sh/gpu-memory",
                "time-slicing",
                Fraction(1024),
                None,
                "",
            ),
        ),
        (pod(limits({"volcano.sh/gpu-memory": 0})), None),
        (pod(limits(), annotations={"example.com/gpu-fraction": "0.5"}), None),
    ],
)
def test_shares(obj: dict[str, Any], expected: tuple[Any, ...] | None) -> None:
    assert share_of(obj) == expected


def test_shares_are_in_the_access_model_once() -> None:
    v = view(pod(limits(), annotations={"gpu-fraction": "0.5"}))
    rules_ = device_injection.Params().rules
    assert pod_access(v, rules=rules_).shares is gpu_shares(v) is gpu_shares(v)


def test_a_hostile_fraction_costs_nothing() -> None:
    value = "0." + "9" * 100_000
    (s,) = gpu_shares(view(pod(limits(), annotations={"gpu-fraction": value})))
    assert s.fraction is None and s.problem.endswith("is not a number between 0 and 1")


def offer_of(labels: dict[str, str], resource: str, count: int) -> tuple[Any, ...]:
    n = parse_node(node("n", labels=labels, allocatable={resource: str(count)}))
    o = make_offer(n, resource, count)
    return (o.sharing, o.replicas, o.memory_mib, o.memory_source, o.product)


@pytest.mark.parametrize(
    ("labels", "resource", "count", "expected"),
    [
        (
            {"amd.com/gpu.vram": "192G", "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"},
            "amd.com/gpu",
            8,
            (
                "exclusive",
                1,
                196096,
                "label amd.com/gpu.vram=192G, rounded to the nearest GiB: at least 196096 MiB",
                "AMD_Instinct_MI300X_OAM",
            ),
        ),
        (
            {"beta.amd.com/gpu.vram": "64G"},
            "amd.com/gpu",
            1,
            (
                "exclusive",
                1,
                65024,
                "label beta.amd.com/gpu.vram=64G, rounded to the nearest GiB: at least 65024 MiB",
                "",
            ),
        ),
        (  # GPUs of two sizes: the smaller counts
            {"amd.com/gpu.vram.16G": "1", "amd.com/gpu.vram.32G": "1"},
            "amd.com/gpu",
            2,
            (
                "exclusive",
                1,
                15872,
                "label amd.com/gpu.vram.16G=16G, rounded to the nearest GiB: at least 15872 MiB",
                "",
            ),
        ),
        (
            {"amd.com/gpu.vram": "192G", "amd.com/compute-memory-partition": "cpx_nps4"},
            "amd.com/gpu",
            64,
            (
                "exclusive",
                1,
                None,
                "no memory label for one partition (amd.com/compute-memory-partition=cpx_nps4)",
                "",
            ),
        ),
        (
            {"amd.com/gpu.vram": "lots"},
            "amd.com/gpu",
            1,
            ("exclusive", 1, None, "no memory label", ""),
        ),
        (
            {
                "gpu.intel.com/memory.max": "16000000000",
                "gpu.intel.com/gpu-numbers": "0",
                "gpu.intel.com/product": "Flex_170",
            },
            "gpu.intel.com/i915",
            1,
            ("exclusive", 1, 15258, "label gpu.intel.com/memory.max=16000000000 bytes", "Flex_170"),
        ),
        (  # two GPUs, the plugin's -shared-dev-num 4: 8 devices, 4 per GPU
            {"gpu.intel.com/memory.max": "34359738368", "gpu.intel.com/gpu-numbers": "0.1"},
            "gpu.intel.com/xe",
            8,
            (
                "time-slicing",
                4,
                16384,
                "label gpu.intel.com/memory.max=34359738368 bytes, 2 GPUs",
                "",
            ),
        ),
        (
            {"gpu.intel.com/memory.max": "0", "gpu.intel.com/gpu-numbers": "0"},
            "gpu.intel.com/i915",
            1,
            ("exclusive", 1, None, "no memory label", ""),
        ),
        ({}, "gpu.intel.com/i915", 2, ("exclusive", 1, None, "no memory label", "")),
    ],
)
def test_vendor_offers(
    labels: dict[str, str], resource: str, count: int, expected: tuple[Any, ...]
) -> None:
    assert offer_of(labels, resource, count) == expected


INJECTION = only("gpu-device-injection")
BYPASS = (
    "the container reaches GPUs the device plugin never allocated, so the scheduler can hand "
    "the same GPU to another Pod"
)
AMD_FIX = (
    "request GPUs through resources.limits (amd.com/gpu: 1) so the AMD device plugin "
    "allocates them (it mounts /dev/kfd and the GPU's /dev/dri render node itself)"
)
EITHER_FIX = (
    "request GPUs through resources.limits so the device plugin allocates them: "
    "amd.com/gpu: 1 for an AMD GPU, gpu.intel.com/i915: 1 (or gpu.intel.com/xe: 1) for an "
    "Intel GPU (/dev/dri alone does not say whose GPU the node has)"
)
NVIDIA_FIX = (
    "request GPUs through resources.limits (e.g. nvidia.com/gpu: 1) so the device plugin "
    "allocates them"
)


def host_paths(*paths: str) -> dict[str, Any]:
    volumes = [{"name": f"v{i}", "hostPath": {"path": p}} for i, p in enumerate(paths)]
    mounts = [{"name": f"v{i}", "mountPath": f"/m{i}"} for i in range(len(paths))]
    return pod(container("main", volumeMounts=mounts), volumes=volumes)


def exposes(index: int, path: str, why: str, fix: str) -> str:
    return (
        f'hostPath volume "v{index}" (spec.volumes[{index}].hostPath.path) exposes host path '
        f'"{path}", {why}, mounted by container "main": {BYPASS}. Remove the hostPath volume '
        f"and {fix}."
    )


@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        (("/dev/kfd",), [exposes(0, "/dev/kfd", "a GPU device node", AMD_FIX)]),
        (  # a ROCm pod mounts both: /dev/dri is AMD's then
            ("/dev/kfd", "/dev/dri"),
            [
                exposes(0, "/dev/kfd", "a GPU device node", AMD_FIX),
                exposes(1, "/dev/dri", "GPU device path /dev/dri", AMD_FIX),
            ],
        ),
        (
            ("/dev/dri/renderD128",),
            [exposes(0, "/dev/dri/renderD128", "inside GPU device directory /dev/dri", EITHER_FIX)],
        ),
        (("/dev/nvidia0",), [exposes(0, "/dev/nvidia0", "a GPU device node", NVIDIA_FIX)]),
    ],
)
def test_hostpath_fixes_name_the_vendor(paths: tuple[str, ...], expected: list[str]) -> None:
    assert messages(run(INJECTION, host_paths(*paths))) == expected


TPU_NODE = node(
    "tpu-0",
    labels={"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice"},
    allocatable={"google.com/tpu": "4"},
)
WITH_TPU = Inventory.from_nodes([*cluster_nodes(), TPU_NODE])
PRIVILEGED = container("main", securityContext={"privileged": True}, limits={"google.com/tpu": 4})
ON_TPU = {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice"}
NOT_GPU = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "cloud.google.com/gke-tpu-accelerator", "operator": "Exists"}
                    ]
                }
            ]
        }
    }
}


@pytest.mark.parametrize(
    ("obj", "inventory", "expected"),
    [
        # Today's TPU-only match proves nothing: an autoscaler may add a GPU node with the
        # label (tests/checks/test_host_access.py: the cluster profile's GPU-node facts).
        (pod(PRIVILEGED, nodeSelector=ON_TPU), WITH_TPU, ["privileged"]),
        (pod(PRIVILEGED, affinity=NOT_GPU), WITH_TPU, ["privileged"]),
        (pod(PRIVILEGED, nodeSelector=ON_TPU), Inventory.unknown(), ["privileged"]),  # no proof
        (pod(PRIVILEGED), WITH_TPU, ["privileged"]),  # the untainted GPU nodes can take it
        # A node with GPUs whose device plugin advertises none yet still has them.
        (
            pod(PRIVILEGED, nodeSelector={"pool": "new"}),
            Inventory.from_nodes(
                [node("g", labels={"pool": "new", "nvidia.com/gpu.present": "true"})]
            ),
            ["privileged"],
        ),
    ],
)
def test_privileged_counts_only_where_a_gpu_node_can_take_it(
    obj: dict[str, Any], inventory: Inventory, expected: list[str]
) -> None:
    assert rules(run(INJECTION, obj, inventory)) == expected
