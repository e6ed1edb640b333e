"""gpu-device-injection through the engine: every way to reach GPUs without the plugin."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.builders import (
    cluster,
    container,
    gpu,
    messages,
    only,
    pod,
    policy_file,
    rules,
    run,
    shipped,
    template_of,
)
from webhook.core.engine.evaluation import Subject, evaluate
from webhook.core.supply.inventory import Inventory

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
            "/dev/nvidiactl, /dev/nvidia-uvm and 12 more)",
        ),
        (
            "/dev",
            'exposes host path "/dev", a parent of GPU device paths (/dev/nvidia[0-9]*, '
            "/dev/nvidiactl, /dev/nvidia-uvm and 12 more)",
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
        "/var/log",
        "/devices",
        "/run/nvidia/driver/usr/lib64",  # the containerised driver's libraries
        "/var/lib/kubelet/pods",
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
        # The toolkit matches the cleaned mount destination by prefix, with no separator
        # (cuda_image.go requestsFromMounts): "devicesall" asks for "all", "-x" for "-x".
        ("/var/run/nvidia-container-devicesall", "/var/run/nvidia-container-devicesall"),
        ("/var/run/nvidia-container-devices-x", "/var/run/nvidia-container-devices-x"),
        ("/var/run/nvidia-container-devices..all", "/var/run/nvidia-container-devices..all"),
        # Not the path the toolkit reads: /run is /var/run on the node, not in the spec.
        ("/run/nvidia-container-devices/all", None),
        ("/var/run/nvidia-container-device", None),
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
        # A zero count asks the device plugin for nothing: still no GPU request.
        ({"name": NVD, "value": "all"}, {"nvidia.com/gpu": 0}, "containers", "requests no GPU"),
        # Beside a GPU request the variable overrides the plugin's own list.
        ({"name": NVD, "value": "all"}, {"nvidia.com/gpu": 1}, "containers", "beside its"),
        ({"name": NVD, "value": "GPU-3f0a"}, {"nvidia.com/gpu": 1}, "containers", "beside its"),
        ({"name": NVD, "value": "all"}, {"nvidia.com/mig-1g.10gb": 1}, "containers", "beside"),
        ({"name": NVD, "value": "all"}, {"nvidia.com/gpu.shared": 1}, "containers", "beside"),
        # Safe values: nothing to report, with a GPU request or without.
        ({"name": NVD, "value": "none"}, None, "containers", None),
        ({"name": NVD, "value": "void"}, None, "containers", None),
        ({"name": NVD, "value": "VOID"}, None, "containers", None),
        ({"name": NVD, "value": ""}, None, "containers", None),
        ({"name": NVD}, None, "containers", None),
        ({"name": NVD, "value": "void"}, {"nvidia.com/gpu": 1}, "containers", None),
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
        # SYS_ADMIN confined by seccomp (tests/checks/test_host_access.py: unconfined)
        (
            "containers",
            {"capabilities": {"add": ["SYS_ADMIN"]}, "seccompProfile": {"type": "RuntimeDefault"}},
            None,
        ),
        ("containers", {"capabilities": {"add": ["NET_ADMIN", "IPC_LOCK", "SYS_PTRACE"]}}, None),
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


# --- Aliases of device nodes, and the paths that stay allowed ----------------------------

BYPASS = (
    "the container reaches GPUs the device plugin never allocated, so the scheduler can hand "
    "the same GPU to another Pod"
)
HOST_ROOT = "the host's root filesystem as a host process sees it, GPU device nodes included"


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/dev/char/195:0", 'host path "/dev/char/195:0", a GPU device node,'),
        ("/dev/char/195:255", 'host path "/dev/char/195:255", a GPU device node,'),
        ("/dev/char", 'host path "/dev/char", GPU device path /dev/char,'),
        ("/dev/char/", 'host path "/dev/char" (normalised from "/dev/char/"), GPU device path'),
        ("/dev/char/508:0", '"/dev/char/508:0", inside GPU device directory /dev/char,'),
        ("/proc/1/root", f'host path "/proc/1/root", a path through /proc/1/root, {HOST_ROOT},'),
        ("/proc/1/root/dev/nvidia0", '"/proc/1/root/dev/nvidia0", a path through /proc/1/root,'),
        ("/proc/4242/root/", '"/proc/4242/root" (normalised from "/proc/4242/root/"), a path'),
        ("/proc/self/root", f'"/proc/self/root", a path through /proc/self/root, {HOST_ROOT},'),
        ("/proc/thread-self/root", "a path through /proc/thread-self/root, the host's root"),
        ("//proc/./1/root/dev", '"/proc/1/root/dev" (normalised from "//proc/./1/root/dev")'),
        ("/proc/1/task/1/root", "a path through /proc/1/task/1/root, the host's root"),
        ("/proc/1/cwd", "a path through /proc/1/cwd, a host process's working directory, which"),
        ("/proc/77/fd/3", "a path through /proc/77/fd/3, a file a host process holds open"),
        ("/proc/77/map_files/7f00-7f01", "a file a host process has mapped, which can be a GPU"),
    ],
)
def test_hostpath_aliases_of_device_nodes(path: str, why: str) -> None:
    decision = run(POLICY, host_path_pod(path))
    assert rules(decision) == ["hostpath-device"]
    assert why in decision.findings[0].message


def test_host_root_message_in_full() -> None:
    (message,) = messages(run(POLICY, host_path_pod("/proc/1/root/dev/nvidia0")))
    assert message == (
        'hostPath volume "dev" (spec.volumes[0].hostPath.path) exposes host path '
        '"/proc/1/root/dev/nvidia0", a path through /proc/1/root, the host\'s root filesystem '
        'as a host process sees it, GPU device nodes included, mounted by container "main": '
        f"{BYPASS}. Remove the hostPath volume and {FIX}."
    )


@pytest.mark.parametrize(
    "path",
    [
        "/usr/lib/x86_64-linux-gnu",  # driver libraries: no device nodes
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "/dev/char0",
        # A host /proc (node exporters): lookups through /proc/<pid>/root inside it are the
        # container's own, which the kernel checks (docs/policies.md).
        "/proc/1",
        "/proc/self",
        "/proc/1/ns/net",
        "/proc/1/status",
        "/proc/1/rootfs",
        "/proc/rootfs/1/root",
        "/proc/" + "9" * 11 + "/root",  # no pid has 11 digits (the limit is 2**22)
    ],
)
def test_more_hostpaths_that_reach_no_gpu(path: str) -> None:
    assert rules(run(POLICY, host_path_pod(path))) == []


@pytest.mark.parametrize(
    ("host", "field", "sub", "found"),
    [
        ("/proc", "subPath", "driver/nvidia", '"/proc/driver/nvidia", GPU device path'),
        ("/opt", "subPath", "../dev/nvidia0", '"/dev/nvidia0", a GPU device node'),
        ("/proc", "subPathExpr", "driver/nvidia/gpus", "inside GPU device directory"),
        ("/proc", "subPathExpr", "$(POD_NAME)", None),  # no such variable: no mount at all
        ("/proc", "subPath", "meminfo", None),
    ],
)
def test_hostpath_sub_paths(host: str, field: str, sub: str, found: str | None) -> None:
    mount = {"name": "host", "mountPath": "/host", field: sub}
    obj = pod(
        container("main", volumeMounts=[mount]),
        volumes=[{"name": "host", "hostPath": {"path": host}}],
    )
    decision = run(POLICY, obj)
    if found is None:
        assert rules(decision) == []
        return
    assert rules(decision) == ["hostpath-device"]
    assert decision.findings[0].path == ("spec", "containers", 0, "volumeMounts", 0, field)
    assert found in decision.findings[0].message


def test_sub_path_message_in_full() -> None:
    mount = {"name": "host", "mountPath": "/host", "subPath": "driver/nvidia"}
    obj = pod(
        container("main", volumeMounts=[mount]),
        volumes=[{"name": "host", "hostPath": {"path": "/proc"}}],
    )
    (message,) = messages(run(POLICY, obj))
    assert message == (
        'container "main" mounts hostPath volume "host" (host path "/proc") with subPath '
        '"driver/nvidia" (spec.containers[0].volumeMounts[0].subPath), which is host path '
        f'"/proc/driver/nvidia", GPU device path /proc/driver/nvidia: {BYPASS}. Remove the '
        f"subPath (or the volume) and {FIX}."
    )


def test_a_huge_host_path_is_judged_and_shown_short() -> None:
    # 1 MB of slashes still normalises to /dev/nvidia0; the message stays one short line.
    decision = run(POLICY, host_path_pod("/" * 1_000_000 + "dev/nvidia0"))
    (message,) = messages(decision)
    assert 'exposes host path "/dev/nvidia0" (normalised from "////' in message
    assert len(message) < 700


# --- Device-list variables beside a GPU request ------------------------------------------


def test_env_beside_a_gpu_request_message_in_full() -> None:
    obj = pod(container("main", limits={"nvidia.com/gpu": 1}, env=[{"name": NVD, "value": "all"}]))
    (message,) = messages(run(POLICY, obj))
    assert message == (
        f'container "main" sets {NVD}="all" (spec.containers[0].env[0]) beside its '
        "nvidia.com/gpu request: the device plugin passes the GPUs it allocated in "
        f"{NVD} (its default deviceListStrategy, envvar), and a value set in the pod "
        "overrides them, so the container reaches GPUs the scheduler never gave it. Remove "
        "the variable and let the device plugin choose the GPUs."
    )


def test_zero_gpus_with_visible_devices_all_message_in_full() -> None:
    obj = pod(container("main", limits={"nvidia.com/gpu": 0}, env=[{"name": NVD, "value": "all"}]))
    (message,) = messages(run(POLICY, obj))
    assert message == (
        f'container "main" sets {NVD}="all" (spec.containers[0].env[0]) but requests no GPU: '
        "the NVIDIA container runtime would give it GPUs outside the device plugin's "
        f'accounting. Remove the variable (or set it to "void"), and {FIX}.'
    )


def test_another_device_list_variable_beside_a_gpu_request() -> None:
    env = [{"name": "NVIDIA_IMEX_CHANNELS", "value": "0"}]
    (message,) = messages(
        run(POLICY, pod(container("main", limits={"nvidia.com/gpu": 1}, env=env)))
    )
    assert message.startswith(
        'container "main" sets NVIDIA_IMEX_CHANNELS="0" (spec.containers[0].env[0]) beside its '
        "nvidia.com/gpu request: the NVIDIA container runtime adds the devices it names to "
        "those the device plugin allocated,"
    )


# --- envFrom: what admission cannot see is a warning --------------------------------------

ALL_NAMES = (
    "NVIDIA_VISIBLE_DEVICES, NVIDIA_MIG_CONFIG_DEVICES, NVIDIA_MIG_MONITOR_DEVICES, "
    "NVIDIA_IMEX_CHANNELS, AMD_VISIBLE_DEVICES or DOCKER_RESOURCE_*"
)
NVIDIA_NAMES = (
    "NVIDIA_VISIBLE_DEVICES, NVIDIA_MIG_CONFIG_DEVICES, NVIDIA_MIG_MONITOR_DEVICES or "
    "NVIDIA_IMEX_CHANNELS"
)


@pytest.mark.parametrize(
    ("source", "env", "names"),
    [
        ({"configMapRef": {"name": "settings"}}, [], ALL_NAMES),
        ({"secretRef": {"name": "creds"}}, [], ALL_NAMES),
        ({"configMapRef": {"name": "s"}, "prefix": "NVIDIA_"}, [], NVIDIA_NAMES),
        (
            {"configMapRef": {"name": "s"}, "prefix": "NVIDIA_MIG_"},
            [],
            "NVIDIA_MIG_CONFIG_DEVICES or NVIDIA_MIG_MONITOR_DEVICES",
        ),
        ({"configMapRef": {"name": "s"}, "prefix": "N"}, [], NVIDIA_NAMES),
        # env wins over envFrom: a name the container pins itself is closed.
        (
            {"configMapRef": {"name": "s"}},
            [{"name": NVD, "value": "void"}],
            "NVIDIA_MIG_CONFIG_DEVICES, NVIDIA_MIG_MONITOR_DEVICES, NVIDIA_IMEX_CHANNELS, "
            "AMD_VISIBLE_DEVICES or DOCKER_RESOURCE_*",
        ),
        # Prefixes that cannot form any of the names: no grant at all.
        ({"configMapRef": {"name": "s"}, "prefix": "APP_"}, [], None),
        ({"configMapRef": {"name": "s"}, "prefix": NVD}, [], None),  # keys are never empty
        (
            {"configMapRef": {"name": "s"}, "prefix": "NVIDIA_MIG_"},
            [
                {"name": "NVIDIA_MIG_CONFIG_DEVICES", "value": "void"},
                {"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "none"},
            ],
            None,
        ),
    ],
)
def test_env_from(source: dict[str, Any], env: list[Any], names: str | None) -> None:
    decision = run(POLICY, pod(container("main", envFrom=[source], env=env)))
    if names is None:
        assert rules(decision) == []
        return
    assert [(f.rule, f.action) for f in decision.findings] == [("visible-devices-env-from", "warn")]
    assert f"which may set {names}: " in decision.findings[0].message


def test_env_from_message_in_full() -> None:
    decision = run(POLICY, pod(container("main", envFrom=[{"configMapRef": {"name": "settings"}}])))
    (finding,) = decision.findings
    assert (finding.action, finding.path) == (
        "warn",
        ("spec", "containers", 0, "envFrom", 0, "configMapRef"),
    )
    assert finding.message == (
        'container "main" takes variables from ConfigMap "settings" '
        f"(spec.containers[0].envFrom[0].configMapRef), which may set {ALL_NAMES}: what the "
        "ConfigMap holds is not known at admission, and a device list there gives the container "
        f'GPUs outside the device plugin\'s accounting. Set {NVD} to "void" in its env (env '
        "wins over envFrom), or give envFrom a prefix that cannot form these names (e.g. APP_)."
    )
    assert not decision.denied


def test_env_from_beside_a_gpu_request_message_in_full() -> None:
    c = container(
        "main",
        limits={"nvidia.com/gpu": 1},
        envFrom=[{"secretRef": {"name": "creds"}, "prefix": "NVIDIA_"}],
    )
    (message,) = messages(run(POLICY, pod(c)))
    assert message == (
        'container "main" takes variables from Secret "creds" with prefix "NVIDIA_" '
        f"(spec.containers[0].envFrom[0].secretRef), which may set {NVIDIA_NAMES}: what the "
        "Secret holds is not known at admission, and a device list there overrides the GPUs "
        "the device plugin allocated. Give envFrom a prefix that cannot form these names (e.g. "
        "APP_), or take only the keys the container needs with env valueFrom."
    )


# --- Device-injecting annotations ---------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "rule", "targets"),
    [
        ("devices.gke.io/container.main", "device-annotation", 'to container "main",'),
        ("devices.gke.io/pod", "device-annotation", "to every container of the pod,"),
        ("devices.gke.io", "device-annotation", "to every container of the pod,"),
        ("devices.noderesource.dev/container.main", "device-annotation", 'container "main",'),
        ("devices.nri.io/container.main", "device-annotation", 'to container "main",'),
        ("mounts.noderesource.dev/pod", "device-annotation", "to every container of the pod,"),
        ("mounts.nri.io/container.main", "device-annotation", 'to container "main",'),
        ("cdi-devices.noderesource.dev/container.main", "cdi-annotation", 'into container "main"'),
        ("cdi-devices.nri.io/pod", "cdi-annotation", "inject CDI devices without"),
        ("nvidia.cdi.k8s.io/container.main", "cdi-annotation", 'into container "main" without'),
        ("cdi.k8s.io/nvidia-gpus", "cdi-annotation", "inject CDI devices without"),
        # Look-alikes: another domain, a longer one, a family the policy does not list.
        ("nvidia.cdi.k8s.io.example/x", None, None),
        ("example.com/devices.gke.io", None, None),
        ("network-devices.noderesource.dev/container.main", None, None),
        ("sysctl.noderesource.dev/container.main", None, None),
    ],
)
def test_device_annotations(key: str, rule: str | None, targets: str | None) -> None:
    decision = run(POLICY, pod(container("main"), annotations={key: "- path: /dev/nvidia0"}))
    if rule is None:
        assert rules(decision) == []
        return
    assert rules(decision) == [rule]
    assert decision.findings[0].path == ("metadata", "annotations", key)
    assert targets is not None and targets in decision.findings[0].message


def test_gke_annotation_message_in_full() -> None:
    obj = pod(
        container("main"),
        container("tcpxo-daemon"),
        annotations={"devices.gke.io/container.tcpxo-daemon": "- path: /dev/nvidia0\n"},
    )
    (message,) = messages(run(POLICY, obj))
    assert message == (
        'annotation "devices.gke.io/container.tcpxo-daemon" '
        '(metadata.annotations["devices.gke.io/container.tcpxo-daemon"]) asks an NRI device '
        "injector on the node to add the host devices or mounts it lists to container "
        '"tcpxo-daemon", outside the device plugin\'s allocation. Remove the annotation and '
        f"{FIX}."
    )


def test_an_annotation_for_a_container_the_pod_lacks() -> None:
    obj = pod(container("main"), annotations={"devices.noderesource.dev/container.dbg": "x"})
    (message,) = messages(run(POLICY, obj))
    assert 'to container "dbg", which the pod does not have yet (an ephemeral container ' in (
        message
    )
    assert "kubectl debug adds under that name would get them), outside" in message


@pytest.mark.parametrize(
    ("prefix", "error"),
    [
        ("example.com/gpu-", "'example.com/gpu-' is not an annotation key prefix"),
        ("/", "'/' is not an annotation key prefix"),
    ],
)
def test_annotation_prefixes_are_key_prefixes(tmp_path: Path, prefix: str, error: str) -> None:
    from webhook.errors import PolicyError

    with pytest.raises(PolicyError, match=re.escape(error)) as raised:
        policy_file(tmp_path, "bad", POLICY_HEAD + f"    deviceAnnotationPrefixes: ['{prefix}']\n")
    # The field and its line, as for any other parameter's error (the Params' own rule
    # runs after pydantic's: webhook.core.engine.check.ParamError).
    line = POLICY_HEAD.count("\n") + 1
    assert f"line {line}, field spec.parameters.deviceAnnotationPrefixes: " in str(raised.value)
    assert str(raised.value).endswith(f"(got ['{prefix}'])")


# --- Privileged containers of every kind, and the controls ------------------------------


def test_a_privileged_sidecar_is_denied() -> None:
    sidecar = container("proxy", restartPolicy="Always", securityContext={"privileged": True})
    decision = run(POLICY, pod(container("app"), initContainers=[sidecar]))
    assert rules(decision) == ["privileged"]
    assert decision.findings[0].path == (
        "spec",
        "initContainers",
        0,
        "securityContext",
        "privileged",
    )


def test_a_labelled_mig_pod_passes_every_shipped_policy() -> None:
    labels = {
        "gpu-admission.io/peak-memory": "8Gi",
        "gpu-admission.io/slo-class": "latency-sensitive",
    }
    obj = pod(
        container(
            "infer",
            limits={"nvidia.com/mig-1g.10gb": 1},
            env=[{"name": NVD, "value": "void"}, {"name": "NCCL_DEBUG", "value": "INFO"}],
            volumeMounts=[
                {"name": "shm", "mountPath": "/dev/shm"},
                {"name": "libs", "mountPath": "/usr/lib/x86_64-linux-gnu", "readOnly": True},
                {"name": "ib", "mountPath": "/dev/infiniband"},
            ],
        ),
        labels=labels,
        volumes=[
            {"name": "shm", "hostPath": {"path": "/dev/shm"}},
            {"name": "libs", "hostPath": {"path": "/usr/lib/x86_64-linux-gnu"}},
            {"name": "ib", "hostPath": {"path": "/dev/infiniband"}},
        ],
    )
    assert run(shipped(), obj, cluster()).findings == ()
