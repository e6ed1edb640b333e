"""The optional fix for an image's device-list variable: `NVIDIA_VISIBLE_DEVICES=void`.

Every CUDA base image sets `ENV NVIDIA_VISIBLE_DEVICES=all`, and admission cannot see
an image's env. Where the NVIDIA container toolkit takes device lists from the env of
unprivileged containers (its default), a container that asks for no GPU but runs on a
GPU node, or under an NVIDIA runtime class, gets every GPU of the node (the
k8s-device-plugin README warns of exactly this). A variable the Pod sets wins over the
image's (the kubelet passes the Pod's env to the runtime, which appends it after the
image's), and the toolkit reads `void` as no GPU (docs/runtime-access.md). KAI's and
HAMi's webhooks add it to containers that ask for no GPU; the mutating endpoint of
`serve` (`POST /mutate`, off unless a MutatingWebhookConfiguration points at it) does
the same, so a platform can fix such Pods instead of refusing them.

Which containers are left alone, and why:
- one that requests an `nvidia.com/` resource or a DRA extended resource, or uses a DRA
  claim: its devices come from the device plugin or the DRA driver through this very
  variable or CDI, and `void` would take them away;
- one that sets `NVIDIA_VISIBLE_DEVICES` itself (any value): that is the validating
  policy's to judge, not ours to overwrite;
- every container of a Pod with a GPU-share annotation (KAI's `gpu-fraction`,
  `gpu-memory`): the share's scheduler passes the device through the env of the Pod
  (a ConfigMap in envFrom), which an env entry would override.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.access.container_env import pod_sets
from webhook.core.access.shares import SHARE_ANNOTATIONS
from webhook.core.workloads.pods import ContainerRef, PodView

VARIABLE = "NVIDIA_VISIBLE_DEVICES"
VOID = "void"
_LISTS = ("initContainers", "containers")  # ephemeral ones arrive by a subresource
# Resource name prefixes whose devices reach the container through the toolkit:
# the NVIDIA device plugin's (and HAMi's, KAI's), and DRA extended resources (KEP-5004).
_DEVICE_PREFIXES = ("nvidia.com/", "deviceclass.resource.kubernetes.io/")


def neutralising_patch(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """JSON Patch operations (RFC 6902) that set NVIDIA_VISIBLE_DEVICES=void on every
    container of a Pod that asks for no GPU; [] when there is none (or the object is
    not a Pod spec this can patch safely)."""
    meta = pod.get("metadata")
    annotations = meta.get("annotations") if type(meta) is dict else None
    if type(annotations) is dict and not SHARE_ANNOTATIONS.isdisjoint(annotations):
        return []
    spec = pod.get("spec")
    if type(spec) is not dict:
        return []
    ops: list[dict[str, Any]] = []
    for field in _LISTS:
        containers = spec.get(field)
        if type(containers) is not list:
            continue
        for index, container in enumerate(containers):
            if type(container) is not dict or not _asks_for_no_gpu(container):
                continue
            entry = {"name": VARIABLE, "value": VOID}
            env = container.get("env")
            where = f"/spec/{field}/{index}/env"
            if env is None:
                ops.append({"op": "add", "path": where, "value": [entry]})
            elif type(env) is list:
                ops.append({"op": "add", "path": where + "/-", "value": entry})
            # else: not an env list, which the apiserver refuses anyway
    return ops


def exposed_containers(pod: PodView) -> tuple[ContainerRef, ...]:
    """The containers an image's device-list variable would reach: those the patch
    above would fix (they ask for no GPU) whose pod env leaves NVIDIA_VISIBLE_DEVICES to
    the image (webhook.core.access.container_env: neither env nor envFrom may set it)."""
    if not SHARE_ANNOTATIONS.isdisjoint(pod.annotations):
        return ()
    return tuple(
        c
        for c in pod.containers
        if _asks_for_no_gpu(c.spec) and pod_sets(pod, c, VARIABLE).state == "unset"
    )


def _asks_for_no_gpu(container: Mapping[str, Any]) -> bool:
    resources = container.get("resources")
    if type(resources) is dict:
        if resources.get("claims"):
            return False
        for field in ("limits", "requests"):
            amounts = resources.get(field)
            if type(amounts) is dict and any(
                type(name) is str and name.startswith(_DEVICE_PREFIXES) for name in amounts
            ):
                return False
    env = container.get("env")
    if type(env) is list:
        for item in env:
            if type(item) is dict and item.get("name") == VARIABLE:
                return False
    return True
