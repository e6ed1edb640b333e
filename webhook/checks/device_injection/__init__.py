"""gpu-device-injection: ways a container reaches GPUs without the device plugin.

hostPath device nodes (and their aliases, a containerised driver's copy, the runtime's and
the kubelet's sockets, writable device configuration), the device-list volume mount,
device-list variables in env or possibly in envFrom, CDI and NRI device annotations, and
privileged mode or its equal all hand a container GPUs the scheduler never counted: two
Pods then share one GPU without knowing, and health checks miss it. What each container
reaches is worked out once, in `webhook.core.access.model`; this check only words the
findings, and grants privileged mode its one exception: a Pod that provably never runs on
a GPU node (webhook.core.supply.gpu_placement).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from webhook.checks.device_injection.annotations import cdi_annotation, device_annotation
from webhook.checks.device_injection.env import (
    env,
    env_from,
    feature_env,
    legacy_env,
    share_env,
)
from webhook.checks.device_injection.hostpaths import device_list_mount, host_path
from webhook.checks.device_injection.image_env import image_env
from webhook.checks.device_injection.params import Params
from webhook.checks.device_injection.privilege import privileged, reaches_gpu_node
from webhook.core.access.envgrants import LIMIT_PREFIXES, SHARE_ENV_NAMES
from webhook.core.access.model import (
    Grant,
    PodAccess,
    pod_access,
)
from webhook.core.access.runtimes import (
    CUDA_VERSION,
    REQUIRE_CUDA,
)
from webhook.core.access.shares import SHARE_ANNOTATIONS
from webhook.core.engine.check import Check, Rule
from webhook.core.engine.context import Context
from webhook.core.engine.reads import Reads
from webhook.core.kit.violation import Violation
from webhook.core.workloads.pods import PodView
from webhook.core.workloads.targets import TargetKind

__all__ = ["CHECK", "REPORTS", "Params", "judges", "run"]

_Report = Callable[[Grant, PodAccess, Params], Violation | None]
REPORTS: dict[str, _Report] = {
    "host-path": host_path,
    "device-list-mount": device_list_mount,
    "env": env,
    "feature-env": feature_env,
    "legacy-env": legacy_env,
    "env-from": env_from,
    "cdi-annotation": cdi_annotation,
    "device-annotation": device_annotation,
    # "privileged": judged with the context below (its exception reads the placement).
    "share-env": share_env,
    # "claim": DRA claims are recorded by the access model, judged by a later check.
}


def run(pod: PodView, *, context: Context, params: Params) -> Iterable[Violation]:
    access = pod_access(pod, rules=params.rules)
    image = params.image_env_action != "off" and (
        context.profile.container_toolkit.accept_envvar_unprivileged
    )
    if not access.grants:
        return image_env(pod, access, context, params) if image else ()
    found = image_env(pod, access, context, params) if image else []
    reaches: str | None = ""  # why it may reach a GPU node: asked at the first privileged grant
    for grant in access.grants:  # by channel: the order of the rules below
        violation: Violation | None = None
        if grant.channel == "privileged":
            if reaches == "":
                reaches = reaches_gpu_node(pod, context, params)
            if reaches is not None:
                violation = privileged(grant, access, params, context)
        else:
            report = REPORTS.get(grant.channel)
            violation = report(grant, access, params) if report is not None else None
        if violation is not None:
            found.append(violation)
    return found


# Grants that already report what the container's env does with the device list.


def judges(params: Params) -> Mapping[TargetKind, Reads]:
    """Every way into a GPU the access model knows, as these parameters name them."""
    return {
        "pod": Reads(
            extended_resources=True,  # the access model reads GPU requests beside the rest
            claims=True,
            host_paths=True,
            security=frozenset({"privileged", "capabilities", "windowsOptions"}),
            pod_security=frozenset({"windowsOptions"}),
            env_from=True,
            env=params.rules.env_vars
            | frozenset(params.feature_env_vars)
            | SHARE_ENV_NAMES
            | (frozenset({CUDA_VERSION, REQUIRE_CUDA}) if params.legacy_image_env else frozenset()),
            env_prefixes=frozenset(params.env_prefixes) | frozenset(LIMIT_PREFIXES),
            mount_paths=frozenset({params.rules.device_list_leaf}),
            annotations=SHARE_ANNOTATIONS | frozenset(params.device_annotation_keys),
            annotation_prefixes=frozenset(params.rules.annotation_heads),
            image_env=frozenset(params.gpu_taint_keys)
            if params.image_env_action != "off"
            else frozenset(),
        )
    }


CHECK = Check(
    name="device-injection",
    params=Params,
    run=run,
    judges=judges,
    rules={
        "hostpath-device": Rule(
            "A hostPath volume exposes GPU device nodes, an alias of them "
            "(/dev/char, /proc/<pid>/root, a driver root's dev), a parent of them, or a "
            "subPathExpr admission cannot know below such a parent."
        ),
        "hostpath-runtime-socket": Rule(
            "A hostPath volume exposes a container runtime's socket (containerd, CRI-O, "
            "docker) or a directory holding one: a node takeover."
        ),
        "hostpath-kubelet-socket": Rule(
            "A hostPath volume exposes the kubelet's device-plugin or pod-resources "
            "sockets, or a directory holding them."
        ),
        "hostpath-writable-device-config": Rule(
            "A writable mount of a CDI spec directory or of sysfs's PCI devices (or a "
            "parent of either); read-only mounts are allowed."
        ),
        "device-list-volume-mount": Rule(
            "A volume is mounted under the NVIDIA device-list directory."
        ),
        "visible-devices-env": Rule(
            "NVIDIA_VISIBLE_DEVICES (or a sibling, AMD_VISIBLE_DEVICES, DOCKER_RESOURCE_*) set "
            "in the pod to a value that names devices, after the kubelet's precedence and "
            "$(VAR) expansion, or to one admission cannot see (valueFrom)."
        ),
        "feature-devices-env": Rule(
            "NVIDIA_GDS, NVIDIA_MOFED, NVIDIA_GDRCOPY or NVIDIA_NVSWITCH set to enabled: the "
            "NVIDIA toolkit injects that feature's devices."
        ),
        "legacy-image-env": Rule(
            "A container that requests no GPU sets CUDA_VERSION (or clears NVIDIA_REQUIRE_CUDA) "
            "and leaves NVIDIA_VISIBLE_DEVICES unset: the toolkit gives a legacy image every GPU."
        ),
        "share-limit-env": Rule(
            "A HAMi or Volcano vGPU share overrides HAMi-core's limits in its env "
            "(CUDA_DEVICE_MEMORY_LIMIT[_n], CUDA_DEVICE_SM_LIMIT[_n], ...) or turns the "
            "limiter off (CUDA_DISABLE_CONTROL)."
        ),
        "visible-devices-env-from": Rule(
            "An envFrom source may set NVIDIA_VISIBLE_DEVICES or a sibling (a warning: "
            "admission cannot see its content)."
        ),
        "cdi-annotation": Rule("A CDI annotation injects devices outside the device plugin."),
        "device-annotation": Rule(
            "An NRI device-injector annotation (containerd's, GKE's) or CRI-O's devices "
            "annotation adds host devices or mounts."
        ),
        "privileged": Rule("A privileged container sees every GPU on the host."),
        "sys-admin-unconfined": Rule(
            "A container adds SYS_ADMIN (or ALL) without seccomp or AppArmor confinement."
        ),
        "host-pid-capabilities": Rule(
            "A container in a hostPID Pod adds SYS_PTRACE, SYS_ADMIN or ALL: it can enter the host."
        ),
        "host-process": Rule("A Windows HostProcess Pod or container runs on the host."),
        "image-visible-devices": Rule(
            "A container that asks for no GPU leaves NVIDIA_VISIBLE_DEVICES to its image and "
            "may run on a GPU node where the toolkit takes device lists from env."
        ),
    },
)
