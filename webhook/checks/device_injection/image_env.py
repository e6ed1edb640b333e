"""image-visible-devices: a container whose device list is left to its image."""

from __future__ import annotations

from webhook.checks.device_injection.common import text
from webhook.checks.device_injection.params import Params
from webhook.checks.device_injection.privilege import reaches_gpu_node
from webhook.core.access.model import (
    PodAccess,
)
from webhook.core.access.neutralise import exposed_containers
from webhook.core.engine.context import Context
from webhook.core.kit.dicts import as_list
from webhook.core.kit.violation import Violation
from webhook.core.supply.profiles import placement_spec
from webhook.core.workloads.pods import PodView

_ENV_CHANNELS = frozenset({"env", "env-from", "legacy-env", "privileged"})


def image_env(pod: PodView, access: PodAccess, context: Context, params: Params) -> list[Violation]:
    """image-visible-devices: containers whose device list is left to their image."""
    # Where the Pod may run first: most Pods ask for no GPU node, and it is the cheaper.
    why = _image_reaches_gpu_node(pod, context, params)
    if why is None:
        return []
    reported = {id(c) for g in access.grants if g.channel in _ENV_CHANNELS for c in g.reaches}
    exposed = tuple(c for c in exposed_containers(pod) if id(c) not in reported)
    return [
        Violation(
            "image-visible-devices",
            c.path,
            f"{c.label} asks for no GPU and leaves NVIDIA_VISIBLE_DEVICES to its image, and "
            f"the Pod may run on a GPU node ({why}). On this cluster the NVIDIA "
            f"container toolkit takes device lists from an unprivileged container's env "
            f"(the cluster profile's containerToolkit.acceptEnvvarUnprivileged), so an image "
            f"that sets NVIDIA_VISIBLE_DEVICES=all, as every CUDA base image does, gets every "
            f"GPU of the node outside the device plugin's accounting. Set "
            f'NVIDIA_VISIBLE_DEVICES to "void" in its env (the optional mutating webhook '
            f"does it), keep the Pod off GPU nodes, or harden the toolkit "
            f"(docs/runtime-access.md).",
            advisory=params.image_env_action == "warn",
        )
        for c in exposed
    ]


def _image_reaches_gpu_node(pod: PodView, context: Context, params: Params) -> str | None:
    """Why the pod may run on a GPU node, for the image-env rule. Where the profile says
    what every GPU node carries, that decides (soundly). Where it says nothing, any pod
    may land on an untainted GPU node, which the docs tell the platform to declare (or
    harden the toolkit); the rule then reports the pods that ask for GPU nodes in so many
    words: placed by nodeName on one, run under a RuntimeClass, or tolerating a taint GPU
    nodes carry by convention (`gpuTaintKeys`)."""
    facts = context.profile.gpu_nodes
    if facts.taints or facts.labels:
        return reaches_gpu_node(pod, context, params)
    raw = pod.spec
    if not pod.tolerations_added and not (
        "nodeName" in raw or "runtimeClassName" in raw or "tolerations" in raw
    ):
        return None  # nearly every Pod: nothing asks for a GPU node
    spec = placement_spec(pod)
    if spec.get("nodeName"):
        return reaches_gpu_node(pod, context, params)
    runtime = spec.get("runtimeClassName")
    if type(runtime) is str and runtime:
        return f'it runs under RuntimeClass "{text(runtime, 60)}"'
    keys = params.gpu_taint_keys
    for t in as_list(spec.get("tolerations")):
        key = t.get("key") if type(t) is dict else None
        if not key:
            if type(t) is dict and t.get("operator") == "Exists":
                return "it tolerates every taint"
        elif key in keys:
            return f"it tolerates {text(key, 60)}, a taint GPU nodes carry"
    return None
