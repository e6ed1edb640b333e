"""Grants from a container's env, decided as the runtimes decide them.

The env is the kubelet's (webhook.core.access.container_env: precedence, expansion,
valueFrom); what a value hands out is the runtime's (webhook.core.access.runtimes). Four
kinds of grant come from it:

- `env`: a device-list variable (NVIDIA_VISIBLE_DEVICES and its siblings,
  AMD_VISIBLE_DEVICES, DOCKER_RESOURCE_*) whose final value names devices, or cannot be
  known (valueFrom, a reference to envFrom or a service link);
- `feature-env`: NVIDIA_GDS, NVIDIA_MOFED, NVIDIA_GDRCOPY, NVIDIA_NVSWITCH set to
  `enabled` (or to what admission cannot see);
- `legacy-env`: a container that requests no NVIDIA GPU and leaves NVIDIA_VISIBLE_DEVICES
  to the image, while its env makes the image "legacy" (CUDA_VERSION set,
  NVIDIA_REQUIRE_CUDA empty): the toolkit then gives it every GPU;
- `share-env`: a HAMi or Volcano vGPU share whose container overrides the limits the
  device plugin passes to HAMi-core, or turns the limiter off (CUDA_DISABLE_CONTROL).

KAI's own webhook sets NVIDIA_VISIBLE_DEVICES on its fraction container from the ConfigMap
its binder fills (NVIDIA/KAI-Scheduler, commit 72de64fc8eca10fa8cca26a20156178f3edbe092,
pkg/binder/common/gpu_access.go AddGPUSharingEnvVars, gpusharingconfigmap/config_map.go):
that entry, and its `-evar` envFrom, are the scheduler's, not a way around it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from webhook.core.access.container_env import ContainerEnv, EnvValue, container_env
from webhook.core.access.grants import Channel, Grant
from webhook.core.access.runtimes import (
    AMD_PREFIX,
    CUDA_VERSION,
    FEATURE_ON,
    REQUIRE_CUDA,
    devices_named,
)
from webhook.core.access.shares import Share
from webhook.core.workloads.pods import ContainerRef, PodView

# HAMi-core reads these from the environment (Project-HAMi/HAMi-core, commit
# 8f3a89c67b037d8fdfe6c4cd4d8c4f0cd6504811, src/multiprocess/multiprocess_memory_limit.c:
# do_init_device_memory_limits, do_init_device_sm_limits, set_env_utilization_switch,
# MULTIPROCESS_SHARED_REGION_CACHE_ENV); the device plugin sets them in its Allocate
# response (Project-HAMi/HAMi 4707fb02c91c545bc7343ce26dba4c32919f9a3e
# pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go; Project-HAMi/
# volcano-vgpu-device-plugin 4fb76ba16a1744b161e9e2fbfc0b9ec3a546dd9b pkg/plugin/server.go),
# and the kubelet puts the pod's own value after it: the pod's wins.
LIMIT_NAMES = frozenset(
    {
        "CUDA_DEVICE_MEMORY_LIMIT",
        "CUDA_DEVICE_SM_LIMIT",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE",
        "GPU_CORE_UTILIZATION_POLICY",
    }
)
LIMIT_PREFIXES = ("CUDA_DEVICE_MEMORY_LIMIT_", "CUDA_DEVICE_SM_LIMIT_")  # per device: _<n>
DISABLE_CONTROL = "CUDA_DISABLE_CONTROL"
SHARE_ENV_NAMES = LIMIT_NAMES | {DISABLE_CONTROL}
LIMITED = frozenset({"HAMi", "Volcano vGPU"})  # the share systems that use HAMi-core
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})  # strconv.ParseBool
KAI_CONFIGMAP = "runai/shared-gpu-configmap"
_KAI_KEY = "NVIDIA_VISIBLE_DEVICES"


class EnvGrant(NamedTuple):
    """What a variable is set to, for a message: the variable and its EnvValue."""

    name: str
    setting: EnvValue


class EnvNames(NamedTuple):
    """A policy's variable names, as the model reads them."""

    device_lists: frozenset[str]
    prefixes: tuple[str, ...]  # device-list variables by prefix (AMD's DOCKER_RESOURCE_)
    features: frozenset[str]
    legacy: bool  # judge the legacy-image rule
    is_safe: Callable[[str], bool]  # a policy's extra safe values (none, void, "")
    every_name: frozenset[str]  # all of the names above, and the share and legacy ones
    every_prefix: tuple[str, ...]

    @classmethod
    def of(
        cls,
        *,
        device_lists: frozenset[str],
        prefixes: tuple[str, ...],
        features: frozenset[str],
        legacy: bool,
        is_safe: Callable[[str], bool],
    ) -> EnvNames:
        legacy_names = frozenset({CUDA_VERSION, REQUIRE_CUDA}) if legacy else frozenset()
        every = device_lists | features | SHARE_ENV_NAMES | legacy_names
        return cls(
            device_lists, prefixes, features, legacy, is_safe, every, prefixes + LIMIT_PREFIXES
        )


def watched(env: list[Any], names: EnvNames) -> list[str]:
    """The names in the env the model reads (one lookup per entry; most envs: none)."""
    every, prefixes = names.every_name, names.every_prefix
    found: list[str] = []
    for item in env:
        name = item.get("name") if type(item) is dict or isinstance(item, Mapping) else None
        if type(name) is not str or name in found:
            continue
        if name in every or name.startswith(prefixes):
            found.append(name)
    return found


def env_grants(
    pod: PodView,
    c: ContainerRef,
    names: EnvNames,
    present: list[str],
    *,
    nvidia_request: bool,
    shares: tuple[Share, ...],
) -> list[Grant]:
    """Every grant the container's env makes through the `present` watched names."""
    env = container_env(pod, c)
    kai = _kai_entries(pod, c, shares)
    found: list[Grant] = []
    for name in present:
        if name in names.device_lists or (names.prefixes and name.startswith(names.prefixes)):
            setting = env.get(name)
            if not _safe(name, setting, names) and setting.entry not in kai:
                found.append(_grant("env", c, name, setting))
        elif name in names.features:
            setting = env.get(name)
            if _feature_on(setting):
                found.append(_grant("feature-env", c, name, setting))
    if names.legacy and not nvidia_request:
        legacy = _legacy(env, names)
        if legacy is not None:
            found.append(_grant("legacy-env", c, *legacy))
    share = next((s for s in shares if s.container is c and s.mechanism in LIMITED), None)
    if share is not None:
        found.extend(_share_grants(c, env, share, present))
    found.sort(key=lambda g: g.path[-1])  # in the order of the env list
    return found


def _grant(channel: Channel, c: ContainerRef, name: str, setting: EnvValue) -> Grant:
    path = (*c.path, "env", setting.entry if setting.entry is not None else 0)
    return Grant(channel, path, (c,), name, EnvGrant(name, setting))


def _safe(name: str, setting: EnvValue, names: EnvNames) -> bool:
    if setting.state != "set" or setting.value is None:
        return False
    return names.is_safe(setting.value) or not devices_named(name, setting.value)


def _feature_on(setting: EnvValue) -> bool:
    return (setting.state == "unknowable" and setting.index is not None) or (
        setting.state == "set" and setting.value == FEATURE_ON
    )


def _legacy(env: ContainerEnv, names: EnvNames) -> tuple[str, EnvValue] | None:
    """The entry that makes the image legacy while no device list is set, if any."""
    if env.get("NVIDIA_VISIBLE_DEVICES").state != "unset":
        return None  # the device list is set (reported, or safe): the legacy rule is off
    version, require = env.set_by_env(CUDA_VERSION), env.set_by_env(REQUIRE_CUDA)
    if require is not None and not (require.state == "set" and require.value == ""):
        return None  # a requirement the pod sets (or cannot show) keeps the image modern
    if version is not None and (version.state == "unknowable" or version.value):
        return CUDA_VERSION, version
    if require is not None:
        return REQUIRE_CUDA, require  # "" clears the image's own requirement
    return None


def _share_grants(
    c: ContainerRef, env: ContainerEnv, share: Share, present: list[str]
) -> list[Grant]:
    found = []
    for name in present:
        if name not in SHARE_ENV_NAMES and not name.startswith(LIMIT_PREFIXES):
            continue
        setting = env.get(name)
        if name == DISABLE_CONTROL:
            if _disables(c, setting, share):
                found.append(_grant("share-env", c, name, setting))
        elif name in LIMIT_NAMES or name.startswith(LIMIT_PREFIXES):
            policy = name == "GPU_CORE_UTILIZATION_POLICY" and setting.state == "set"
            if policy and setting.value not in ("disable", "DISABLE"):
                continue  # only "disable" turns the core limit off
            found.append(_grant("share-env", c, name, setting))
    return found


def _disables(c: ContainerRef, setting: EnvValue, share: Share) -> bool:
    """Whether the device plugin leaves HAMi-core out: it reads the pod's env entries as
    written (not the kubelet's result): HAMi's any entry that strconv.ParseBool reads as
    true, Volcano's any entry of that name at all."""
    if share.mechanism == "Volcano vGPU":
        return True
    env = c.spec.get("env")
    return any(
        isinstance(e, Mapping) and e.get("name") == DISABLE_CONTROL and e.get("value") in _GO_TRUE
        for e in (env if type(env) is list else ())
    )


def _kai_entries(pod: PodView, c: ContainerRef, shares: tuple[Share, ...]) -> frozenset[int]:
    """The env entry KAI's webhook adds to its fraction container, if this is it."""
    if not any(s.container is c and s.mechanism == "KAI scheduler" for s in shares):
        return frozenset()
    prefix = pod.annotations.get(KAI_CONFIGMAP)
    if type(prefix) is not str:
        return frozenset()
    wanted = f"{prefix}-{'i' if c.field == 'initContainers' else ''}{c.position}"
    env = c.spec.get("env")
    out = set()
    for index, item in enumerate(env if type(env) is list else ()):
        ref = _config_map_key(item)
        if ref is not None and ref == (wanted, _KAI_KEY) and item.get("name") == _KAI_KEY:
            out.add(index)
    return frozenset(out)


def kai_env_from(
    pod: PodView, c: ContainerRef, source: Mapping[str, Any], shares: tuple[Share, ...]
) -> bool:
    """Whether an envFrom source is KAI's `<configmap>-evar` on its fraction container."""
    if not any(s.container is c and s.mechanism == "KAI scheduler" for s in shares):
        return False
    prefix = pod.annotations.get(KAI_CONFIGMAP)
    ref = source.get("configMapRef")
    if type(prefix) is not str or not isinstance(ref, Mapping) or source.get("prefix"):
        return False
    wanted = f"{prefix}-{'i' if c.field == 'initContainers' else ''}{c.position}-evar"
    return ref.get("name") == wanted


def _config_map_key(item: Any) -> tuple[Any, Any] | None:
    source = item.get("valueFrom") if isinstance(item, Mapping) else None
    ref = source.get("configMapKeyRef") if isinstance(source, Mapping) else None
    return (ref.get("name"), ref.get("key")) if isinstance(ref, Mapping) else None


__all__ = ["AMD_PREFIX", "EnvGrant", "EnvNames", "env_grants", "kai_env_from", "watched"]
