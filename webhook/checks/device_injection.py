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
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from webhook.core.access.envgrants import LIMIT_PREFIXES, SHARE_ENV_NAMES
from webhook.core.access.gpuresources import DEVICE_PLUGIN_GPUS
from webhook.core.access.hostpaths import CDI_WHAT, device_vendors
from webhook.core.access.model import (
    AccessRules,
    EnvFrom,
    EnvGrant,
    GpuResources,
    Grant,
    HostPath,
    PodAccess,
    Privilege,
    annotation_prefix,
    gpu_resources,
    pod_access,
)
from webhook.core.access.neutralise import exposed_containers
from webhook.core.access.runtimes import (
    CUDA_VERSION,
    FEATURE_DEVICES,
    REQUIRE_CUDA,
    vendor_of,
)
from webhook.core.access.shares import SHARE_ANNOTATIONS, asks
from webhook.core.engine.check import Check, CheckParams, ParamError, Rule, camel
from webhook.core.engine.context import Context
from webhook.core.engine.reads import Reads
from webhook.core.kit.dicts import as_list
from webhook.core.kit.paths import format_path
from webhook.core.kit.text import shown
from webhook.core.kit.violation import Violation
from webhook.core.supply.gpu_placement import may_run_on_gpu_node
from webhook.core.supply.profiles import placement_spec
from webhook.core.workloads.pods import ContainerRef, PodView
from webhook.core.workloads.targets import TargetKind

FIX = (
    "request GPUs through resources.limits (e.g. nvidia.com/gpu: 1) so the device plugin "
    "allocates them"
)
BYPASS = (
    "the container reaches GPUs the device plugin never allocated, so the scheduler can "
    "hand the same GPU to another Pod"
)
LATER = "an ephemeral container kubectl debug adds under that name would get them"
# What a host path of another vendor's GPU is replaced with (webhook.core.access.hostpaths
# device_vendors): that vendor's device plugin mounts the device nodes itself.
VENDOR_FIX = {
    ("AMD",): "request GPUs through resources.limits (amd.com/gpu: 1) so the AMD device "
    "plugin allocates them (it mounts /dev/kfd and the GPU's /dev/dri render node itself)",
    ("Intel",): "request GPUs through resources.limits (gpu.intel.com/i915: 1, or "
    "gpu.intel.com/xe: 1 on nodes with the xe driver) so the Intel GPU plugin allocates them",
    ("AMD", "Intel"): "request GPUs through resources.limits so the device plugin allocates "
    "them: amd.com/gpu: 1 for an AMD GPU, gpu.intel.com/i915: 1 (or gpu.intel.com/xe: 1) for "
    "an Intel GPU (/dev/dri alone does not say whose GPU the node has)",
}


@dataclass(frozen=True)
class Params(CheckParams):
    device_paths: tuple[str, ...] = (
        "/dev/nvidia[0-9]*",
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
        "/dev/nvidia-modeset",
        "/dev/nvidia-nvswitch*",
        "/dev/nvidia-fs*",
        "/dev/gdrdrv",  # GDRCopy: GPU memory mapped for the CPU (NVIDIA/gdrcopy)
        "/dev/kfd",
        "/dev/char/195:*",  # udev's major:minor links; 195 is the NVIDIA major
    )
    device_directories: tuple[str, ...] = (
        "/dev/nvidia-caps",
        "/dev/nvidia-caps-imex-channels",
        "/dev/dri",
        "/dev/char",  # nvidia-uvm's major is dynamic: any link there may be it
        "/dev/vfio",  # VFIO passthrough: a whole PCI device, GPUs included
        "/proc/driver/nvidia",
        # MPS: work written to the control daemon's pipes runs on the GPUs it serves. The
        # device plugin keeps them under /run/nvidia/mps (k8s-device-plugin MPS support),
        # CUDA's own default is /tmp/nvidia-mps (CUDA_MPS_PIPE_DIRECTORY).
        "/run/nvidia/mps",
        "/tmp/nvidia-mps",
    )
    # The GPU Operator's containerised driver: its root holds the node's /dev
    # (gpu-operator controllers/object_controls.go DefaultDriverInstallDir and
    # internal/driver/root.go GetDevRoot, NVIDIA/gpu-operator@a22dbf67).
    driver_roots: tuple[str, ...] = ("/run/nvidia/driver",)
    # CRI sockets: kubeadm's known ones (cmd/kubeadm/app/constants/constants_unix.go,
    # kubernetes/kubernetes@d68e3f8f), docker's, and k3s's (pkg/agent/config/config_linux.go,
    # k3s-io/k3s@45860105). /var/run is /run.
    runtime_sockets: tuple[str, ...] = (
        "/run/containerd/containerd.sock",
        "/run/crio/crio.sock",
        "/run/cri-dockerd.sock",
        "/run/docker.sock",
        "/run/k3s/containerd/containerd.sock",
        "/run/k3s/cri-dockerd/cri-dockerd.sock",
    )
    # The kubelet's device-plugin directory (k8s.io/kubelet deviceplugin/v1beta1
    # constants.go DevicePluginPath, kubernetes/kubernetes@a39f502f) and pod-resources one
    # (kubelet getPodResourcesDir).
    kubelet_socket_dirs: tuple[str, ...] = (
        "/var/lib/kubelet/device-plugins",
        "/var/lib/kubelet/pod-resources",
    )
    # Judged only where mounted writable: CDI spec directories (container-device-interface
    # pkg/cdi/spec-dirs.go DefaultStaticDir, DefaultDynamicDir,
    # cncf-tags/container-device-interface@05ae4b5b) and sysfs's PCI devices.
    cdi_spec_dirs: tuple[str, ...] = ("/etc/cdi", "/var/run/cdi")
    sysfs_device_dirs: tuple[str, ...] = ("/sys/bus/pci", "/sys/devices", "/sys/class")
    device_list_mount_dir: str = "/var/run/nvidia-container-devices"
    env_vars: tuple[str, ...] = (
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_MIG_CONFIG_DEVICES",
        "NVIDIA_MIG_MONITOR_DEVICES",
        "NVIDIA_IMEX_CHANNELS",
        "AMD_VISIBLE_DEVICES",
    )
    # AMD's runtime reads any DOCKER_RESOURCE_* as a device list (ROCm/container-toolkit
    # internal/oci/oci.go getAMDEnv).
    env_prefixes: tuple[str, ...] = ("DOCKER_RESOURCE_",)
    feature_env_vars: tuple[str, ...] = tuple(FEATURE_DEVICES)
    legacy_image_env: bool = True
    safe_env_values: tuple[str, ...] = ("none", "void", "")
    gpu_resources: tuple[str, ...] = DEVICE_PLUGIN_GPUS
    cdi_annotation_prefixes: tuple[str, ...] = (
        "cdi.k8s.io/",
        "nvidia.cdi.k8s.io/",
        "cdi-devices.noderesource.dev/",
        "cdi-devices.nri.io/",
    )
    device_annotation_prefixes: tuple[str, ...] = (
        "devices.noderesource.dev/",
        "devices.nri.io/",
        "mounts.noderesource.dev/",
        "mounts.nri.io/",
        "devices.gke.io/",
    )
    # Whole keys: CRI-O's devices annotation (V2 and its V1 spelling) has no "/".
    device_annotation_keys: tuple[str, ...] = ("devices.crio.io", "io.kubernetes.cri-o.Devices")
    deny_privileged: bool = True
    # A container that asks for no GPU, leaves NVIDIA_VISIBLE_DEVICES to its image and may
    # run on a GPU node of a cluster whose toolkit takes device lists from unprivileged
    # containers' env (image-visible-devices): deny, warn, or off.
    image_env_action: Literal["deny", "warn", "off"] = "warn"
    # Taint keys GPU nodes carry by convention, read where the cluster profile names no
    # taint every GPU node carries: the device plugin's and GKE's nvidia.com/gpu, AMD's
    # amd.com/gpu, AKS's sku=gpu (docs/runtime-access.md, "The image's env").
    gpu_taint_keys: tuple[str, ...] = ("nvidia.com/gpu", "amd.com/gpu", "sku")

    def __post_init__(self) -> None:
        for name in ("cdi_annotation_prefixes", "device_annotation_prefixes"):
            for prefix in getattr(self, name):
                try:
                    annotation_prefix(prefix)
                except ValueError as exc:  # it names the prefix
                    raise ParamError(camel(name), str(exc)) from None

    @cached_property
    def rules(self) -> AccessRules:
        return self.access_rules(gpus=gpu_resources(include=self.gpu_resources))

    def access_rules(self, *, gpus: GpuResources) -> AccessRules:
        """The access model's rules from these channels, with `gpus` as the GPU names
        (diagnose takes them from the resource-names policy)."""
        return AccessRules.of(
            gpus=gpus,
            device_paths=self.device_paths,
            device_directories=self.device_directories,
            device_list_dir=self.device_list_mount_dir,
            env_vars=self.env_vars,
            safe_values=self.safe_env_values,
            cdi_prefixes=self.cdi_annotation_prefixes,
            device_prefixes=self.device_annotation_prefixes,
            host={
                "driver_roots": self.driver_roots,
                "runtime_sockets": self.runtime_sockets,
                "kubelet_socket_dirs": self.kubelet_socket_dirs,
                "cdi_spec_dirs": self.cdi_spec_dirs,
                "sysfs_device_dirs": self.sysfs_device_dirs,
            },
            env_prefixes=self.env_prefixes,
            feature_env_vars=self.feature_env_vars,
            legacy_images=self.legacy_image_env,
            device_annotation_keys=self.device_annotation_keys,
        )


def _text(value: object, limit: int = 100) -> str:
    """A user value for a message: cut before `shown` walks it (a path may be 1 MB)."""
    return shown(value[: limit + 1] if isinstance(value, str) else value, limit)


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


def _host_path(g: Grant, access: PodAccess, params: Params) -> Violation:
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
            f'{c.label} mounts hostPath volume "{_text(detail.volume)}" (host path '
            f'"{_text(detail.volume_path)}") with {field} "{_text(detail.sub_path)}" '
            f'({format_path(g.path)}), which is host path "{_text(g.name)}", {g.why}: '
            f"{risk}. Remove the {field} (or the volume) {fix}.",
        )
    into = (
        f"mounted by {', '.join(c.label for c in g.reaches)}"
        if g.reaches
        else "not mounted yet (any container added later, e.g. by kubectl debug, can mount it)"
    )
    origin = "" if g.name == detail.raw else f' (normalised from "{_text(detail.raw)}")'
    return Violation(
        rule,
        g.path,
        f'hostPath volume "{_text(detail.volume)}" ({format_path(g.path)}) exposes host path '
        f'"{_text(g.name)}"{origin}, {g.why}, {into}: {risk}. Remove the hostPath volume '
        f"{fix}.",
    )


def _unknowable_sub_path(g: Grant, detail: HostPath, rule: str, risk: str) -> Violation:
    (c,) = g.reaches
    return Violation(
        rule,
        g.path,
        f'{c.label} mounts hostPath volume "{_text(detail.volume)}" (host path '
        f'"{_text(detail.volume_path)}") with subPathExpr "{_text(detail.sub_path)}" '
        f"({format_path(g.path)}), which the kubelet expands on the node to {_text(g.why, 300)}"
        f" lie below: {risk}. Use a literal subPath, or take the variables from literal "
        f"env values.",
    )


def _writable_config(g: Grant, detail: HostPath, rule: str) -> Violation:
    (c,) = g.reaches
    risk = HOST_RISKS["cdi" if CDI_WHAT in g.why else "sysfs"]
    field = str(g.path[-1])
    via = (
        f' with {field} "{_text(detail.sub_path)}", which is host path "{_text(g.name)}"'
        if field != "readOnly"
        else ""
    )
    return Violation(
        rule,
        g.path,
        f'{c.label} mounts hostPath volume "{_text(detail.volume)}" (host path '
        f'"{_text(detail.volume_path)}"){via} writable ({format_path(g.path)}), {g.why}: '
        f"{risk}. Mount it readOnly: true (with recursiveReadOnly: Enabled when it spans "
        f"/sys or /run), or remove it.",
    )


def _device_list_mount(g: Grant, access: PodAccess, params: Params) -> Violation:
    (c,) = g.reaches
    return Violation(
        "device-list-volume-mount",
        g.path,
        f'{c.label} mounts volume "{_text(g.value)}" at {_text(g.name)} ({format_path(g.path)}): '
        f"the NVIDIA container toolkit reads {params.rules.device_list_dir} as a list of GPUs "
        f"to inject, bypassing the device plugin. Remove the mount and {FIX}.",
    )


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
            f'sets {e.name}="{_text(s.written, 40)}", which cannot be proven safe at admission '
            f"({_text(s.why, 120)})"
        )
    elif s.written is not None:
        what = (
            f'sets {e.name}="{_text(s.written, 40)}", which the kubelet expands to '
            f'"{_text(s.value, 40)}"'
        )
    else:
        what = f'sets {e.name}="{_text(s.value, 40)}"'
    return f"{c.label} {what} ({format_path(g.path)})"


def _env(g: Grant, access: PodAccess, params: Params) -> Violation:
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


def _feature_env(g: Grant, access: PodAccess, params: Params) -> Violation:
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


def _legacy_env(g: Grant, access: PodAccess, params: Params) -> Violation:
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


def _share_env(g: Grant, access: PodAccess, params: Params) -> Violation:
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


def _env_from(g: Grant, access: PodAccess, params: Params) -> Violation:
    (c,) = g.reaches
    source: EnvFrom = g.value
    prefix = f' with prefix "{_text(source.prefix, 40)}"' if source.prefix else ""
    where = (
        f'{c.label} takes variables from {source.kind} "{_text(source.source, 60)}"{prefix} '
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


def _targets(g: Grant, *, everyone: str) -> str:
    if g.value is None:
        return everyone
    if g.reaches:
        return ", ".join(c.label for c in g.reaches)
    return f'container "{_text(g.value, 60)}", which the pod does not have yet ({LATER})'


def _cdi_annotation(g: Grant, access: PodAccess, params: Params) -> Violation:
    into = "" if g.value is None else f" into {_targets(g, everyone='')}"
    return Violation(
        "cdi-annotation",
        g.path,
        f'annotation "{_text(g.name, 80)}" ({format_path(g.path)}) asks the container '
        f"runtime to inject CDI devices{into} without a device-plugin allocation. "
        f"Remove the annotation and {FIX}.",
    )


def _device_annotation(g: Grant, access: PodAccess, params: Params) -> Violation:
    targets = _targets(g, everyone="every container of the pod")
    if g.name in params.device_annotation_keys:
        return Violation(
            "device-annotation",
            g.path,
            f'annotation "{_text(g.name, 80)}" ({format_path(g.path)}) asks CRI-O to add the '
            f"host devices it lists to {targets} (where the runtime handler allows the "
            f"annotation), outside the device plugin's allocation. Remove the annotation and "
            f"{FIX}.",
        )
    return Violation(
        "device-annotation",
        g.path,
        f'annotation "{_text(g.name, 80)}" ({format_path(g.path)}) asks an NRI device '
        f"injector on the node to add the host devices or mounts it lists to {targets}, "
        f"outside the device plugin's allocation. Remove the annotation and {FIX}.",
    )


PRIVILEGE_RULES = {
    "privileged": "privileged",
    "sys-admin": "sys-admin-unconfined",
    "host-pid": "host-pid-capabilities",
    "host-process": "host-process",
}
EVERY_GPU = "which reaches every GPU of the node like privileged mode, whatever it requests"


def _privileged(g: Grant, access: PodAccess, params: Params, context: Context) -> Violation | None:
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
        f"{c.label} adds capability {_text(privilege.capability, 40)} "
        f"({format_path(g.path)}) and runs with {' and '.join(unconfined)}: it can mount "
        f"filesystems and lift its device cgroup, {EVERY_GPU}. Drop the capability, or "
        f"confine it with seccompProfile and appArmorProfile type RuntimeDefault, and {FIX}."
    )


def _host_pid(g: Grant, privilege: Privilege, context: Context) -> str:
    (c,) = g.reaches
    return (
        f"{c.label} adds capability {_text(privilege.capability, 40)} "
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


_Report = Callable[[Grant, PodAccess, Params], Violation | None]
REPORTS: dict[str, _Report] = {
    "host-path": _host_path,
    "device-list-mount": _device_list_mount,
    "env": _env,
    "feature-env": _feature_env,
    "legacy-env": _legacy_env,
    "env-from": _env_from,
    "cdi-annotation": _cdi_annotation,
    "device-annotation": _device_annotation,
    # "privileged": judged with the context below (its exception reads the placement).
    "share-env": _share_env,
    # "claim": DRA claims are recorded by the access model, judged by a later check.
}


def run(pod: PodView, *, context: Context, params: Params) -> Iterable[Violation]:
    access = pod_access(pod, rules=params.rules)
    image = params.image_env_action != "off" and (
        context.profile.container_toolkit.accept_envvar_unprivileged
    )
    if not access.grants:
        return _image_env(pod, access, context, params) if image else ()
    found = _image_env(pod, access, context, params) if image else []
    reaches: str | None = ""  # why it may reach a GPU node: asked at the first privileged grant
    for grant in access.grants:  # by channel: the order of the rules below
        violation: Violation | None = None
        if grant.channel == "privileged":
            if reaches == "":
                reaches = _reaches_gpu_node(pod, context, params)
            if reaches is not None:
                violation = _privileged(grant, access, params, context)
        else:
            report = REPORTS.get(grant.channel)
            violation = report(grant, access, params) if report is not None else None
        if violation is not None:
            found.append(violation)
    return found


# Grants that already report what the container's env does with the device list.
_ENV_CHANNELS = frozenset({"env", "env-from", "legacy-env", "privileged"})


def _image_env(
    pod: PodView, access: PodAccess, context: Context, params: Params
) -> list[Violation]:
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
        return _reaches_gpu_node(pod, context, params)
    raw = pod.spec
    if not pod.tolerations_added and not (
        "nodeName" in raw or "runtimeClassName" in raw or "tolerations" in raw
    ):
        return None  # nearly every Pod: nothing asks for a GPU node
    spec = placement_spec(pod)
    if spec.get("nodeName"):
        return _reaches_gpu_node(pod, context, params)
    runtime = spec.get("runtimeClassName")
    if type(runtime) is str and runtime:
        return f'it runs under RuntimeClass "{_text(runtime, 60)}"'
    keys = params.gpu_taint_keys
    for t in as_list(spec.get("tolerations")):
        key = t.get("key") if type(t) is dict else None
        if not key:
            if type(t) is dict and t.get("operator") == "Exists":
                return "it tolerates every taint"
        elif key in keys:
            return f"it tolerates {_text(key, 60)}, a taint GPU nodes carry"
    return None


def _reaches_gpu_node(pod: PodView, context: Context, params: Params) -> str | None:
    """Why the pod may run on a GPU node; None when it provably never can (a privileged
    TPU job kept off GPU nodes by a taint every GPU node carries, a Pod pinned by
    nodeName to a known node without GPUs)."""
    return may_run_on_gpu_node(
        pod, inventory=context.inventory, profile=context.profile, is_gpu=params.rules.gpus.is_gpu
    )


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
