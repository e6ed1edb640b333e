"""The records of the access model: one grant per field that gives containers GPUs.

`webhook.core.access.model` works them out from a pod view; checks word them as findings.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from webhook.core.access.shares import Share
from webhook.core.kit.paths import Path
from webhook.core.workloads.pods import ContainerRef, ResourceAmount

Channel = Literal[
    "env",  # value: EnvGrant (the variable and what the kubelet makes of it)
    "feature-env",  # value: EnvGrant (NVIDIA_GDS=enabled and the like)
    "legacy-env",  # value: EnvGrant (CUDA_VERSION making the image legacy)
    "share-env",  # value: EnvGrant (a HAMi-core limit the share's container overrides)
    "env-from",  # value: EnvFrom
    "cdi-annotation",  # value: the container name the key targets, None for all
    "device-annotation",  # value: as cdi-annotation
    "host-path",  # value: HostPath
    "device-list-mount",  # value: the volume's name
    "privileged",  # value: Privilege (privileged mode or its equal)
    "claim",  # value: the PodClaim it names, None when the pod declares none of that name
]


class Grant(NamedTuple):
    """One field that gives containers GPUs (or may), and the containers it reaches."""

    channel: Channel
    path: Path  # the field that grants it
    reaches: tuple[ContainerRef, ...]  # () when no container has it yet
    name: str  # the variable, annotation key, normalised host or mount path, claim
    value: Any = None  # what the channel needs besides (see Channel)
    why: str = ""  # how a host path reaches GPUs, in a message's words
    unknowable: bool = False  # admission cannot tell (what an envFrom source holds)


class EnvFrom(NamedTuple):
    kind: str  # ConfigMap or Secret
    source: str  # its name
    prefix: str
    names: tuple[str, ...]  # the device-list variables it could set


class HostPath(NamedTuple):
    volume: str
    raw: str  # the path as written
    volume_path: str  # the volume's own host path, normalised
    sub_path: str | None = None  # the mount's subPath, when the grant comes from one
    # What the path reaches (webhook.core.access.hostpaths HostKind): device nodes, a
    # container runtime or kubelet socket, a writable device-configuration directory.
    kind: str = "device"


class PodClaim(NamedTuple):
    """A `spec.resourceClaims` entry: a DRA claim the containers may reference."""

    name: str
    source: str  # resourceClaimName or resourceClaimTemplateName (or "" when neither)
    source_name: str
    path: Path


class ContainerAccess(NamedTuple):
    container: ContainerRef
    requests: tuple[ResourceAmount, ...]  # GPU resources with a count above zero
    grants: tuple[Grant, ...]  # every other way in, claims included


class PodAccess(NamedTuple):
    containers: tuple[ContainerRef, ...]
    requests: tuple[ResourceAmount, ...]
    grants: tuple[Grant, ...]  # by channel, then in the order of the pod spec
    claims: tuple[PodClaim, ...]
    shares: tuple[Share, ...] = ()  # fractional and vGPU requests (webhook.core.access.shares)

    def of(self, container: ContainerRef) -> ContainerAccess:
        """What one container reaches (by identity: two containers' specs may be equal)."""
        return ContainerAccess(
            container,
            tuple(a for a in self.requests if a.container is container),
            tuple(g for g in self.grants if any(c is container for c in g.reaches)),
        )

    def by_container(self) -> tuple[ContainerAccess, ...]:
        return tuple(self.of(c) for c in self.containers)


# The order of `PodAccess.grants`: the order in which device-injection reports them.
CHANNELS: tuple[Channel, ...] = (
    "host-path",
    "device-list-mount",
    "env",
    "feature-env",
    "legacy-env",
    "env-from",
    "cdi-annotation",
    "device-annotation",
    "privileged",
    "share-env",
    "claim",
)
