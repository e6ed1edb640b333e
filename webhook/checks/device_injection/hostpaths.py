"""Findings of host paths: device nodes and their aliases, sockets, writable device
configuration, and the device-list mount."""

from __future__ import annotations

from webhook.checks.device_injection.common import BYPASS, FIX, VENDOR_FIX, text
from webhook.checks.device_injection.params import Params
from webhook.core.access.hostpaths import CDI_WHAT, device_vendors
from webhook.core.access.model import (
    Grant,
    HostPath,
    PodAccess,
)
from webhook.core.kit.paths import format_path
from webhook.core.kit.violation import Violation


def _host_fix(g: Grant, access: PodAccess) -> str:
    """The fix for the vendor whose devices the path holds; /dev/dri is AMD's when the
    pod mounts AMD's /dev/kfd too (a ROCm pod mounts both)."""
    vendors = device_vendors(g.name)
    if len(vendors) > 1 and any(
        device_vendors(o.name) == ("AMD",) for o in access.grants if o.channel == "host-path"
    ):
        vendors = ("AMD",)
    return VENDOR_FIX.get(vendors, FIX)


HOST_RULES = {
    "device": "hostpath-device",
    "runtime-socket": "hostpath-runtime-socket",
    "kubelet-socket": "hostpath-kubelet-socket",
    "device-config": "hostpath-writable-device-config",
}
HOST_RISKS = {
    "runtime-socket": "whoever connects to a container runtime's socket can start a "
    "privileged container on the node, with every GPU (a node takeover)",
    "kubelet-socket": "a client of these sockets can ask a GPU device plugin for GPUs "
    "directly, register a device plugin of its own, or list which GPUs every Pod holds",
    "cdi": "the device plugin and DRA drivers write CDI specs there, and the container "
    "runtime injects the devices a spec names into later containers: a writable mount "
    "lets this Pod hand any device to them",
    "sysfs": "through a writable sysfs device tree the container can reset, unbind or "
    "remove any GPU of the node, other tenants' included",
}
HOST_FIXES = {
    "runtime-socket": "only node agents in an exempt namespace need the runtime's socket",
    "kubelet-socket": "only device plugins in an exempt namespace need the kubelet's sockets",
}


def host_path(g: Grant, access: PodAccess, params: Params) -> Violation:
    detail: HostPath = g.value
    rule = HOST_RULES.get(detail.kind, "hostpath-device")
    if detail.kind == "device-config":
        return _writable_config(g, detail, rule)
    risk = HOST_RISKS.get(detail.kind, BYPASS)
    if g.unknowable:
        return _unknowable_sub_path(g, detail, rule, risk)
    if detail.kind == "device":
        fix = f"and {_host_fix(g, access)}"
    else:
        fix = f"({HOST_FIXES[detail.kind]})"
    if detail.sub_path is not None:
        (c,) = g.reaches
        field = str(g.path[-1])
        return Violation(
            rule,
            g.path,
            f'{c.label} mounts hostPath volume "{text(detail.volume)}" (host path '
            f'"{text(detail.volume_path)}") with {field} "{text(detail.sub_path)}" '
            f'({format_path(g.path)}), which is host path "{text(g.name)}", {g.why}: '
            f"{risk}. Remove the {field} (or the volume) {fix}.",
        )
    into = (
        f"mounted by {', '.join(c.label for c in g.reaches)}"
        if g.reaches
        else "not mounted yet (any container added later, e.g. by kubectl debug, can mount it)"
    )
    origin = "" if g.name == detail.raw else f' (normalised from "{text(detail.raw)}")'
    return Violation(
        rule,
        g.path,
        f'hostPath volume "{text(detail.volume)}" ({format_path(g.path)}) exposes host path '
        f'"{text(g.name)}"{origin}, {g.why}, {into}: {risk}. Remove the hostPath volume '
        f"{fix}.",
    )


def _unknowable_sub_path(g: Grant, detail: HostPath, rule: str, risk: str) -> Violation:
    (c,) = g.reaches
    return Violation(
        rule,
        g.path,
        f'{c.label} mounts hostPath volume "{text(detail.volume)}" (host path '
        f'"{text(detail.volume_path)}") with subPathExpr "{text(detail.sub_path)}" '
        f"({format_path(g.path)}), which the kubelet expands on the node to {text(g.why, 300)}"
        f" lie below: {risk}. Use a literal subPath, or take the variables from literal "
        f"env values.",
    )


def _writable_config(g: Grant, detail: HostPath, rule: str) -> Violation:
    (c,) = g.reaches
    risk = HOST_RISKS["cdi" if CDI_WHAT in g.why else "sysfs"]
    field = str(g.path[-1])
    via = (
        f' with {field} "{text(detail.sub_path)}", which is host path "{text(g.name)}"'
        if field != "readOnly"
        else ""
    )
    return Violation(
        rule,
        g.path,
        f'{c.label} mounts hostPath volume "{text(detail.volume)}" (host path '
        f'"{text(detail.volume_path)}"){via} writable ({format_path(g.path)}), {g.why}: '
        f"{risk}. Mount it readOnly: true (with recursiveReadOnly: Enabled when it spans "
        f"/sys or /run), or remove it.",
    )


def device_list_mount(g: Grant, access: PodAccess, params: Params) -> Violation:
    (c,) = g.reaches
    return Violation(
        "device-list-volume-mount",
        g.path,
        f'{c.label} mounts volume "{text(g.value)}" at {text(g.name)} ({format_path(g.path)}): '
        f"the NVIDIA container toolkit reads {params.rules.device_list_dir} as a list of GPUs "
        f"to inject, bypassing the device plugin. Remove the mount and {FIX}.",
    )
