"""Host paths that reach GPU devices: normalisation, device nodes and their aliases.

A hostPath is resolved on the node by the kubelet, which runs as root with every
capability: whatever the path names through symlinks and /proc magic links is what the
container gets, with none of the checks the kernel would apply to the container itself.
Everything here is linear in the path's length and caches nothing keyed by user text
(a hostile manifest may carry a path of a megabyte).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, NamedTuple

from webhook.core.kit.text import glob_matcher, listing

_SLASHES = re.compile(r"/{2,}")

# /proc/<pid>/root, .../cwd and .../fd/<n>, .../map_files/<range> are magic links: the
# kubelet follows them as itself (root on the host), so the mount is the host's root, a
# host process's working directory, or a file a host process holds open (CUDA processes
# hold /dev/nvidia* open and mapped). `self` and `thread-self` are the kubelet itself;
# `task/<tid>` repeats the same links per thread. Linux proc(5), "/proc/pid/root".
# Pids, thread ids and fds have at most 10 digits, map_files names are two hex addresses
# (procfs rejects leading zeros and anything longer): the match and the text it puts in a
# message stay short whatever the path.
_HOST_PROCESS_LINK = re.compile(
    r"/proc/(?:[0-9]{1,10}|self|thread-self)(?:/task/[0-9]{1,10})?/"
    r"(root|cwd|fd/[0-9]{1,10}|map_files/[0-9a-fA-F]{1,16}-[0-9a-fA-F]{1,16})(?=/|\Z)"
)
_LINK_MEANS = {
    "root": "a path through {}, the host's root filesystem as a host process sees it, GPU "
    "device nodes included",
    "cwd": "a path through {}, a host process's working directory, which can be the host's root",
    "fd": "a path through {}, a file a host process holds open, which can be a GPU device node",
    "map_files": "a path through {}, a file a host process has mapped, which can be a GPU "
    "device node",
}


def normalise(path: str) -> str:
    """`//dev/./nvidia0/` -> `/dev/nvidia0`; `..` cannot climb above `/`. Linear, uncached."""
    if path[:1] == "/" and "//" not in path and "/." not in path and path[-1:] != "/":
        return path  # nearly every path is already normal: no copy
    return posixpath.normpath(_SLASHES.sub("/", "/" + path))


def joined(base: str, sub: str) -> str:
    """A volume's host path with a mount's subPath (relative; the kubelet refuses `..`)."""
    return normalise(base + "/" + sub)


# The kinds of host path a pod must not reach, each its own rule of device-injection.
HostKind = Literal["device", "runtime-socket", "kubelet-socket", "device-config"]


CDI_WHAT = "the CDI spec directory"


class Reach(NamedTuple):
    """What a host path reaches: its kind and, in a message's words, how."""

    kind: HostKind
    why: str


def canonical(path: str) -> str:
    """A normalised host path with /var/run read as /run: distributions link `/var/run ->
    ../run` (systemd tmpfiles.d/var.conf.in, systemd/systemd@8037751e) and the kubelet,
    root on the node, follows the link, so both names are judged alike."""
    if path == "/var/run" or path.startswith("/var/run/"):
        return path[4:]
    return path


# Filesystems mounted on their own below `/` (systemd src/shared/mount-setup.c: sysfs on
# /sys, tmpfs on /run, devtmpfs on /dev, procfs on /proc). A readOnly mount is read-only
# only for its own filesystem: the kubelet hands the runtime `readonly` and, for a
# recursive one, `recursive_read_only` (pkg/kubelet/kubelet_pods.go makeMounts,
# kubernetes/kubernetes@001a80e9), so a readOnly `/` leaves /sys and /run writable.
_OWN_FILESYSTEMS = ("/sys", "/run", "/dev", "/proc")
_PROC_PID = re.compile(r"/proc(?:/(?:[0-9]{1,10}|self|thread-self)(?:/task(?:/[0-9]{1,10})?)?)?")


def filesystem_of(path: str) -> str:
    """The mount point of the filesystem that holds a canonical host path."""
    for top in _OWN_FILESYSTEMS:
        if path == top or path.startswith(top + "/"):
            return top
    return "/"


def _under(path: str, top: str) -> bool:
    return path == top or top == "/" or path.startswith(top + "/")


def _within(path: str, paths: tuple[str, ...]) -> str | None:
    return next((p for p in paths if _under(path, p)), None)


def _holding(path: str, paths: tuple[str, ...]) -> list[str]:
    prefix = "/" if path == "/" else path + "/"
    return [p for p in paths if p.startswith(prefix)]


@dataclass(frozen=True, slots=True, eq=False)
class DevicePaths:
    """Which host paths reach GPUs or the node: built once per policy, matched per hostPath.
    Every path here is canonical (`canonical`)."""

    paths: tuple[str, ...]  # globs of device nodes
    directories: tuple[str, ...]  # the directory and everything below it
    is_device: Callable[[str], bool]
    dev_targets: tuple[str, ...]  # the patterns under /dev: their parents reach them
    driver_roots: tuple[str, ...] = ()  # a containerised driver's root: R/dev is /dev
    root_targets: tuple[str, ...] = ()  # dev_targets under each driver root
    runtime_sockets: tuple[str, ...] = ()
    kubelet_socket_dirs: tuple[str, ...] = ()
    config_dirs: tuple[tuple[str, str], ...] = ()  # (directory, what it is)

    @classmethod
    def of(
        cls,
        *,
        paths: tuple[str, ...],
        directories: tuple[str, ...],
        driver_roots: tuple[str, ...] = (),
        runtime_sockets: tuple[str, ...] = (),
        kubelet_socket_dirs: tuple[str, ...] = (),
        cdi_spec_dirs: tuple[str, ...] = (),
        sysfs_device_dirs: tuple[str, ...] = (),
    ) -> DevicePaths:
        def canon(items: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(dict.fromkeys(canonical(normalise(p)) for p in items))

        dirs = canon(directories)
        targets = tuple(t for t in (*paths, *dirs) if t.startswith("/dev/"))
        roots = tuple(r for r in canon(driver_roots) if r != "/")
        configs = (
            *((d, CDI_WHAT) for d in canon(cdi_spec_dirs)),
            *((d, "the sysfs device tree") for d in canon(sysfs_device_dirs)),
        )
        return cls(
            paths,
            dirs,
            glob_matcher(paths),
            targets,
            roots,
            tuple(r + t for r in roots for t in targets),
            canon(runtime_sockets),
            canon(kubelet_socket_dirs),
            configs,
        )

    def reason(self, path: str) -> str | None:
        """Why a normalised host path reaches GPU devices or the node, or None."""
        found = self.reach(path)
        return found.why if found is not None else None

    def reach(self, path: str) -> Reach | None:
        """What a normalised host path reaches, whether mounted read-only or not."""
        path = canonical(path)
        why = self._device(path)
        if why is not None:
            return Reach("device", why)
        for root in self.driver_roots:
            if path.startswith(root + "/dev") and _under(path, root + "/dev"):
                inner = self._device(path[len(root) :])
                if inner is not None:
                    return Reach("device", f"{inner}: driver root {root} holds the node's devices")
        below = _holding(path, self.root_targets)
        if below:
            return Reach("device", f"a parent of GPU device paths ({listing(below)})")
        return self._socket(path)

    def _device(self, path: str) -> str | None:
        link = _HOST_PROCESS_LINK.match(path)
        if link is not None:
            kind = link.group(1).split("/", 1)[0]
            return _LINK_MEANS[kind].format(link.group(0))
        if self.is_device(path):
            return "a GPU device node"
        for directory in self.directories:
            if path == directory:
                return f"GPU device path {directory}"
            if path.startswith(directory) and (directory == "/" or path[len(directory)] == "/"):
                return f"inside GPU device directory {directory}"
        return self._parent(path)

    def _parent(self, path: str) -> str | None:
        # A parent reaches the device nodes below it. Directories outside /dev (the
        # driver's /proc/driver/nvidia) hold no device nodes, so /proc stays allowed: see
        # docs/policies.md for why a host /proc mount is no way to the host's root.
        if path != "/" and not path.startswith("/dev"):
            return None
        below = _holding(path, self.dev_targets)
        return f"a parent of GPU device paths ({listing(below)})" if below else None

    def _socket(self, path: str) -> Reach | None:
        if path in self.runtime_sockets:
            return Reach("runtime-socket", f"the container runtime socket {path}")
        below = _holding(path, self.runtime_sockets)
        if below:
            return Reach(
                "runtime-socket",
                f"a directory holding container runtime sockets ({listing(below)})",
            )
        inside = _within(path, self.kubelet_socket_dirs)
        if inside is not None:
            where = "" if path == inside else "inside "
            return Reach("kubelet-socket", f"{where}the kubelet's socket directory {inside}")
        below = _holding(path, self.kubelet_socket_dirs)
        if below:
            return Reach(
                "kubelet-socket",
                f"a directory holding the kubelet's socket directories ({listing(below)})",
            )
        return None

    def writable(self, path: str, *, read_only: bool, recursive: bool) -> Reach | None:
        """What a mount of a normalised host path reaches through being writable: a
        device-configuration directory (CDI specs, sysfs PCI devices), the mount being
        writable there (not readOnly, or readOnly but not recursively across the
        filesystem that holds it)."""
        path = canonical(path)
        for directory, what in self.config_dirs:
            inside = _under(path, directory)
            if not inside and not directory.startswith(path + "/") and path != "/":
                continue
            if read_only and (recursive or _under(path, filesystem_of(directory))):
                continue
            if inside:
                where = "" if path == directory else "inside "
                return Reach("device-config", f"{where}{what} {directory}")
            return Reach("device-config", f"a parent of {what} {directory}")
        return None

    def below(self, path: str, *, writable: bool) -> Reach | None:
        """What lies strictly below a host path that a sub path might reach (for a sub
        path admission cannot know): the first kind found, and every target in words."""
        path = canonical(path)
        prefix = "/" if path == "/" else path + "/"
        found: list[tuple[HostKind, str]] = [
            ("device", t)
            for t in (*self.paths, *self.directories, *self.root_targets)
            if t.startswith(prefix)
        ]
        if _PROC_PID.fullmatch(path):
            found.append(("device", "/proc/<pid>/root"))
        found += [("runtime-socket", s) for s in self.runtime_sockets if s.startswith(prefix)]
        found += [("kubelet-socket", s) for s in self.kubelet_socket_dirs if s.startswith(prefix)]
        if writable:
            found += [("device-config", d) for d, _ in self.config_dirs if d.startswith(prefix)]
        if not found:
            return None
        return Reach(found[0][0], listing(t for _, t in found))


Vendor = Literal["NVIDIA", "AMD", "Intel"]


def device_vendors(path: str) -> tuple[Vendor, ...]:
    """Whose GPU a normalised device path is, () when it is no one's in particular (a
    parent such as /dev, an alias under /dev/char). /dev/kfd is AMD's compute interface,
    which only AMD GPUs have; /dev/dri holds the render nodes of AMD and Intel GPUs
    alike (ROCm/k8s-device-plugin internal/pkg/plugin/plugin.go mounts /dev/kfd and
    /dev/dri/renderD<N>; the Intel GPU plugin hands out /dev/dri cards and render nodes)."""
    if path == "/dev/kfd":
        return ("AMD",)
    if path == "/dev/dri" or path.startswith("/dev/dri/"):
        return ("AMD", "Intel")
    if path.startswith(("/dev/nvidia", "/proc/driver/nvidia", "/dev/char/195:")):
        return ("NVIDIA",)
    return ()
