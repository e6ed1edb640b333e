"""Findings of device annotations: CDI, NRI, GKE's and CRI-O's."""

from __future__ import annotations

from webhook.checks.device_injection.common import FIX, LATER, text
from webhook.checks.device_injection.params import Params
from webhook.core.access.model import (
    Grant,
    PodAccess,
)
from webhook.core.kit.paths import format_path
from webhook.core.kit.violation import Violation


def _targets(g: Grant, *, everyone: str) -> str:
    if g.value is None:
        return everyone
    if g.reaches:
        return ", ".join(c.label for c in g.reaches)
    return f'container "{text(g.value, 60)}", which the pod does not have yet ({LATER})'


def cdi_annotation(g: Grant, access: PodAccess, params: Params) -> Violation:
    into = "" if g.value is None else f" into {_targets(g, everyone='')}"
    return Violation(
        "cdi-annotation",
        g.path,
        f'annotation "{text(g.name, 80)}" ({format_path(g.path)}) asks the container '
        f"runtime to inject CDI devices{into} without a device-plugin allocation. "
        f"Remove the annotation and {FIX}.",
    )


def device_annotation(g: Grant, access: PodAccess, params: Params) -> Violation:
    targets = _targets(g, everyone="every container of the pod")
    if g.name in params.device_annotation_keys:
        return Violation(
            "device-annotation",
            g.path,
            f'annotation "{text(g.name, 80)}" ({format_path(g.path)}) asks CRI-O to add the '
            f"host devices it lists to {targets} (where the runtime handler allows the "
            f"annotation), outside the device plugin's allocation. Remove the annotation and "
            f"{FIX}.",
        )
    return Violation(
        "device-annotation",
        g.path,
        f'annotation "{text(g.name, 80)}" ({format_path(g.path)}) asks an NRI device '
        f"injector on the node to add the host devices or mounts it lists to {targets}, "
        f"outside the device plugin's allocation. Remove the annotation and {FIX}.",
    )
