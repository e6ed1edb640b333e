"""What each container of a pod can reach of a node's GPUs, and through which field.

A container reaches GPUs through a resource the device plugin allocates (a count above
zero: a zero count asks for nothing), or around the plugin: a device-list variable in
its env as the kubelet resolves it and the runtime reads it (webhook.core.access.envgrants:
feature variables, the legacy-image rule and HAMi's limits too), an envFrom source that
may hold one, a pod annotation a node plugin or CRI-O turns into devices, a hostPath to
a device node or to any alias of one, a mount on the NVIDIA toolkit's device-list
directory (matched by prefix, as the toolkit does), or privileged mode. DRA claims are
recorded here and judged elsewhere, and so are GPU shares (webhook.core.access.shares:
KAI, HAMi and Volcano fractions of a GPU, which the sharing system's scheduler packs
onto one device). Every grant (webhook.core.access.grants) carries the path of the field
that grants it, so a finding names the line to change.

The model is worked out once per pod view and policy (memoised in `PodView.memo`), and
is linear in the size of the pod spec: nothing is cached by user-supplied text. On the
admission path it costs about as much as one check: most pods have no grant at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from webhook.core.access.container_env import container_env
from webhook.core.access.envgrants import (
    EnvGrant,
    EnvNames,
    env_grants,
    kai_env_from,
    watched,
)
from webhook.core.access.gpuresources import GpuResources, gpu_amounts, gpu_requests, gpu_resources
from webhook.core.access.grants import (
    CHANNELS,
    Channel,
    ContainerAccess,
    EnvFrom,
    Grant,
    HostPath,
    PodAccess,
    PodClaim,
)
from webhook.core.access.hostpaths import DevicePaths, Reach, joined, normalise
from webhook.core.access.privilege import Privilege, container_privileges, pod_host_process
from webhook.core.access.shares import Share, gpu_shares
from webhook.core.access.subpaths import Unknowable, expand_sub_path
from webhook.core.workloads.pods import ContainerRef, PodView, ResourceAmount

__all__ = [
    "AccessRules",
    "Channel",
    "ContainerAccess",
    "EnvFrom",
    "EnvGrant",
    "GpuResources",
    "Grant",
    "HostPath",
    "PodAccess",
    "PodClaim",
    "Privilege",
    "Share",
    "annotation_prefix",
    "gpu_amounts",
    "gpu_requests",
    "gpu_resources",
    "gpu_shares",
    "pod_access",
]


@dataclass(frozen=True, slots=True, eq=False)
class AccessRules:
    """A policy's names for the ways in: built once per policy, identity-hashed."""

    gpus: GpuResources
    devices: DevicePaths
    device_list_dir: str  # normalised
    device_list_leaf: str  # its last name: a mount path without it cannot be under it
    env_vars: frozenset[str]
    env_order: tuple[str, ...]  # the same names, in the policy's order (for messages)
    safe_values: frozenset[str]  # lower case
    annotation_heads: Mapping[str, Channel]  # annotation key prefix (before "/") -> channel
    env: EnvNames  # every variable the env model reads (device lists, features, shares)
    annotation_keys: frozenset[str]  # whole keys of device annotations (CRI-O's have no "/")

    @classmethod
    def of(
        cls,
        *,
        gpus: GpuResources,
        device_paths: tuple[str, ...],
        device_directories: tuple[str, ...],
        device_list_dir: str,
        env_vars: tuple[str, ...],
        safe_values: tuple[str, ...],
        cdi_prefixes: tuple[str, ...],
        device_prefixes: tuple[str, ...],
        host: Mapping[str, tuple[str, ...]] | None = None,
        env_prefixes: tuple[str, ...] = (),
        feature_env_vars: tuple[str, ...] = (),
        legacy_images: bool = False,
        device_annotation_keys: tuple[str, ...] = (),
    ) -> AccessRules:
        families: tuple[tuple[Channel, tuple[str, ...]], ...] = (
            ("device-annotation", device_prefixes),
            ("cdi-annotation", cdi_prefixes),
        )
        heads = {annotation_prefix(p): channel for channel, ps in families for p in ps}
        root = normalise(device_list_dir)
        safe = frozenset(v.strip().lower() for v in safe_values)
        names = EnvNames.of(
            device_lists=frozenset(env_vars),
            prefixes=env_prefixes,
            features=frozenset(feature_env_vars),
            legacy=legacy_images,
            is_safe=lambda value: value.strip().lower() in safe,
        )
        return cls(
            gpus,
            # host: the other kinds of host path (DevicePaths.of's keywords)
            DevicePaths.of(paths=device_paths, directories=device_directories, **(host or {})),
            root,
            root.rsplit("/", 1)[-1],
            frozenset(env_vars),
            env_vars,
            safe,
            heads,
            names,
            frozenset(device_annotation_keys),
        )


def annotation_prefix(prefix: str) -> str:
    """`cdi.k8s.io/` -> `cdi.k8s.io`: the part of an annotation key before its `/`."""
    head = prefix[:-1] if prefix.endswith("/") else prefix
    if not head or "/" in head:
        raise ValueError(
            f"{prefix!r} is not an annotation key prefix: give the part before the '/' "
            f"(a DNS subdomain such as cdi.k8s.io), optionally with the '/'"
        )
    return head


def pod_access(pod: PodView, *, rules: AccessRules) -> PodAccess:
    """The access model of one pod view under one policy's rules, worked out once."""
    found: PodAccess | None = pod.memo.get(rules)
    if found is None:
        found = pod.memo[rules] = _scan(pod, rules)
    return found


_Found = dict[str, list[Grant]]


def _is_map(value: object) -> TypeGuard[Mapping[str, Any]]:
    return type(value) is dict or isinstance(value, Mapping)


class _HostVolume:
    __slots__ = ("index", "name", "path", "raw", "reach", "users")

    def __init__(self, index: int, name: str, raw: str, devices: DevicePaths) -> None:
        self.index, self.name, self.raw = index, name, raw
        self.path = normalise(raw)
        self.reach = devices.reach(self.path)
        self.users: list[ContainerRef] = []


def _scan(pod: PodView, rules: AccessRules) -> PodAccess:
    found: _Found = {}
    spec = pod.spec
    # Each part is looked at only when the spec has it: this runs on every admission.
    items = spec.get("volumes")
    volumes, hosts = _host_volumes(items, rules) if type(items) is list and items else ([], {})
    items = spec.get("resourceClaims")
    claims = _pod_claims(pod, items) if type(items) is list and items else ()
    requests = gpu_requests(pod, gpus=rules.gpus)
    shares = gpu_shares(pod)
    for c in pod.containers:
        _container(pod, c, rules, hosts, claims, found, requests, shares)
    if pod.annotations:
        _annotations(pod, rules, found)
    if volumes:
        _volume_grants(pod, volumes, found)
    host_process = pod_host_process(pod) if "securityContext" in spec else None
    if host_process is not None:
        _add(
            found, Grant("privileged", host_process, pod.containers, "", Privilege("host-process"))
        )
    if not found:
        return PodAccess(pod.containers, requests, (), claims, shares)  # nearly every pod
    grants = tuple(g for channel in CHANNELS for g in found.get(channel, ()))
    return PodAccess(pod.containers, requests, grants, claims, shares)


def _host_volumes(
    items: list[Any], rules: AccessRules
) -> tuple[list[_HostVolume], dict[str, _HostVolume]]:
    volumes: list[_HostVolume] = []
    by_name: dict[str, _HostVolume] = {}
    for index, volume in enumerate(items):
        host = volume.get("hostPath") if _is_map(volume) else None
        if host is None or not _is_map(host) or type(host.get("path")) is not str:
            continue  # emptyDir, configMap, ...: one lookup each
        name = volume.get("name")
        key = name if type(name) is str else f"#{index}"
        v = _HostVolume(index, key, host["path"], rules.devices)
        # Names are unique once the apiserver has checked them; in a PR they may not be.
        v.users = by_name.setdefault(key, v).users
        volumes.append(v)
    return volumes, by_name


def _volume_grants(pod: PodView, volumes: list[_HostVolume], found: _Found) -> None:
    grants = [
        Grant(
            "host-path",
            pod.where("volumes", v.index, "hostPath", "path"),
            tuple(v.users),
            v.path,
            HostPath(v.name, v.raw, v.path, kind=v.reach.kind),
            v.reach.why,
        )
        for v in volumes
        if v.reach is not None
    ]
    if grants:  # the volumes first, then subPaths into harmless ones
        found["host-path"] = grants + found.get("host-path", [])


def _add(found: _Found, grant: Grant) -> None:
    found.setdefault(grant.channel, []).append(grant)


def _container(
    pod: PodView,
    c: ContainerRef,
    rules: AccessRules,
    hosts: dict[str, _HostVolume],
    claims: tuple[PodClaim, ...],
    found: _Found,
    requests: tuple[ResourceAmount, ...],
    shares: tuple[Share, ...],
) -> None:
    spec = c.spec
    env = spec.get("env")
    present = watched(env, rules.env) if type(env) is list and env else None
    if present:
        nvidia = any(a.container is c and a.resource.startswith("nvidia.com/") for a in requests)
        for grant in env_grants(pod, c, rules.env, present, nvidia_request=nvidia, shares=shares):
            _add(found, grant)
    env_from = spec.get("envFrom")
    if type(env_from) is list and env_from:
        _env_from(pod, c, env_from, env if type(env) is list else [], rules, found, shares)
    mounts = spec.get("volumeMounts")
    if type(mounts) is list and mounts:
        _mounts(pod, c, mounts, rules, hosts, found)
    security = spec.get("securityContext")
    if security and _is_map(security):
        for path, privilege in container_privileges(pod, c, security):
            _add(found, Grant("privileged", path, (c,), c.name, privilege))
    resources = spec.get("resources")
    uses = resources.get("claims") if resources and _is_map(resources) else None
    if type(uses) is list and uses:
        _claim_uses(c, uses, claims, found)


def _env_from(
    pod: PodView,
    c: ContainerRef,
    sources: list[Any],
    env: list[Any],
    rules: AccessRules,
    found: _Found,
    shares: tuple[Share, ...],
) -> None:
    # A variable the container's env sets itself wins over every envFrom source
    # (Kubernetes API reference, EnvFromSource), so only the others stay open.
    pinned = {n for item in env if _is_map(item) for n in (item.get("name"),) if type(n) is str}
    for index, source in enumerate(sources):
        if not _is_map(source) or kai_env_from(pod, c, source, shares):
            continue
        prefix = source.get("prefix")
        prefix = prefix if type(prefix) is str else ""
        # A key is never empty, so the prefix must be a strict prefix of the name.
        names = tuple(
            n
            for n in rules.env_order
            if len(n) > len(prefix) and n.startswith(prefix) and n not in pinned
        ) + tuple(
            f"{p}*" for p in rules.env.prefixes if p.startswith(prefix) or prefix.startswith(p)
        )
        if not names:
            continue
        field = next((f for f in ("configMapRef", "secretRef") if f in source), None)
        ref = source.get(field) if field else None
        name = ref.get("name") if _is_map(ref) else None
        kind = {"configMapRef": "ConfigMap", "secretRef": "Secret"}.get(field or "", "source")
        what = EnvFrom(kind, name if type(name) is str else "", prefix, names)
        path = (*c.path, "envFrom", index, *((field,) if field else ()))
        _add(found, Grant("env-from", path, (c,), what.source, what, unknowable=True))


def _mounts(
    pod: PodView,
    c: ContainerRef,
    mounts: list[Any],
    rules: AccessRules,
    hosts: dict[str, _HostVolume],
    found: _Found,
) -> None:
    root, leaf = rules.device_list_dir, rules.device_list_leaf
    for index, mount in enumerate(mounts):
        if not _is_map(mount):
            continue
        raw = mount.get("mountPath")
        if type(raw) is str and leaf in raw:
            path = normalise(raw)
            # The toolkit matches the cleaned destination by prefix, with no separator:
            # /var/run/nvidia-container-devicesall asks for "all" (cuda_image.go
            # requestsFromMounts, NVIDIA/nvidia-container-toolkit d34b3046).
            if path.startswith(root):
                where = (*c.path, "volumeMounts", index, "mountPath")
                _add(found, Grant("device-list-mount", where, (c,), path, mount.get("name")))
        if hosts:
            name = mount.get("name")
            host = hosts.get(name) if type(name) is str else None
            if host is not None:
                _host_mount(pod, c, index, mount, host, rules, found)


def _host_mount(
    pod: PodView,
    c: ContainerRef,
    index: int,
    mount: Mapping[str, Any],
    volume: _HostVolume,
    rules: AccessRules,
    found: _Found,
) -> None:
    if not any(u is c for u in volume.users):
        volume.users.append(c)
    if volume.reach is not None:
        return  # the volume itself is the grant
    # The kubelet joins a subPath to the volume's host path: /proc with driver/nvidia is
    # /proc/driver/nvidia; a subPathExpr first expanded with the container's env.
    field, sub = "subPath", mount.get("subPath")
    expr = mount.get("subPathExpr")
    if type(expr) is str and expr:
        field = "subPathExpr"
        sub = expand_sub_path(expr, container_env(pod, c)) if "$" in expr else expr
        if sub is None:
            return  # the kubelet refuses it (an empty or missing variable): no mount
    elif type(sub) is not str or not sub:
        sub = None
    where = (*c.path, "volumeMounts", index)
    read_only = mount.get("readOnly") is True
    if isinstance(sub, Unknowable):
        below = rules.devices.below(volume.path, writable=not read_only)
        if below is not None:
            detail = HostPath(volume.name, volume.raw, volume.path, expr, kind=below.kind)
            names = ", ".join(sub.names)
            why = f"any path below it ({names} cannot be known at admission): {below.why}"
            _add(found, Grant("host-path", (*where, field), (c,), volume.path, detail, why, True))
        return
    path = volume.path if sub is None else joined(volume.path, sub)
    reach: Reach | None = None if sub is None else rules.devices.reach(path)
    if reach is None:
        recursive = mount.get("recursiveReadOnly") == "Enabled"
        reach = rules.devices.writable(path, read_only=read_only, recursive=recursive)
        if reach is not None and sub is None:
            field = "readOnly"
    if reach is not None:
        raw = expr if field == "subPathExpr" else sub
        detail = HostPath(volume.name, volume.raw, volume.path, raw, kind=reach.kind)
        _add(found, Grant("host-path", (*where, field), (c,), path, detail, reach.why))


def _annotations(pod: PodView, rules: AccessRules, found: _Found) -> None:
    heads = rules.annotation_heads
    for key in pod.annotations:
        if key in rules.annotation_keys:
            # CRI-O's devices annotation is one key for the whole sandbox, with no "/":
            # every container gets the devices it lists (cri-o server/container_create_linux.go
            # specSetDevices, pkg/annotations/v2 GetAnnotationValue, cri-o/cri-o f954a17e).
            path = (*pod.metadata_path, "annotations", key)
            _add(found, Grant("device-annotation", path, pod.containers, key, None))
            continue
        # `prefix/name`: the prefix is a DNS subdomain, so one lookup finds the family.
        head, _, rest = key.partition("/")
        channel = heads.get(head)
        if channel is None:
            continue
        # The NRI convention (containerd's device injector, GKE's, NVIDIA's NRI plugin):
        # `<prefix>/container.<name>` is for that container; any other key, for all.
        target = rest[len("container.") :] if rest.startswith("container.") else None
        reaches = pod.containers
        if target is not None:
            reaches = tuple(c for c in pod.containers if c.name == target)
        path = (*pod.metadata_path, "annotations", key)
        _add(found, Grant(channel, path, reaches, key, target))


def _pod_claims(pod: PodView, items: list[Any]) -> tuple[PodClaim, ...]:
    out = []
    for index, item in enumerate(items):
        item = item if _is_map(item) else {}
        name = item.get("name")
        fields = ("resourceClaimName", "resourceClaimTemplateName")
        source = next((f for f in fields if f in item), "")
        source_name = item.get(source) if source else None
        out.append(
            PodClaim(
                name if type(name) is str else f"#{index}",
                source,
                source_name if type(source_name) is str else "",
                pod.where("resourceClaims", index),
            )
        )
    return tuple(out)


def _claim_uses(
    c: ContainerRef, uses: list[Any], claims: tuple[PodClaim, ...], found: _Found
) -> None:
    for index, use in enumerate(uses):
        name = use.get("name") if _is_map(use) else None
        if type(name) is not str:
            continue
        claim = next((p for p in claims if p.name == name), None)
        path = (*c.path, "resources", "claims", index)
        _add(found, Grant("claim", path, (c,), name, claim))
