"""gpu-device-injection as the runtimes decide: the kubelet's env, the NVIDIA and AMD
toolkits, CRI-O's devices annotation, HAMi's limiter and KAI's own env (docs/runtime-access.md).

Each mechanism is a table: Pods (regular, init and ephemeral containers) and controllers,
with the legitimate controls beside the ways in. The last test runs `check` as a process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.builders import container, messages, only, pod, rules, run, template_of
from tests.support.clirun import gpu_admission

POLICY = only("gpu-device-injection")
NVD = "NVIDIA_VISIBLE_DEVICES"
CM = {"configMapKeyRef": {"name": "gpus", "key": "list"}}
FIX = (
    "request GPUs through resources.limits (e.g. nvidia.com/gpu: 1) so the device plugin "
    "allocates them"
)


def e(name: str, value: Any = None, **more: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"name": name, **more}
    if value is not None:
        item["value"] = value
    return item


def in_field(c: dict[str, Any], field: str, **spec: Any) -> dict[str, Any]:
    if field == "containers":
        return pod(c, **spec)
    return pod(container("app"), **{field: [c]}, **spec)


def deployment(pod_obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"replicas": 2, "selector": {}, "template": template_of(pod_obj)},
    }


def job(pod_obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": template_of(pod_obj)},
    }


WRAP = {"pod": lambda o: o, "deployment": deployment, "job": job}
FIELDS = ("containers", "initContainers", "ephemeralContainers")


def judged(obj: dict[str, Any]) -> list[str]:
    return rules(run(POLICY, obj))


# --- the kubelet's env: later entry wins, env over envFrom, $(VAR) expanded -----------------


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize(
    ("env", "env_from", "found"),
    [
        ([e(NVD, "all"), e(NVD, "void")], [], []),  # the later entry wins: void
        ([e(NVD, "void"), e(NVD, "all")], [], ["visible-devices-env"]),
        ([e("X", "all"), e(NVD, "$(X)")], [], ["visible-devices-env"]),
        ([e("X", "void"), e(NVD, "$(X)")], [], []),
        ([e(NVD, "all,void")], [], []),  # void anywhere in the list: no device
        ([e(NVD, "none")], [], []),
        ([e("X", valueFrom=CM), e(NVD, "$(X)")], [], ["visible-devices-env"]),
        # The reference is unknowable; the source may still set the other names.
        (
            [e(NVD, "$(GPUS)")],
            [{"configMapRef": {"name": "c"}}],
            ["visible-devices-env", "visible-devices-env-from"],
        ),
        # env pins the name: the envFrom source cannot set it (but may set the others).
        ([e(NVD, "void")], [{"configMapRef": {"name": "c"}, "prefix": "NVIDIA_V"}], []),
        ([], [{"configMapRef": {"name": "c"}, "prefix": "NVIDIA_V"}], ["visible-devices-env-from"]),
    ],
)
def test_kubelet_env_rules(
    field: str, env: list[Any], env_from: list[Any], found: list[str]
) -> None:
    fields: dict[str, Any] = {"env": env} if env else {}
    if env_from:
        fields["envFrom"] = env_from
    for wrap in WRAP.values():
        if field == "ephemeralContainers" and wrap is not WRAP["pod"]:
            continue  # templates have no ephemeral containers
        assert judged(wrap(in_field(container("x", **fields), field))) == found


def test_expanded_value_message_in_full() -> None:
    obj = pod(container("main", env=[e("WANT", "all"), e(NVD, "$(WANT)")]))
    (message,) = messages(run(POLICY, obj))
    assert message == (
        f'container "main" sets {NVD}="$(WANT)", which the kubelet expands to "all" '
        "(spec.containers[0].env[1]) but requests no GPU: the NVIDIA container runtime would "
        "give it GPUs outside the device plugin's accounting. Remove the variable (or set it "
        f'to "void"), and {FIX}.'
    )


def test_unknowable_reference_message_in_full() -> None:
    obj = pod(container("main", env=[e(NVD, "$(LIST)")], envFrom=[{"secretRef": {"name": "s"}}]))
    found = run(POLICY, obj)
    # env pins NVD; the secret may still set the other device lists (a warning).
    assert rules(found) == ["visible-devices-env", "visible-devices-env-from"]
    assert found.findings[0].message.startswith(
        f'container "main" sets {NVD}="$(LIST)", which cannot be proven safe at admission '
        "($(LIST) comes from envFrom) (spec.containers[0].env[0]) but requests no GPU"
    )


# --- the device-list mount, matched by prefix without a separator ---------------------------


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize(
    ("mount_path", "found"),
    [
        ("/var/run/nvidia-container-devicesall", ["device-list-volume-mount"]),
        ("/var/run/nvidia-container-devices0", ["device-list-volume-mount"]),
        ("/var/run/nvidia-container-devices/cdi/nvidia.com/gpu/all", ["device-list-volume-mount"]),
        ("/var/run/nvidia-container-device", []),
        ("/run/nvidia-container-devices/all", []),
    ],
)
def test_device_list_mount_prefix(field: str, mount_path: str, found: list[str]) -> None:
    c = container("x", volumeMounts=[{"name": "null", "mountPath": mount_path}])
    obj = in_field(c, field, volumes=[{"name": "null", "hostPath": {"path": "/dev/null"}}])
    assert judged(obj) == found
    if field == "containers":
        assert judged(deployment(obj)) == found


# --- the NVIDIA toolkit: feature variables and the legacy image rule ------------------------


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize(
    ("env", "limits", "found"),
    [
        ([e("NVIDIA_GDS", "enabled")], {"nvidia.com/gpu": 1}, ["feature-devices-env"]),
        ([e("NVIDIA_MOFED", "enabled")], None, ["feature-devices-env"]),
        ([e("NVIDIA_GDRCOPY", "enabled")], {"nvidia.com/gpu": 1}, ["feature-devices-env"]),
        ([e("NVIDIA_NVSWITCH", "enabled")], {"nvidia.com/gpu": 1}, ["feature-devices-env"]),
        ([e("NVIDIA_NVSWITCH", valueFrom=CM)], None, ["feature-devices-env"]),
        ([e("NVIDIA_GDS", "enabled"), e("NVIDIA_GDS", "disabled")], None, []),
        ([e("NVIDIA_GDS", "Enabled")], None, []),  # exactly "enabled"
        # Legacy: CUDA_VERSION without NVIDIA_REQUIRE_CUDA, the device list left to the image.
        ([e("CUDA_VERSION", "12.4.1")], None, ["legacy-image-env"]),
        ([e("NVIDIA_REQUIRE_CUDA", "")], None, ["legacy-image-env"]),
        ([e("CUDA_VERSION", "12.4"), e("NVIDIA_REQUIRE_CUDA", "")], None, ["legacy-image-env"]),
        ([e("CUDA_VERSION", "12.4"), e("NVIDIA_REQUIRE_CUDA", "cuda>=12.4")], None, []),
        ([e("CUDA_VERSION", "12.4"), e(NVD, "void")], None, []),
        ([e("CUDA_VERSION", "12.4")], {"nvidia.com/gpu": 1}, []),  # the plugin sets the list
        ([e("CUDA_VERSION", "")], None, []),
        # Controls: driver capabilities and CUDA's own device order change no device.
        ([e("NVIDIA_DRIVER_CAPABILITIES", "compute,utility")], {"nvidia.com/gpu": 1}, []),
        ([e("NVIDIA_DRIVER_CAPABILITIES", "all")], None, []),
        ([e("CUDA_VISIBLE_DEVICES", "0")], None, []),
    ],
)
def test_toolkit_feature_and_legacy_env(
    field: str, env: list[Any], limits: dict[str, Any] | None, found: list[str]
) -> None:
    obj = in_field(container("x", env=env, limits=limits), field)
    assert judged(obj) == found
    if field == "initContainers":
        assert judged(job(obj)) == found


def test_feature_env_message_in_full() -> None:
    obj = pod(container("main", limits={"nvidia.com/gpu": 1}, env=[e("NVIDIA_GDS", "enabled")]))
    (message,) = messages(run(POLICY, obj))
    assert message == (
        'container "main" sets NVIDIA_GDS="enabled" (spec.containers[0].env[0]): the NVIDIA '
        "container toolkit injects the GPUDirect Storage devices /dev/nvidia-fs* into any "
        'container it gives a GPU when the value is "enabled", outside the device plugin\'s '
        "allocation. Remove the variable: where the platform offers the feature, its device "
        "plugin sets it for the containers it allocates."
    )


def test_legacy_env_message_in_full() -> None:
    obj = pod(container("main", env=[e("CUDA_VERSION", "12.4.1")]))
    (message,) = messages(run(POLICY, obj))
    assert message == (
        'container "main" sets CUDA_VERSION="12.4.1" (spec.containers[0].env[0]) and requests '
        "no GPU: it sets CUDA_VERSION without NVIDIA_REQUIRE_CUDA and leaves "
        "NVIDIA_VISIBLE_DEVICES to the image, and the NVIDIA container toolkit gives such a "
        '"legacy" CUDA image every GPU of the node. Remove the variable, or set '
        'NVIDIA_VISIBLE_DEVICES to "void".'
    )


# --- AMD's runtime: AMD_VISIBLE_DEVICES and DOCKER_RESOURCE_* -------------------------------


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize(
    ("env", "limits", "found"),
    [
        ([e("AMD_VISIBLE_DEVICES", "all")], None, ["visible-devices-env"]),
        ([e("AMD_VISIBLE_DEVICES", "0-3")], {"amd.com/gpu": 1}, ["visible-devices-env"]),
        ([e("DOCKER_RESOURCE_GPU", "0")], None, ["visible-devices-env"]),
        ([e("AMD_VISIBLE_DEVICES", "none")], None, []),
        ([e("AMD_VISIBLE_DEVICES", "void")], None, []),
        ([e("AMD_VISIBLE_DEVICES", "")], None, []),
        ([e("AMD_VISIBLE_DEVICES", "all"), e("AMD_VISIBLE_DEVICES", "none")], None, []),
        ([e("HIP_VISIBLE_DEVICES", "0")], {"amd.com/gpu": 1}, []),  # read by HIP, in-process
    ],
)
def test_amd_runtime_env(
    field: str, env: list[Any], limits: dict[str, Any] | None, found: list[str]
) -> None:
    obj = in_field(container("x", env=env, limits=limits), field)
    assert judged(obj) == found
    if field == "containers":
        assert judged(deployment(obj)) == found


def test_amd_beside_a_request_message() -> None:
    env = [e("AMD_VISIBLE_DEVICES", "all")]
    (message,) = messages(run(POLICY, pod(container("main", limits={"amd.com/gpu": 1}, env=env))))
    assert message == (
        'container "main" sets AMD_VISIBLE_DEVICES="all" (spec.containers[0].env[0]) beside its '
        "amd.com/gpu request: the AMD container runtime adds the devices it names to those the "
        "device plugin allocated, so the container reaches devices the scheduler never gave it. "
        "Remove the variable and let the device plugin choose the GPUs."
    )


# --- CRI-O's devices annotation: whole keys, no "/" -----------------------------------------


@pytest.mark.parametrize(
    ("key", "found"),
    [
        ("io.kubernetes.cri-o.Devices", ["device-annotation"]),
        ("devices.crio.io", ["device-annotation"]),
        ("io.kubernetes.cri-o.devices", []),  # keys are case-sensitive
        ("devices.crio.io.main", []),
    ],
)
@pytest.mark.parametrize("wrap", ["pod", "deployment", "job"])
def test_crio_devices_annotation(key: str, found: list[str], wrap: str) -> None:
    obj = pod(container("main"), annotations={key: "/dev/nvidia0:/dev/nvidia0:rwm"})
    assert judged(WRAP[wrap](obj)) == found


def test_crio_annotation_message_in_full() -> None:
    obj = pod(container("main"), annotations={"io.kubernetes.cri-o.Devices": "/dev/nvidia0"})
    (message,) = messages(run(POLICY, obj))
    assert message == (
        'annotation "io.kubernetes.cri-o.Devices" '
        '(metadata.annotations["io.kubernetes.cri-o.Devices"]) asks CRI-O to add the host '
        "devices it lists to every container of the pod (where the runtime handler allows the "
        f"annotation), outside the device plugin's allocation. Remove the annotation and {FIX}."
    )


# --- shares: HAMi-core's limits, and KAI's own env ------------------------------------------

HAMI = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000}
VOLCANO = {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 4000}


@pytest.mark.parametrize("field", ["containers", "initContainers"])
@pytest.mark.parametrize(
    ("env", "limits", "found"),
    [
        ([e("CUDA_DISABLE_CONTROL", "true")], HAMI, ["share-limit-env"]),
        ([e("CUDA_DISABLE_CONTROL", "1")], HAMI, ["share-limit-env"]),
        ([e("CUDA_DISABLE_CONTROL", "false")], HAMI, []),  # HAMi reads it with ParseBool
        ([e("CUDA_DISABLE_CONTROL", "yes")], HAMI, []),
        ([e("CUDA_DISABLE_CONTROL", "false")], VOLCANO, ["share-limit-env"]),  # any value
        ([e("CUDA_DEVICE_MEMORY_LIMIT_0", "80g")], HAMI, ["share-limit-env"]),
        ([e("CUDA_DEVICE_MEMORY_LIMIT", "80g")], VOLCANO, ["share-limit-env"]),
        ([e("CUDA_DEVICE_SM_LIMIT", "100")], HAMI, ["share-limit-env"]),
        ([e("CUDA_DEVICE_SM_LIMIT_0", "0")], HAMI, ["share-limit-env"]),
        ([e("CUDA_DEVICE_MEMORY_SHARED_CACHE", "/tmp/x")], HAMI, ["share-limit-env"]),
        ([e("GPU_CORE_UTILIZATION_POLICY", "disable")], HAMI, ["share-limit-env"]),
        ([e("GPU_CORE_UTILIZATION_POLICY", "force")], HAMI, []),
        ([e("LOG_LEVEL", "info")], HAMI, []),  # a HAMi pod without overrides
        # Not a share: a whole device of its own (HAMi gives it gpucores 100).
        ([e("CUDA_DEVICE_MEMORY_LIMIT_0", "80g")], {"nvidia.com/gpu": 1}, []),
    ],
)
def test_share_limit_escapes(
    field: str, env: list[Any], limits: dict[str, Any], found: list[str]
) -> None:
    obj = in_field(container("x", env=env, limits=limits), field)
    assert judged(obj) == found
    assert judged(deployment(obj)) == found


def test_share_limit_message_in_full() -> None:
    obj = pod(container("main", limits=HAMI, env=[e("CUDA_DISABLE_CONTROL", "true")]))
    (message,) = messages(run(POLICY, obj))
    assert message == (
        'container "main" sets CUDA_DISABLE_CONTROL="true" (spec.containers[0].env[0]) while '
        "it asks for part of a GPU (nvidia.com/gpumem: 4000, HAMi): the device plugin then "
        "leaves out /etc/ld.so.preload, so HAMi-core's limiter never loads and the container "
        "takes the whole GPU's memory and compute. Remove the variable and ask for the "
        "share's size through its resources."
    )


def kai_pod(configmap: str, *, index_name: str = "p-abc1234-shared-gpu") -> dict[str, Any]:
    """A KAI fraction pod as KAI's own webhook leaves it (gpu_sharing.go Mutate)."""
    env = [e(NVD, valueFrom={"configMapKeyRef": {"name": configmap, "key": NVD}})]
    env_from = [{"configMapRef": {"name": f"{index_name}-0-evar"}}]
    annotations = {"gpu-fraction": "0.5", "runai/shared-gpu-configmap": index_name}
    return pod(container("main", env=env, envFrom=env_from), annotations=annotations)


def test_kai_fraction_env_is_the_schedulers_own() -> None:
    assert judged(kai_pod("p-abc1234-shared-gpu-0")) == []
    # Another ConfigMap is not KAI's: the pod chooses its own device list.
    assert judged(kai_pod("mine")) == ["visible-devices-env"]


# --- `check` as a process ---------------------------------------------------------------------


def test_check_cli_reports_the_runtime_rules(tmp_path: Path) -> None:
    docs = [
        pod(container("main", env=[e("X", "all"), e(NVD, "$(X)")]), name="expanded"),
        pod(
            container(
                "main",
                volumeMounts=[{"name": "n", "mountPath": "/var/run/nvidia-container-devicesall"}],
            ),
            volumes=[{"name": "n", "hostPath": {"path": "/dev/null"}}],
            name="prefix",
        ),
        deployment(pod(container("main", env=[e("AMD_VISIBLE_DEVICES", "all")]))),
        pod(
            container("main"),
            annotations={"io.kubernetes.cri-o.Devices": "/dev/nvidia0"},
            name="crio",
        ),
        pod(
            container("main", limits=HAMI, env=[e("CUDA_DEVICE_MEMORY_LIMIT_0", "80g")]),
            name="hami",
        ),
        pod(container("main", env=[e("CUDA_VERSION", "12.4")]), name="legacy"),
        # Controls: nothing to report.
        pod(container("main", limits={"nvidia.com/gpu": 1}), name="gpu"),
        pod(container("main", env=[e(NVD, "void")]), name="cpu"),
        pod(container("main", limits=HAMI), name="share"),
    ]
    path = tmp_path / "pods.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    done = gpu_admission("check", "--output", "json", str(path))
    assert done.returncode == 1, done.stderr
    results = json.loads(done.stdout)["results"]
    found = {(r["name"], r["rule"]) for r in results if r["policy"] == "gpu-device-injection"}
    assert found == {
        ("expanded", "visible-devices-env"),
        ("prefix", "device-list-volume-mount"),
        ("d", "visible-devices-env"),
        ("crio", "device-annotation"),
        ("hami", "share-limit-env"),
        ("legacy", "legacy-image-env"),
    }


# --- upstream examples (tests/realworld/SOURCES.md) stay allowed; one override denies ------

REAL = ("hami/default_use.yaml", "hami/use_memory_fraction.yaml", "volcano-vgpu/vgpu-case02.yml")


@pytest.mark.parametrize("name", REAL)
def test_upstream_share_examples_and_their_escapes(name: str) -> None:
    import copy

    import yaml

    from tests.support.paths import TESTS

    docs = [d for d in yaml.safe_load_all((TESTS / "realworld" / name).read_text()) if d]
    for obj in docs:
        assert judged(obj) == [], name
        escaped = copy.deepcopy(obj)
        spec = escaped["spec"].get("template", {}).get("spec") or escaped["spec"]
        spec["containers"][0].setdefault("env", []).append(e("CUDA_DISABLE_CONTROL", "true"))
        assert judged(escaped) == ["share-limit-env"], name
