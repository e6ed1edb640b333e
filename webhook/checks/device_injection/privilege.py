"""Findings of privileged mode and its equals, and their one exception: a Pod that
provably never runs on a GPU node."""

from __future__ import annotations

from webhook.checks.device_injection.common import FIX, text
from webhook.checks.device_injection.params import Params
from webhook.core.access.model import (
    Grant,
    PodAccess,
    Privilege,
)
from webhook.core.engine.context import Context
from webhook.core.kit.paths import format_path
from webhook.core.kit.violation import Violation
from webhook.core.supply.gpu_placement import may_run_on_gpu_node
from webhook.core.workloads.pods import PodView

PRIVILEGE_RULES = {
    "privileged": "privileged",
    "sys-admin": "sys-admin-unconfined",
    "host-pid": "host-pid-capabilities",
    "host-process": "host-process",
}
EVERY_GPU = "which reaches every GPU of the node like privileged mode, whatever it requests"


def privileged(g: Grant, access: PodAccess, params: Params, context: Context) -> Violation | None:
    if not params.deny_privileged:
        return None
    privilege: Privilege = g.value
    if privilege.kind == "sys-admin" and not _unconfined(privilege, context):
        return None
    text = {
        "privileged": _privileged_mode,
        "sys-admin": _sys_admin,
        "host-pid": _host_pid,
        "host-process": _host_process,
    }[privilege.kind](g, privilege, context)
    return Violation(PRIVILEGE_RULES[privilege.kind], g.path, text)


def _unconfined(privilege: Privilege, context: Context) -> bool:
    if privilege.apparmor == "Unconfined" or privilege.seccomp == "Unconfined":
        return True
    return privilege.seccomp is None and not context.profile.seccomp_default


def _privileged_mode(g: Grant, privilege: Privilege, context: Context) -> str:
    (c,) = g.reaches
    return (
        f"{c.label} is privileged ({format_path(g.path)}): it sees every device in the "
        f"host's /dev, all GPUs included, whatever it requests. Remove privileged: true, "
        f"add only the capabilities it needs, and {FIX}."
    )


def _sys_admin(g: Grant, privilege: Privilege, context: Context) -> str:
    (c,) = g.reaches
    unconfined = []
    if privilege.seccomp == "Unconfined":
        unconfined.append(f"seccomp Unconfined ({format_path(privilege.seccomp_path)})")
    elif privilege.seccomp is None:
        unconfined.append(
            "no seccomp profile, which the kubelet runs as Unconfined (the cluster profile "
            "does not say the kubelets run with seccompDefault)"
        )
    if privilege.apparmor == "Unconfined":
        unconfined.append(f"AppArmor Unconfined ({format_path(privilege.apparmor_path)})")
    return (
        f"{c.label} adds capability {text(privilege.capability, 40)} "
        f"({format_path(g.path)}) and runs with {' and '.join(unconfined)}: it can mount "
        f"filesystems and lift its device cgroup, {EVERY_GPU}. Drop the capability, or "
        f"confine it with seccompProfile and appArmorProfile type RuntimeDefault, and {FIX}."
    )


def _host_pid(g: Grant, privilege: Privilege, context: Context) -> str:
    (c,) = g.reaches
    return (
        f"{c.label} adds capability {text(privilege.capability, 40)} "
        f"({format_path(g.path)}) in a Pod with hostPID: true: it can open the host's "
        f"processes' /proc/<pid>/root (the host's root filesystem) and enter their "
        f"namespaces, {EVERY_GPU}. Remove hostPID or the capability, and {FIX}."
    )


def _host_process(g: Grant, privilege: Privilege, context: Context) -> str:
    own = len(g.reaches) == 1 and g.path[: len(g.reaches[0].path)] == g.reaches[0].path
    who = g.reaches[0].label if own else "the Pod"
    return (
        f"{who} runs as a Windows HostProcess ({format_path(g.path)}): its processes run "
        f"on the host with the host's devices, {EVERY_GPU}. Remove hostProcess and {FIX}."
    )


def reaches_gpu_node(pod: PodView, context: Context, params: Params) -> str | None:
    """Why the pod may run on a GPU node; None when it provably never can (a privileged
    TPU job kept off GPU nodes by a taint every GPU node carries, a Pod pinned by
    nodeName to a known node without GPUs)."""
    return may_run_on_gpu_node(
        pod, inventory=context.inventory, profile=context.profile, is_gpu=params.rules.gpus.is_gpu
    )
