"""gpu-device-injection through the engine: every way to reach GPUs without the plugin."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from builders import container, gpu, messages, only, pod, policy_file, rules, run, template_of

from webhook.core.engine import Subject, evaluate
from webhook.core.inventory import Inventory

POLICY = only("gpu-device-injection")
FIX = (
    "request GPUs through resources.limits (e.g. nvidia.com/gpu: 1) so the device plugin "
    "allocates them"
)


def host_path_pod(path: str, *, mounted_by: str = "containers") -> dict[str, Any]:
    mount = {"volumeMounts": [{"name": "dev", "mountPath": "/host"}]}
    spec: dict[str, Any] = {"volumes": [{"name": "dev", "hostPath": {"path": path}}]}
    if mounted_by == "containers":
        return pod(container("main", **mount), **spec)
    if mounted_by == "none":
        return pod(container("main"), **spec)
    return pod(container("main"), **{mounted_by: [container("extra", **mount)]}, **spec)


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/dev/nvidia0", 'exposes host path "/dev/nvidia0", a GPU device node'),
        ("/dev/nvidia15", 'exposes host path "/dev/nvidia15", a GPU device node'),
        ("/dev/nvidiactl", 'exposes host path "/dev/nvidiactl", a GPU device node'),
        ("/dev/nvidia-uvm", 'exposes host path "/dev/nvidia-uvm", a GPU device node'),
        ("/dev/nvidia-uvm-tools", '"/dev/nvidia-uvm-tools", a GPU device node'),
        ("/dev/nvidia-modeset", '"/dev/nvidia-modeset", a GPU device node'),
        ("/dev/nvidia-nvswitch3", '"/dev/nvidia-nvswitch3", a GPU device node'),
        ("/dev/nvidia-fs0", '"/dev/nvidia-fs0", a GPU device node'),
        ("/dev/kfd", 'exposes host path "/dev/kfd", a GPU device node'),
        # Normalisation: doubled slashes, ".", ".." and a trailing slash.
        ("//dev/./nvidia0/", 'host path "/dev/nvidia0" (normalised from "//dev/./nvidia0/")'),
        ("/dev/../dev/nvidia0", 'host path "/dev/nvidia0" (normalised from "/dev/../dev/nvidia0")'),
        ("/../../dev/nvidiactl", '"/dev/nvidiactl" (normalised from "/../../dev/nvidiactl")'),
        ("dev/nvidia0", 'host path "/dev/nvidia0" (normalised from "dev/nvidia0")'),
        # Directories of device nodes and everything inside them.
        ("/dev/dri", 'exposes host path "/dev/dri", GPU device path /dev/dri'),
        ("/dev/dri/card0", '"/dev/dri/card0", inside GPU device directory /dev/dri'),
        ("/dev/dri/renderD128", '"/dev/dri/renderD128", inside GPU device directory /dev/dri'),
        ("/dev/nvidia-caps", '"/dev/nvidia-caps", GPU device path /dev/nvidia-caps'),
        ("/dev/nvidia-caps/nvidia-cap1", "inside GPU device directory /dev/nvidia-caps,"),
        (
            "/dev/nvidia-caps-imex-channels/channel0",
            "inside GPU device directory /dev/nvidia-caps-imex-channels,",
        ),
        ("/proc/driver/nvidia", '"/proc/driver/nvidia", GPU device path /proc/driver/nvidia'),
        ("/proc/driver/nvidia/gpus", "inside GPU device directory /proc/driver/nvidia"),
        # Parents of device nodes.
        (
            "/",
            'exposes host path "/", a parent of GPU device paths (/dev/nvidia[0-9]*, '
            "/dev/nvidiactl, /dev/nvidia-uvm and 8 more)",
        ),
        (
            "/dev",
            'exposes host path "/dev", a parent of GPU device paths (/dev/nvidia[0-9]*, '
            "/dev/nvidiactl, /dev/nvidia-uvm and 8 more)",
        ),
        ("//dev/", 'host path "/dev" (normalised from "//dev/"), a parent of GPU device paths'),
    ],
)
def test_hostpath_devices(path: str, why: str) -> None:
    decision = run(POLICY, host_path_pod(path))
    assert rules(decision) == ["hostpath-device"]
    assert why in decision.findings[0].message
    assert decision.findings[0].path == ("spec", "volumes", 0, "hostPath", "path")


@pytest.mark.parametrize(
    "path",
    [
        "/dev/null",
        "/dev/shm",
        "/dev/infiniband",
        "/dev/nvidiafoo",  # not a device name NVIDIA uses
        "/proc",  # host /proc holds driver information, no device nodes
        "/proc/driver",
        "/sys",
        "/var/lib/kubelet/device-plugins",
        "/var/log",
        "/devices",
        "/run/nvidia/driver",
    ],
)
def test_hostpaths_that_reach_no_gpu(path: str) -> None:
    assert rules(run(POLICY, host_path_pod(path))) == []


def test_hostpath_message_in_full() -> None:
    (message,) = messages(run(POLICY, host_path_pod("/dev/nvidia0")))
    assert message == (
        'hostPath volume "dev" (spec.volumes[0].hostPath.path) exposes host path '
        '"/dev/nvidia0", a GPU device node, mounted by container "main": the container '
        "reaches GPUs the device plugin never allocated, so the scheduler can hand the same "
        f"GPU to another Pod. Remove the hostPath volume and {FIX}."
    )


@pytest.mark.parametrize(
    ("mounted_by", "users"),
    [
        ("containers", 'mounted by container "main"'),
        ("initContainers", 'mounted by init container "extra"'),
        ("ephemeralContainers", 'mounted by ephemeral container "extra"'),
        (
            "none",
            "not mounted yet (any container added later, e.g. by kubectl debug, can mount it)",
        ),
    ],
)
def test_hostpath_names_who_mounts_it(mounted_by: str, users: str) -> None:
    (message,) = messages(run(POLICY, host_path_pod("/dev/nvidia0", mounted_by=mounted_by)))
    assert f"a GPU device node, {users}: " in message


def mount_pod(mount_path: str) -> dict[str, Any]:
    mounts = [{"name": "devs", "mountPath": mount_path}]
    volumes = [{"name": "devs", "hostPath": {"path": "/dev/null"}}]
    return pod(container("main", volumeMounts=mounts), volumes=volumes)


@pytest.mark.parametrize(
    ("mount_path", "found"),
    [
        ("/var/run/nvidia-container-devices/all", "/var/run/nvidia-container-devices/all"),
        ("/var/run/nvidia-container-devices", "/var/run/nvidia-container-devices"),
        ("/var/run/nvidia-container-devices/GPU-8a3e2f4c", "/var/run/nvidia-container-devices/GPU"),
        ("//var/run/./nvidia-container-devices/0/", "/var/run/nvidia-container-devices/0"),
        ("/var/run/nvidia-container-devices-x", None),
        ("/var/run/secrets/nvidia", None),
    ],
)
def test_device_list_volume_mount(mount_path: str, found: str | None) -> None:
    decision = run(POLICY, mount_pod(mount_path))
    if found is None:
        assert rules(decision) == []
        return
    assert rules(decision) == ["device-list-volume-mount"]
    assert decision.findings[0].path == ("spec", "containers", 0, "volumeMounts", 0, "mountPath")
    assert decision.findings[0].message.startswith(
        f'container "main" mounts volume "devs" at {found}'
    )


def test_device_list_message_in_full() -> None:
    (message,) = messages(run(POLICY, mount_pod("/var/run/nvidia-container-devices/all")))
    assert message == (
        'container "main" mounts volume "devs" at /var/run/nvidia-container-devices/all '
        "(spec.containers[0].volumeMounts[0].mountPath): the NVIDIA container toolkit reads "
        "/var/run/nvidia-container-devices as a list of GPUs to inject, bypassing the device "
        f"plugin. Remove the mount and {FIX}."
    )


def env_pod(
    env: dict[str, Any], *, limits: dict[str, Any] | None = None, field: str = "containers"
) -> dict[str, Any]:
    c = container("main", limits=limits, env=[{"name": "LOG_LEVEL", "value": "info"}, env])
    if field == "containers":
        return pod(c)
    return pod(container("app"), **{field: [c]})


NVD = "NVIDIA_VISIBLE_DEVICES"


@pytest.mark.parametrize(
    ("env", "limits", "field", "what"),
    [
        ({"name": NVD, "value": "all"}, None, "containers", f'sets {NVD}="all"'),
        ({"name": NVD, "value": "0,1"}, None, "containers", f'sets {NVD}="0,1"'),
        ({"name": NVD, "value": "GPU-3f0a"}, None, "containers", f'sets {NVD}="GPU-3f0a"'),
        ({"name": NVD, "value": 0}, None, "containers", f'sets {NVD}="0"'),
        ({"name": NVD, "value": "all"}, None, "initContainers", f'sets {NVD}="all"'),
        ({"name": NVD, "value": "all"}, None, "ephemeralContainers", f'sets {NVD}="all"'),
        (
            {"name": NVD, "valueFrom": {"configMapKeyRef": {"name": "gpus", "key": "list"}}},
            None,
            "containers",
            f"sets {NVD} from valueFrom, which cannot be proven safe at admission",
        ),
        ({"name": "NVIDIA_MIG_CONFIG_DEVICES", "value": "all"}, None, "containers", "MIG_CONFIG"),
        ({"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"}, None, "containers", "MONITOR"),
        ({"name": "NVIDIA_IMEX_CHANNELS", "value": "0"}, None, "containers", "IMEX_CHANNELS"),
        # An AMD GPU request does not make an NVIDIA variable legitimate.
        ({"name": NVD, "value": "all"}, {"amd.com/gpu": 1}, "containers", f'sets {NVD}="all"'),
        # Safe values, and containers that request an NVIDIA GPU: nothing to report.
        ({"name": NVD, "value": "none"}, None, "containers", None),
        ({"name": NVD, "value": "void"}, None, "containers", None),
        ({"name": NVD, "value": "VOID"}, None, "containers", None),
        ({"name": NVD, "value": ""}, None, "containers", None),
        ({"name": NVD}, None, "containers", None),
        ({"name": NVD, "value": "all"}, {"nvidia.com/gpu": 1}, "containers", None),
        ({"name": NVD, "value": "all"}, {"nvidia.com/mig-1g.10gb": 1}, "containers", None),
        ({"name": NVD, "value": "all"}, {"nvidia.com/gpu.shared": 1}, "containers", None),
        ({"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"}, None, "containers", None),
        ({"name": "CUDA_VISIBLE_DEVICES", "value": "0"}, None, "containers", None),
    ],
)
def test_visible_devices_env(
    env: dict[str, Any], limits: dict[str, Any] | None, field: str, what: str | None
) -> None:
    decision = run(POLICY, env_pod(env, limits=limits, field=field))
    if what is None:
        assert rules(decision) == []
        return
    assert rules(decision) == ["visible-devices-env"]
    assert what in decision.findings[0].message
    assert decision.findings[0].path == ("spec", field, 0, "env", 1)


def test_env_message_in_full() -> None:
    (message,) = messages(
        run(POLICY, env_pod({"name": NVD, "value": "all"}, field="initContainers"))
    )
    assert message == (
        f'init container "main" sets {NVD}="all" (spec.initContainers[0].env[1]) but requests '
        "no GPU: the NVIDIA container runtime would give it GPUs outside the device plugin's "
        f'accounting. Remove the variable (or set it to "void"), and {FIX}.'
    )


def test_env_is_judged_per_container() -> None:
    # The GPU belongs to another container: this one still reaches every GPU on the node.
    obj = pod(gpu(name="trainer"), container("sidecar", env=[{"name": NVD, "value": "all"}]))
    decision = run(POLICY, obj)
    assert rules(decision) == ["visible-devices-env"]
    assert decision.findings[0].message.startswith(f'container "sidecar" sets {NVD}="all"')


@pytest.mark.parametrize(
    ("annotations", "found"),
    [
        ({"cdi.k8s.io/gpus": "nvidia.com/gpu=all"}, ["cdi.k8s.io/gpus"]),
        (
            {"nvidia.cdi.k8s.io/container.main": "nvidia.com/gpu=0"},
            ["nvidia.cdi.k8s.io/container.main"],
        ),
        (
            {"cdi.k8s.io/a": "x", "cdi.k8s.io/b": "y", "team": "ml"},
            ["cdi.k8s.io/a", "cdi.k8s.io/b"],
        ),
        ({"example.com/cdi.k8s.io": "x", "cdi.k8s.io.example/x": "y"}, []),
    ],
)
def test_cdi_annotations(annotations: dict[str, str], found: list[str]) -> None:
    decision = run(POLICY, pod(annotations=annotations))
    assert rules(decision) == ["cdi-annotation"] * len(found)
    assert [f.path for f in decision.findings] == [("metadata", "annotations", k) for k in found]


def test_cdi_annotation_on_a_template() -> None:
    template = template_of(pod(annotations={"cdi.k8s.io/gpus": "nvidia.com/gpu=all"}))
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": template}}
    (message,) = messages(run(POLICY, deployment))
    assert message == (
        'annotation "cdi.k8s.io/gpus" (spec.template.metadata.annotations["cdi.k8s.io/gpus"]) '
        "asks the container runtime to inject CDI devices without a device-plugin allocation. "
        f"Remove the annotation and {FIX}."
    )


@pytest.mark.parametrize(
    ("field", "security", "label"),
    [
        ("containers", {"privileged": True}, 'container "x"'),
        ("initContainers", {"privileged": True}, 'init container "x"'),
        ("ephemeralContainers", {"privileged": True}, 'ephemeral container "x"'),
        ("containers", {"privileged": False}, None),
        ("containers", {"capabilities": {"add": ["SYS_ADMIN"]}}, None),
    ],
)
def test_privileged(field: str, security: dict[str, Any], label: str | None) -> None:
    obj = pod(container("app"), **{field: [container("x", securityContext=security)]})
    if field == "containers":
        obj["spec"]["containers"] = [container("x", securityContext=security)]
    decision = run(POLICY, obj)
    if label is None:
        assert rules(decision) == []
        return
    assert rules(decision) == ["privileged"]
    assert decision.findings[0].message == (
        f"{label} is privileged (spec.{field}[0].securityContext.privileged): it sees every "
        "device in the host's /dev, all GPUs included, whatever it requests. Remove "
        f"privileged: true, add only the capabilities it needs, and {FIX}."
    )


POLICY_HEAD = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {name: custom-injection}
spec:
  enforcementAction: deny
  check: device-injection
  parameters:
"""


def test_parameters_change_what_is_found(tmp_path: Path) -> None:
    custom = policy_file(
        tmp_path,
        "custom",
        POLICY_HEAD + "    denyPrivileged: false\n"
        "    deviceDirectories: [/dev/vfio]\n"
        "    safeEnvValues: [none, void, '', all]\n"
        "    cdiAnnotationPrefixes: [example.com/]\n",
    )
    obj = pod(
        container("x", securityContext={"privileged": True}, env=[{"name": NVD, "value": "all"}]),
        annotations={"cdi.k8s.io/gpus": "nvidia.com/gpu=all", "example.com/devices": "x"},
        volumes=[{"name": "v", "hostPath": {"path": "/dev/vfio/12"}}],
    )
    decision = run(custom, obj)
    assert rules(decision) == ["hostpath-device", "cdi-annotation"]
    assert "inside GPU device directory /dev/vfio" in decision.findings[0].message
    assert "example.com/devices" in decision.findings[1].message


def test_one_pod_many_findings_in_rule_order() -> None:
    obj = pod(
        container(
            "x",
            securityContext={"privileged": True},
            env=[{"name": NVD, "value": "all"}],
            volumeMounts=[
                {"name": "dev", "mountPath": "/dev"},
                {"name": "dev", "mountPath": "/var/run/nvidia-container-devices/all"},
            ],
        ),
        annotations={"cdi.k8s.io/x": "nvidia.com/gpu=all"},
        volumes=[{"name": "dev", "hostPath": {"path": "/dev"}}],
    )
    decision = evaluate(POLICY, Subject(obj, "research"), Inventory.unknown())
    assert rules(decision) == [
        "hostpath-device",
        "device-list-volume-mount",
        "visible-devices-env",
        "cdi-annotation",
        "privileged",
    ]
    assert {f.policy for f in decision.findings} == {"gpu-device-injection"}
    assert {f.action for f in decision.findings} == {"deny"}


def test_user_values_are_made_safe_for_one_line() -> None:
    obj = env_pod({"name": NVD, "value": "all\n\x1b[31m" + "x" * 100})
    (message,) = messages(run(POLICY, obj))
    assert re.search(r'sets NVIDIA_VISIBLE_DEVICES="all\?\?\[31mx+…"', message)
    assert "\n" not in message
