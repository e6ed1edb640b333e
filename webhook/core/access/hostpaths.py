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
from typing import Literal

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


@dataclass(frozen=True, slots=True, eq=False)
class DevicePaths:
    """Which host paths are GPU access: built once per policy, matched per hostPath."""

    paths: tuple[str, ...]  # globs of device nodes
    directories: tuple[str, ...]  # the directory and everything below it
    is_device: Callable[[str], bool]
    dev_targets: tuple[str, ...]  # the patterns under /dev: their parents reach them

    @classmethod
    def of(cls, *, paths: tuple[str, ...], directories: tuple[str, ...]) -> DevicePaths:
        dirs = tuple(normalise(d) for d in directories)
        targets = tuple(t for t in (*paths, *dirs) if t.startswith("/dev/"))
        return cls(paths, dirs, glob_matcher(paths), targets)

    def reason(self, path: str) -> str | None:
        """Why a normalised host path reaches GPU devices, or None."""
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
        prefix = "/" if path == "/" else path + "/"
        below = [t for t in self.dev_targets if t.startswith(prefix)]
        return f"a parent of GPU device paths ({listing(below)})" if below else None


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
