"""Findings of the env: device lists, feature variables, legacy images, share limits, envFrom."""

from __future__ import annotations

from webhook.checks.device_injection.common import FIX, text
from webhook.checks.device_injection.params import Params
from webhook.core.access.model import (
    EnvFrom,
    EnvGrant,
    Grant,
    PodAccess,
)
from webhook.core.access.runtimes import (
    CUDA_VERSION,
    FEATURE_DEVICES,
    REQUIRE_CUDA,
    vendor_of,
)
from webhook.core.access.shares import asks
from webhook.core.kit.paths import format_path
from webhook.core.kit.violation import Violation
from webhook.core.workloads.pods import ContainerRef

_VENDOR_GROUP = {"NVIDIA": "nvidia.com/", "AMD": "amd.com/"}


def _requested(access: PodAccess, c: ContainerRef, vendor: str = "NVIDIA") -> str | None:
    """The first GPU resource of `vendor` the container requests, if any: a device-list
    variable is one runtime's, which another vendor's request does not feed."""
    group = _VENDOR_GROUP[vendor]
    return next(
        (a.resource for a in access.requests if a.container is c and a.resource.startswith(group)),
        None,
    )


def _sets(c: ContainerRef, g: Grant) -> str:
    """`container "app" sets X="v" (spec...env[1])`, with what the kubelet makes of it."""
    e: EnvGrant = g.value
    s = e.setting
    if s.why == "valueFrom" and s.written is None:
        what = f"sets {e.name} from valueFrom, which cannot be proven safe at admission"
    elif s.state == "unknowable":
        what = (
            f'sets {e.name}="{text(s.written, 40)}", which cannot be proven safe at admission '
            f"({text(s.why, 120)})"
        )
    elif s.written is not None:
        what = (
            f'sets {e.name}="{text(s.written, 40)}", which the kubelet expands to '
            f'"{text(s.value, 40)}"'
        )
    else:
        what = f'sets {e.name}="{text(s.value, 40)}"'
    return f"{c.label} {what} ({format_path(g.path)})"


def env(g: Grant, access: PodAccess, params: Params) -> Violation:
    (c,) = g.reaches
    where = _sets(c, g)
    vendor = vendor_of(g.name)
    runtime = f"the {vendor} container runtime"
    resource = _requested(access, c, vendor)
    if resource is None:
        void = ' (or set it to "void")' if vendor == "NVIDIA" else ""
        message = (
            f"{where} but requests no GPU: {runtime} would give it GPUs "
            f"outside the device plugin's accounting. Remove the variable{void}, and {FIX}."
        )
    elif g.name == "NVIDIA_VISIBLE_DEVICES":
        # The plugin's default deviceListStrategy (envvar) passes the allocated GPUs in
        # NVIDIA_VISIBLE_DEVICES; the kubelet puts the pod's own variables after the
        # plugin's, and the later value wins (k8s-device-plugin README; kubelet
        # GenerateRunContainerOptions appends the pod's variables to the plugin's).
        message = (
            f"{where} beside its {resource} request: the device plugin passes the GPUs it "
            f"allocated in NVIDIA_VISIBLE_DEVICES (its default deviceListStrategy, envvar), "
            f"and a value set in the pod overrides them, so the container reaches GPUs the "
            f"scheduler never gave it. Remove the variable and let the device plugin choose "
            f"the GPUs."
        )
    else:
        message = (
            f"{where} beside its {resource} request: {runtime} adds the "
            f"devices it names to those the device plugin allocated, so the container "
            f"reaches devices the scheduler never gave it. Remove the variable and let the "
            f"device plugin choose the GPUs."
        )
    return Violation("visible-devices-env", g.path, message)


def feature_env(g: Grant, access: PodAccess, params: Params) -> Violation:
    (c,) = g.reaches
    return Violation(
        "feature-devices-env",
        g.path,
        f"{_sets(c, g)}: the NVIDIA container toolkit injects "
        f"{FEATURE_DEVICES.get(g.name, 'the devices of that feature')} "
        f'into any container it gives a GPU when the value is "enabled", outside the device '
        f"plugin's allocation. Remove the variable: where the platform offers the feature, its "
        f"device plugin sets it for the containers it allocates.",
    )


def legacy_env(g: Grant, access: PodAccess, params: Params) -> Violation:
    (c,) = g.reaches
    why = (
        f"sets {CUDA_VERSION} without {REQUIRE_CUDA}"
        if g.name == CUDA_VERSION
        else f"clears {REQUIRE_CUDA} (the image's {CUDA_VERSION} stays)"
    )
    return Violation(
        "legacy-image-env",
        g.path,
        f"{_sets(c, g)} and requests no GPU: it {why} and leaves NVIDIA_VISIBLE_DEVICES to "
        f'the image, and the NVIDIA container toolkit gives such a "legacy" CUDA image every '
        f'GPU of the node. Remove the variable, or set NVIDIA_VISIBLE_DEVICES to "void".',
    )


def share_env(g: Grant, access: PodAccess, params: Params) -> Violation:
    (c,) = g.reaches
    share = next(s for s in access.shares if s.container is c)
    if g.name == "CUDA_DISABLE_CONTROL":
        effect = (
            "the device plugin then leaves out /etc/ld.so.preload, so HAMi-core's limiter "
            "never loads and the container takes the whole GPU's memory and compute"
        )
    else:
        effect = (
            "the kubelet puts the pod's value after the one the device plugin sets, and "
            "HAMi-core enforces the pod's: the container can take memory or compute promised "
            "to the pods it shares the GPU with"
        )
    return Violation(
        "share-limit-env",
        g.path,
        f"{_sets(c, g)} while it asks {asks(share).partition(' asks ')[2]}: {effect}. Remove the "
        f"variable and ask for the share's size through its resources.",
    )


def env_from(g: Grant, access: PodAccess, params: Params) -> Violation:
    (c,) = g.reaches
    source: EnvFrom = g.value
    prefix = f' with prefix "{text(source.prefix, 40)}"' if source.prefix else ""
    where = (
        f'{c.label} takes variables from {source.kind} "{text(source.source, 60)}"{prefix} '
        f"({format_path(g.path)}), which may set {_either(source.names)}: what the "
        f"{source.kind} holds is not known at admission"
    )
    if _requested(access, c) is None:
        fix = (
            f"a device list there gives the container GPUs outside the device plugin's "
            f'accounting. Set {source.names[0]} to "void" in its env (env wins over '
            f"envFrom), or give envFrom a prefix that cannot form these names (e.g. APP_)."
        )
    else:
        fix = (
            "a device list there overrides the GPUs the device plugin allocated. Give "
            "envFrom a prefix that cannot form these names (e.g. APP_), or take only the "
            "keys the container needs with env valueFrom."
        )
    return Violation("visible-devices-env-from", g.path, f"{where}, and {fix}", advisory=True)


def _either(names: tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
