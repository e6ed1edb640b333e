"""The check's parameters: the channels' names, as a policy sets them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from webhook.core.access.gpuresources import DEVICE_PLUGIN_GPUS
from webhook.core.access.model import (
    AccessRules,
    GpuResources,
    annotation_prefix,
    gpu_resources,
)
from webhook.core.access.runtimes import (
    FEATURE_DEVICES,
)
from webhook.core.engine.check import CheckParams, ParamError, camel


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
