"""gpu-device-injection: ways a container reaches GPUs without the device plugin.

hostPath device nodes, the device-list volume mount, NVIDIA_* env vars without a GPU
request, CDI annotations, and privileged mode all hand a container GPUs the scheduler
never counted: two Pods then share one GPU without knowing, and health checks miss it.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from fnmatch import fnmatchcase
from functools import lru_cache

from webhook.core.check import Check, CheckParams, Rule, Violation
from webhook.core.inventory import Inventory
from webhook.core.paths import format_path
from webhook.core.text import listing, matches_any, shown
from webhook.core.workloads import ContainerRef, PodView, as_dict, as_list

FIX = (
    "request GPUs through resources.limits (e.g. nvidia.com/gpu: 1) so the device plugin "
    "allocates them"
)


class Params(CheckParams):
    device_paths: tuple[str, ...] = (
        "/dev/nvidia[0-9]*",
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
        "/dev/nvidia-modeset",
        "/dev/nvidia-nvswitch*",
        "/dev/nvidia-fs*",
        "/dev/kfd",
    )
    device_directories: tuple[str, ...] = (
        "/dev/nvidia-caps",
        "/dev/nvidia-caps-imex-channels",
        "/dev/dri",
        "/proc/driver/nvidia",
    )
    device_list_mount_dir: str = "/var/run/nvidia-container-devices"
    env_vars: tuple[str, ...] = (
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_MIG_CONFIG_DEVICES",
        "NVIDIA_MIG_MONITOR_DEVICES",
        "NVIDIA_IMEX_CHANNELS",
    )
    safe_env_values: tuple[str, ...] = ("none", "void", "")
    gpu_resources: tuple[str, ...] = ("nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*")
    cdi_annotation_prefixes: tuple[str, ...] = ("cdi.k8s.io/", "nvidia.cdi.k8s.io")
    deny_privileged: bool = True


@lru_cache(maxsize=1024)
def normalise(path: str) -> str:
    """`//dev/./nvidia0/` -> `/dev/nvidia0`; `..` cannot climb above `/`."""
    collapsed = re.sub(r"/+", "/", "/" + path)
    return posixpath.normpath(collapsed)


def classify(path: str, params: Params) -> str | None:
    """Why a host path reaches GPU devices, or None."""
    for pattern in params.device_paths:
        if fnmatchcase(path, pattern):
            return "a GPU device node"
    for directory in params.device_directories:
        if path == directory or path.startswith(directory + "/"):
            return (
                f"GPU device path {directory}"
                if path == directory
                else f"inside GPU device directory {directory}"
            )
    # A parent reaches the device nodes below it. Directories outside /dev (the driver's
    # /proc/driver/nvidia) hold no device nodes, so their parents (/proc) stay allowed.
    targets = [t for t in (*params.device_paths, *params.device_directories) if t[:5] == "/dev/"]
    below = [t for t in targets if path == "/" or t.startswith(path + "/")]
    if below:
        return f"a parent of GPU device paths ({listing(below)})"
    return None


def _hostpath_volumes(pod: PodView, params: Params) -> Iterator[Violation]:
    for index, volume in enumerate(as_list(pod.spec.get("volumes"))):
        host = as_dict(as_dict(volume).get("hostPath"))
        raw = host.get("path")
        if not isinstance(raw, str):
            continue
        path = normalise(raw)
        why = classify(path, params)
        if why is None:
            continue
        name = shown(as_dict(volume).get("name", f"#{index}"))
        users = [c.label for c in pod.containers if _mounts(c, name)]
        into = (
            f"mounted by {', '.join(users)}"
            if users
            else "not mounted yet (any container added later, e.g. by kubectl debug, can mount it)"
        )
        origin = "" if path == raw else f' (normalised from "{shown(raw)}")'
        yield Violation(
            "hostpath-device",
            pod.where("volumes", index, "hostPath", "path"),
            f'hostPath volume "{name}" ({pod.describe("volumes", index, "hostPath", "path")}) '
            f'exposes host path "{path}"{origin}, {why}, {into}: the container reaches GPUs '
            f"the device plugin never allocated, so the scheduler can hand the same GPU to "
            f"another Pod. Remove the hostPath volume and {FIX}.",
        )


def _mounts(container: ContainerRef, volume: str) -> bool:
    return any(
        as_dict(m).get("name") == volume for m in as_list(container.spec.get("volumeMounts"))
    )


def _device_list_mounts(pod: PodView, params: Params) -> Iterator[Violation]:
    root = normalise(params.device_list_mount_dir)
    # Normalising removes slashes and dots, never adds letters: a path without the
    # directory's last name cannot be under it, and that is nearly every mount.
    leaf = root.rsplit("/", 1)[-1]
    for c in pod.containers:
        for index, mount in enumerate(as_list(c.spec.get("volumeMounts"))):
            raw = as_dict(mount).get("mountPath")
            if not isinstance(raw, str) or leaf not in raw:
                continue
            path = normalise(raw)
            if path != root and not path.startswith(root + "/"):
                continue
            yield Violation(
                "device-list-volume-mount",
                (*c.path, "volumeMounts", index, "mountPath"),
                f'{c.label} mounts volume "{shown(as_dict(mount).get("name"))}" at {shown(path)} '
                f"({pod_path(pod, c, 'volumeMounts', index, 'mountPath')}): the NVIDIA container "
                f"toolkit reads {root} as a list of GPUs to inject, bypassing the device plugin. "
                f"Remove the mount and {FIX}.",
            )


def _env_devices(pod: PodView, params: Params) -> Iterator[Violation]:
    for c in pod.containers:
        for index, env in enumerate(as_list(c.spec.get("env"))):
            env = as_dict(env)
            name = env.get("name")
            if name not in params.env_vars or _requests_gpu(pod, c, params):
                continue
            if "valueFrom" in env:
                what = f"sets {name} from valueFrom, which cannot be proven safe at admission"
            else:
                value = env.get("value")
                value = "" if value is None else str(value)
                if value.strip().lower() in params.safe_env_values:
                    continue
                what = f'sets {name}="{shown(value)}"'
            yield Violation(
                "visible-devices-env",
                (*c.path, "env", index),
                f"{c.label} {what} ({pod_path(pod, c, 'env', index)}) but requests no GPU: "
                f"the NVIDIA container runtime would give it GPUs outside the device plugin's "
                f'accounting. Remove the variable (or set it to "void"), and {FIX}.',
            )


def _requests_gpu(pod: PodView, c: ContainerRef, params: Params) -> bool:
    return any(
        matches_any(a.resource, params.gpu_resources) for a in pod.amounts if a.container is c
    )


def _cdi_annotations(pod: PodView, params: Params) -> Iterator[Violation]:
    for key in pod.annotations:
        if key.startswith(tuple(params.cdi_annotation_prefixes)):
            path = (*pod.metadata_path, "annotations", key)
            yield Violation(
                "cdi-annotation",
                path,
                f'annotation "{shown(key, 80)}" ({format_path(path)}) asks the container '
                f"runtime to inject CDI devices without a device-plugin allocation. "
                f"Remove the annotation and {FIX}.",
            )


def _privileged(pod: PodView, params: Params) -> Iterator[Violation]:
    if not params.deny_privileged:
        return
    for c in pod.containers:
        if as_dict(c.spec.get("securityContext")).get("privileged") is True:
            yield Violation(
                "privileged",
                (*c.path, "securityContext", "privileged"),
                f"{c.label} is privileged ({pod_path(pod, c, 'securityContext', 'privileged')}): "
                f"it sees every device in the host's /dev, all GPUs included, whatever it "
                f"requests. Remove privileged: true, add only the capabilities it needs, and "
                f"{FIX}.",
            )


def pod_path(pod: PodView, c: ContainerRef, *rel: str | int) -> str:
    return format_path((*c.path, *rel))


def run(pod: PodView, inventory: Inventory, params: Params) -> Iterator[Violation]:
    yield from _hostpath_volumes(pod, params)
    yield from _device_list_mounts(pod, params)
    yield from _env_devices(pod, params)
    yield from _cdi_annotations(pod, params)
    yield from _privileged(pod, params)


CHECK = Check(
    name="device-injection",
    params=Params,
    run=run,
    rules={
        "hostpath-device": Rule("A hostPath volume exposes GPU device nodes or a parent of them."),
        "device-list-volume-mount": Rule(
            "A volume is mounted under the NVIDIA device-list directory."
        ),
        "visible-devices-env": Rule(
            "NVIDIA_VISIBLE_DEVICES (or a sibling) set without a GPU request."
        ),
        "cdi-annotation": Rule("A CDI annotation injects devices outside the device plugin."),
        "privileged": Rule("A privileged container sees every GPU on the host."),
    },
)
