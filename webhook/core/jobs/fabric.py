"""NCCL against the fabric: what a rank's Pod asks of the network, and what NCCL will use.

A rank that asks for an RDMA device and then tells NCCL to use sockets, or names an
interface its Pod does not have, still starts: the job runs 10-20x slower, or hangs in
`ncclCommInitRank`, with every GPU busy. The rules here follow NCCL's own reading of its
environment (NVIDIA/nccl, tag nccl4py-v0.3.1, commit 5067397c2676d5aed50042fc39e5c8ee96eb0027):

- `NCCL_IB_DISABLE` and the other integer parameters are read by `ncclLoadParam`
  (src/misc/param.cc): `strtoll(value, NULL, 0)`, so "1", "2" and "0x1" disable IB, and
  "true" is 0. `NCCL_NET` is matched against each network's name case-insensitively
  (src/plugin/net.cc `strcasecmp`; docs/userguide/source/env.rst NCCL_NET: "IB" and
  "Socket" are the internal ones).
- `NCCL_SOCKET_IFNAME` (src/misc/socket.cc ncclFindInterfaces, src/os/linux.cc
  ncclOsFindInterfaces, src/misc/utils.cc parseStringList/matchIfList): a value of one
  character or less is ignored (automatic selection); a leading `^` excludes, then a
  leading `=` asks for exact names; the rest is a comma list of prefixes, each cut at its
  first `:` (a port).
- The Pod's interfaces: `lo`, the cluster network's `eth0`, and one per Multus network
  (k8snetworkplumbingwg/multus-cni, commit 95a0932350f0060cd232096876e24672a1de83fa:
  pkg/k8sclient/k8sclient.go parsePodNetworkAnnotation takes a JSON list or
  `ns/name@ifname` items separated by commas; pkg/types/types.go `interface` and the
  deprecated `interfaceRequest`; pkg/multus/multus.go getIfname names the n-th extra
  network `net<n>` unless it asks for a name).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.access.container_env import pod_sets
from webhook.core.access.gpuresources import DEVICE_PLUGIN_GPUS, gpu_resources
from webhook.core.access.privilege import capability_name
from webhook.core.kit.paths import Path
from webhook.core.kit.text import glob_matcher, listing, plural, shown
from webhook.core.kit.violation import Violation
from webhook.core.workloads.kinds import Role, WorkloadView
from webhook.core.workloads.pods import ContainerRef, PodView

MULTUS_NETWORKS = "k8s.v1.cni.cncf.io/networks"
GKE_INTERFACES = "networking.gke.io/interfaces"
# A Pod's own interfaces: the loopback and the one the runtime's CNI call names eth0
# (multus-cni getIfname: the cluster network keeps the CNI-provided name, args.IfName).
POD_INTERFACES = ("lo", "eth0")


@dataclass(frozen=True, slots=True)
class FabricRules:
    """The parameters of the /dev/shm, fabric, host-RDMA and shared-GPU rules."""

    # GPU resources (globs): the device plugins' names (webhook.core.access.gpuresources).
    gpus: tuple[str, ...] = DEVICE_PLUGIN_GPUS
    # RDMA devices NCCL's IB verbs transport uses: the Mellanox network-operator's
    # examples (example/rdma-gpu-test-pod1.yml rdma/rdma_shared_device_a,
    # example/hostdevice-network-pod1.yml nvidia.com/hostdev,
    # example/sriov-network/infiniband/sriov-network-pod1.yaml nvidia.com/mlnxnics,
    # commits 1000598611c9 and d725b15d9ecd) and the SR-IOV/RDMA names of issue 23.
    rdma: tuple[str, ...] = (
        "rdma/*",
        "nvidia.com/rdma*",
        "nvidia.com/hostdev*",
        "nvidia.com/sriov*",
        "nvidia.com/mlnxnics",
    )
    # Network devices NCCL reaches through a net plugin, not its IB transport: AWS EFA
    # (aws-ofi-nccl; the triton-inference-server/tutorials EKS nccl_test.yaml, commit
    # 20d72779). NCCL_IB_DISABLE does not touch them; NCCL_NET=Socket does.
    plugin_nets: tuple[str, ...] = ("vpc.amazonaws.com/efa",)
    # Multus networks (globs, `name` or `namespace/name`) that are RDMA networks: names
    # are the platform's own, so none by default.
    rdma_networks: tuple[str, ...] = ()
    # /dev/shm the runtime gives a Pod without a mount there: 64 MiB (moby
    # daemon/config DefaultShmSize 64 MiB, containerd's CRI defaultShmSize 64 MiB).
    default_shm_mib: int = 64
    # Namespaces (globs) and Pod labels (key=value, value `*`: any) where host RDMA is
    # the platform's documented path; empty: reported everywhere.
    host_rdma_namespaces: tuple[str, ...] = ()
    host_rdma_labels: tuple[str, ...] = ()
    # Time-sliced or MPS replicas: the device plugin's renamed shared resource
    # (NVIDIA/k8s-device-plugin api/config/v1/replicas.go renameByDefault).
    shared_gpus: tuple[str, ...] = ("nvidia.com/gpu.shared",)
    mig: tuple[str, ...] = ("nvidia.com/mig-*",)


# --- what a rank's Pod holds ----------------------------------------------------------


def gpu_count(pod: PodView, rules: FabricRules, names: tuple[str, ...] | None = None) -> int:
    """Whole GPUs the Pod's running containers request (of `names`, else of rules.gpus)."""
    selection = gpu_resources(include=names if names is not None else rules.gpus)
    total = 0
    for a in pod.amounts:
        if a.container.field == "ephemeralContainers":
            continue
        if a.container.field == "initContainers" and not a.container.is_sidecar:
            continue
        if type(a.amount) is int and a.amount > 0 and selection.is_gpu(a.resource):
            total += a.amount
    return total


_NPROC = re.compile(r"--nproc[-_]per[-_]node(?:=|\s+)(\d{1,4})\b")


def nproc(c: ContainerRef) -> int:
    """torchrun's `--nproc-per-node N` in the container's command or args, else 0."""
    found = 0
    for field in ("command", "args"):
        items = c.spec.get(field)
        if type(items) is not list:
            continue
        for i, item in enumerate(items):
            if type(item) is not str or "nproc" not in item:
                continue
            text = item if "=" in item or " " in item else f"{item} {_next(items, i)}"
            for m in _NPROC.finditer(text[:4096]):  # a script of a megabyte: its head
                found = max(found, int(m.group(1)))
    return found


def _next(items: list[Any], i: int) -> str:
    return str(items[i + 1]) if i + 1 < len(items) and type(items[i + 1]) is str else ""


def ranks(pod: PodView, rules: FabricRules) -> int:
    """NCCL ranks the Pod runs: one per GPU, or torchrun's process count if larger."""
    procs = max((nproc(c) for c in pod.containers), default=0)
    return max(gpu_count(pod, rules), procs)


def who(workload: WorkloadView, role: Role) -> str:
    """How a message names the role's Pods."""
    if workload.kind == "Pod":
        return "the Pod"
    name = f'role "{shown(role.name, 63)}"' if role.name else workload.kind
    return f"{name} ({plural(role.replicas, 'Pod')})" if role.replicas is not None else name


def env_value(pod: PodView, c: ContainerRef, name: str) -> tuple[str, Path] | None:
    """The value the kubelet gives `name` in `c`, with the env entry that sets it; None
    when unset or unknowable (valueFrom, envFrom: not judged)."""
    found = pod_sets(pod, c, name)
    if found.state != "set" or found.value is None:
        return None
    where = (*c.path, "env", found.entry) if found.entry is not None else (*c.path, "env")
    return found.value, where


def nccl_int(value: str) -> int:
    """NCCL's reading of an integer parameter: strtoll(value, NULL, 0); 0 if no digits."""
    # Bounded: strtoll saturates at LLONG_MAX, so 40 digits say as much as a megabyte.
    m = re.match(r"\s*([+-]?)(0[xX][0-9a-fA-F]{1,40}|0[0-7]{0,40}|[1-9][0-9]{0,40})", value)
    if m is None:
        return 0
    digits = m.group(2)
    base = 16 if digits[:2].lower() == "0x" else 8 if digits[0] == "0" else 10
    number = min(int(digits, base), (1 << 63) - 1)
    return -number if m.group(1) == "-" else number


def rdma_requests(
    pod: PodView, patterns: tuple[str, ...]
) -> Iterator[tuple[ContainerRef, str, Path]]:
    """Each container's request of a resource matching `patterns`, above zero."""
    if not patterns:
        return
    match = glob_matcher(patterns)
    for a in pod.amounts:
        if a.amount is not None and a.amount > 0 and match(a.resource):
            yield a.container, a.resource, a.path


def networks(pod: PodView) -> list[tuple[str, str]] | None:
    """The Pod's Multus networks as (`ns/name` or `name`, interface), in order; None when
    the annotation cannot be read (not judged)."""
    raw = pod.annotations.get(MULTUS_NETWORKS)
    if raw is None:
        return []
    raw = raw.strip()
    if not raw:
        return []
    if any(ch in raw for ch in '[{"'):
        return _json_networks(raw)
    out: list[tuple[str, str]] = []
    for item in raw.split(","):
        name, _, ifname = item.strip().partition("@")
        out.append((name.strip(), ifname.strip()))
    return out


def _json_networks(raw: str) -> list[tuple[str, str]] | None:
    try:
        items = json.loads(raw)
    except ValueError:
        return None
    if type(items) is not list:
        return None
    out: list[tuple[str, str]] = []
    for item in items:
        if not isinstance(item, Mapping) or type(item.get("name")) is not str:
            return None
        ns = item.get("namespace")
        name = f"{ns}/{item['name']}" if type(ns) is str and ns else item["name"]
        ifname = item.get("interface") or item.get("interfaceRequest") or ""
        out.append((name, ifname if type(ifname) is str else ""))
    return out


def interfaces(pod: PodView) -> tuple[str, ...] | None:
    """The Pod's network interfaces (lo, eth0, one per Multus network, GKE's named ones);
    None when they cannot be known (hostNetwork, an unreadable annotation)."""
    if pod.spec.get("hostNetwork") is True:
        return None
    attached = networks(pod)
    if attached is None:
        return None
    names = list(POD_INTERFACES)
    names += [ifname or f"net{i}" for i, (_, ifname) in enumerate(attached, start=1)]
    gke = pod.annotations.get(GKE_INTERFACES)
    if gke is not None:
        try:
            items = json.loads(gke)
        except ValueError:
            return None
        if type(items) is not list:
            return None
        names += [
            i["interfaceName"]
            for i in items
            if isinstance(i, Mapping) and type(i.get("interfaceName")) is str
        ]
    return tuple(names)


def rdma_attachments(pod: PodView, rules: FabricRules) -> list[str]:
    """What gives the Pod an IB-verbs RDMA device: resources, then RDMA Multus networks."""
    found = [resource for _, resource, _ in rdma_requests(pod, rules.rdma)]
    if rules.rdma_networks:
        match = glob_matcher(rules.rdma_networks)
        found += [f"Multus network {n}" for n, _ in networks(pod) or () if match(n)]
    return found


# --- the rules ------------------------------------------------------------------------


def nccl_forces_sockets(workload: WorkloadView, *, rules: FabricRules) -> list[Violation]:
    """An RDMA device asked for while NCCL_NET=Socket or NCCL_IB_DISABLE forces sockets."""
    out: list[Violation] = []
    for role in workload.roles:
        pod = role.pod
        verbs = rdma_attachments(pod, rules)
        plugin = [r for _, r, _ in rdma_requests(pod, rules.plugin_nets)]
        if not verbs and not plugin:
            continue
        devices = listing(verbs + plugin)
        for c in pod.containers:
            net = env_value(pod, c, "NCCL_NET")
            if net is not None and net[0].strip().lower() == "socket":
                what = f"NCCL_NET={shown(net[0])}"
                out.append(_sockets(workload, role, c, what, net[1], devices))
                continue
            off = env_value(pod, c, "NCCL_IB_DISABLE") if verbs else None
            if off is not None and nccl_int(off[0]) != 0:
                what = f"NCCL_IB_DISABLE={shown(off[0])}"
                out.append(_sockets(workload, role, c, what, off[1], listing(verbs)))
    return out


def _sockets(
    workload: WorkloadView, role: Role, c: ContainerRef, what: str, where: Path, devices: str
) -> Violation:
    return Violation(
        "nccl-forces-sockets",
        where,
        f"{who(workload, role)} asks for {devices} but {c.label} sets {what}: NCCL runs "
        "over TCP sockets instead of the RDMA device, typically 10-20x slower, and says "
        "nothing; remove the variable (or request no RDMA device)",
    )


def rdma_without_ipc_lock(workload: WorkloadView, *, rules: FabricRules) -> list[Violation]:
    """A container given an RDMA verbs device without the IPC_LOCK capability."""
    out: list[Violation] = []
    for role in workload.roles:
        for c, resource, where in rdma_requests(role.pod, rules.rdma):
            security = c.spec.get("securityContext")
            security = security if isinstance(security, Mapping) else {}
            if security.get("privileged") is True or _has_ipc_lock(security):
                continue
            out.append(
                Violation(
                    "rdma-without-ipc-lock",
                    where,
                    f"{who(workload, role)}: {c.label} requests {resource} without the "
                    "IPC_LOCK capability: RDMA memory registration pins pages and fails "
                    "past the default RLIMIT_MEMLOCK, so queue pairs and buffers cannot be "
                    'set up; add securityContext.capabilities.add: ["IPC_LOCK"]',
                )
            )
    return out


def _has_ipc_lock(security: Mapping[str, Any]) -> bool:
    caps = security.get("capabilities")
    added = caps.get("add") if isinstance(caps, Mapping) else None
    return type(added) is list and any(capability_name(a) in ("IPC_LOCK", "ALL") for a in added)


def nccl_interface_not_attached(workload: WorkloadView, *, rules: FabricRules) -> list[Violation]:
    """NCCL_SOCKET_IFNAME selecting no interface the Pod has."""
    out: list[Violation] = []
    for role in workload.roles:
        pod = role.pod
        found: tuple[str, ...] | None = None
        for c in pod.containers:
            value = env_value(pod, c, "NCCL_SOCKET_IFNAME")
            if value is None or len(value[0]) <= 1:  # NCCL ignores a value of one character
                continue
            if found is None:
                found = interfaces(pod)
                if found is None:
                    break
            if not selected(value[0], found):
                out.append(
                    Violation(
                        "nccl-interface-not-attached",
                        value[1],
                        f"{who(workload, role)}: {c.label} sets NCCL_SOCKET_IFNAME="
                        f"{shown(value[0])}, which selects none of the Pod's interfaces "
                        f"({', '.join(found[:8])}): NCCL fails to find a socket interface; "
                        f"attach the network ({MULTUS_NETWORKS}) or name an interface "
                        "the Pod has",
                    )
                )
    return out


def selected(value: str, names: tuple[str, ...]) -> list[str]:
    """The interfaces NCCL selects from `names` for an NCCL_SOCKET_IFNAME value."""
    exclude = value.startswith("^")
    rest = value[1:] if exclude else value
    exact = rest.startswith("=")
    rest = rest[1:] if exact else rest
    prefixes = [p.split(":", 1)[0] for p in rest.split(",")]
    prefixes = [p for p in prefixes if p]
    if not prefixes:
        return list(names)  # NCCL: an empty list matches every interface

    def hit(name: str) -> bool:
        return any(name == p if exact else name.startswith(p) for p in prefixes)

    return [n for n in names if hit(n) != exclude]


def nccl_ignore_net_mismatch(workload: WorkloadView, *, rules: FabricRules) -> list[Violation]:
    """NCCL_IGNORE_NET_MISMATCH=1 in a job whose GPU ranks differ in RDMA devices.

    NCCL checks that every rank sees as many network devices (src/init.cc, since 2.30)
    and, with this variable at 1 (its default there), logs and goes on at the slowest
    rank's bandwidth; before 2.30 there was no check. Set explicitly, it hides a mismatch
    the job's own spec shows."""
    counts = {
        role.name: len(rdma_attachments(role.pod, rules))
        for role in workload.roles
        if gpu_count(role.pod, rules) > 0
    }
    if len(set(counts.values())) < 2:
        return []
    shape = listing(f"{name or workload.kind} {n}" for name, n in counts.items())
    out: list[Violation] = []
    for role in workload.roles:
        for c in role.pod.containers:
            value = env_value(role.pod, c, "NCCL_IGNORE_NET_MISMATCH")
            if value is not None and nccl_int(value[0]) != 0:
                out.append(
                    Violation(
                        "nccl-ignore-net-mismatch",
                        value[1],
                        f"{who(workload, role)}: {c.label} sets NCCL_IGNORE_NET_MISMATCH="
                        f"{shown(value[0])} while the job's GPU ranks ask for different "
                        f"numbers of RDMA devices ({shape}): NCCL goes on at the slowest "
                        "rank's bandwidth instead of failing; give every rank the same "
                        "devices",
                    )
                )
    return out
