"""The /dev/shm, NCCL-against-the-fabric, host-RDMA and shared-GPU rules of issue 23.

Verbatim upstream manifests first (tests/data/workloads, PROVENANCE.md there), then
variants made from them in the test, each row through the rule functions directly.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from tests.support.builders import shipped
from tests.support.paths import TESTS
from webhook.core.jobs.fabric import (
    FabricRules,
    nccl_forces_sockets,
    nccl_ignore_net_mismatch,
    nccl_int,
    nccl_interface_not_attached,
    rdma_without_ipc_lock,
    selected,
)
from webhook.core.jobs.hostrdma import host_rdma
from webhook.core.jobs.sharedgpu import multi_rank_mig, multi_rank_shared_gpu
from webhook.core.jobs.shm import shm_default, shm_host, shm_unbounded
from webhook.core.kit.paths import format_path
from webhook.core.kit.violation import Violation
from webhook.core.workloads.kinds import WorkloadView
from webhook.core.workloads.targets import workload_of

DATA = TESTS / "data" / "workloads"
NCCL_TESTS = "examples__v2beta1__nccl-tests__nccl-tests.yaml"
EFA = "Deployment__Kubernetes__EKS_Multinode_Triton_TRTLLM__multinode_helm_chart__nccl_test.yaml"
RDMA_POD = "example__rdma-gpu-test-pod1.yaml"
RAY = (
    "ray-operator__config__samples__pytorch-text-classifier__"
    "ray-job.pytorch-distributed-training.yaml"
)
PYTORCH = "examples__pytorch__mnist__v1__pytorch_job_mnist_nccl.yaml"
RULES = FabricRules()
Rule = Callable[..., list[Violation]]
ALL: tuple[Rule, ...] = (
    shm_default,
    shm_unbounded,
    shm_host,
    nccl_forces_sockets,
    rdma_without_ipc_lock,
    nccl_interface_not_attached,
    nccl_ignore_net_mismatch,
    host_rdma,
    multi_rank_shared_gpu,
    multi_rank_mig,
)


def load(name: str) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((DATA / name).read_text()) if d]
    return copy.deepcopy(docs[0])


def view(obj: dict[str, Any]) -> WorkloadView:
    found = workload_of(obj, custom=shipped().custom_kinds)
    assert found is not None
    return found


def found(obj: dict[str, Any], rules: FabricRules = RULES) -> list[tuple[str, str]]:
    w = view(obj)
    return [(v.rule, format_path(v.path)) for rule in ALL for v in rule(w, rules=rules)]


def pod(containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    meta = spec.pop("metadata", {"name": "p"})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": containers, **spec},
    }


def ctr(gpus: int = 0, *, env: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    limits: dict[str, Any] = dict(extra.pop("limits", {}))
    if gpus:
        limits["nvidia.com/gpu"] = gpus
    c: dict[str, Any] = {"name": "main", "image": "train", "resources": {"limits": limits}}
    if env:
        c["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {**c, **extra}


SHM_VOL = [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}]
SHM_MOUNT = [{"name": "shm", "mountPath": "/dev/shm"}]
MEM = {"memory": "64Gi"}


def nccl_tests() -> dict[str, Any]:
    return load(NCCL_TESTS)


def efa() -> dict[str, Any]:
    return load(EFA)


UPSTREAM = [
    # mpi-operator nccl-tests: 2 workers x 8 GPUs, /dev/shm emptyDir Memory without
    # sizeLimit, privileged workers (and launcher, which asks for no GPU).
    (
        NCCL_TESTS,
        [
            ("shm-unbounded", "spec.mpiReplicaSpecs.Worker.template.spec.volumes[0].emptyDir"),
            (
                "host-rdma",
                "spec.mpiReplicaSpecs.Worker.template.spec.containers[0].securityContext.privileged",
            ),
        ],
    ),
    # Triton's EKS nccl-tests over EFA: the node's /dev/shm by hostPath.
    (EFA, [("shm-host", "spec.mpiReplicaSpecs.Worker.template.spec.volumes[0].hostPath.path")]),
    # Mellanox's RDMA GPU test Pod: 1 GPU, rdma resource, IPC_LOCK: clean.
    (RDMA_POD, []),
    # KubeRay: one GPU per Pod; KubeRay mounts /dev/shm sized by the 8G limit: clean.
    (RAY, []),
    # PyTorchJob mnist: 1 GPU per Pod: clean.
    (PYTORCH, []),
]


@pytest.mark.parametrize(("name", "expected"), UPSTREAM, ids=[u[0][:40] for u in UPSTREAM])
def test_upstream_manifests(name: str, expected: list[tuple[str, str]]) -> None:
    assert found(load(name)) == expected


def _rdma_pod(**env: str) -> dict[str, Any]:
    obj = load(RDMA_POD)
    if env:
        obj["spec"]["containers"][0]["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return obj


def _no_ipc_lock() -> dict[str, Any]:
    obj = load(RDMA_POD)
    del obj["spec"]["containers"][0]["securityContext"]
    return obj


def _ray(params: dict[str, str] | None = None, memory: bool = True) -> dict[str, Any]:
    obj = load(RAY)
    head = obj["spec"]["rayClusterSpec"]["headGroupSpec"]
    limits = head["template"]["spec"]["containers"][0]["resources"]
    limits["limits"]["nvidia.com/gpu"] = "4"
    if not memory:
        del limits["limits"]["memory"], limits["requests"]["memory"]
    head["rayStartParams"].update(params or {})
    return obj


def _multus(annotation: str, ifname: str) -> dict[str, Any]:
    obj = _rdma_pod(NCCL_SOCKET_IFNAME=ifname)
    obj["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] = annotation
    return obj


C0 = "spec.containers[0]"
HEAD = "spec.rayClusterSpec.headGroupSpec.template.spec.containers[0]"
VARIANTS: list[tuple[str, dict[str, Any], list[tuple[str, str]]]] = [
    ("8 GPUs, no /dev/shm", pod([ctr(8)]), [("shm-default", C0)]),
    (
        "8 GPUs, /dev/shm bounded",
        pod([ctr(8, limits=MEM, volumeMounts=SHM_MOUNT)], volumes=SHM_VOL),
        [],
    ),
    (
        "1 GPU, torchrun 4 procs",
        pod([ctr(1, command=["torchrun", "--nproc-per-node", "4", "train.py"])]),
        [("shm-default", C0)],
    ),
    ("1 GPU, one rank", pod([ctr(1)]), []),
    (
        "sizeLimit over memory limit",
        pod([ctr(8, limits={"memory": "4Gi"}, volumeMounts=SHM_MOUNT)], volumes=SHM_VOL),
        [("shm-unbounded", "spec.volumes[0].emptyDir.sizeLimit")],
    ),
    (
        "hostPath //dev/shm/",
        pod(
            [ctr(2, volumeMounts=SHM_MOUNT)],
            volumes=[{"name": "shm", "hostPath": {"path": "//dev/shm/"}}],
        ),
        [("shm-host", "spec.volumes[0].hostPath.path")],
    ),
    ("KubeRay adds /dev/shm", _ray(), []),
    ("KubeRay plasma-directory", _ray({"plasma-directory": "/tmp"}), [("shm-default", HEAD)]),
    ("KubeRay without memory", _ray(memory=False), [("shm-unbounded", f"{HEAD}.resources")]),
    (
        "RDMA with NCCL_IB_DISABLE=1",
        _rdma_pod(NCCL_IB_DISABLE="1"),
        [("nccl-forces-sockets", f"{C0}.env[0]")],
    ),
    ("RDMA with NCCL_IB_DISABLE=0", _rdma_pod(NCCL_IB_DISABLE="0"), []),
    ("RDMA with NCCL_IB_DISABLE=true (strtoll: 0)", _rdma_pod(NCCL_IB_DISABLE="true"), []),
    (
        "RDMA with NCCL_NET=socket",
        _rdma_pod(NCCL_NET="socket"),
        [("nccl-forces-sockets", f"{C0}.env[0]")],
    ),
    ("RDMA with NCCL_NET=IB", _rdma_pod(NCCL_NET="IB"), []),
    ("no RDMA, NCCL_IB_DISABLE=1", pod([ctr(1, env={"NCCL_IB_DISABLE": "1"})]), []),
    (
        "RDMA without IPC_LOCK",
        _no_ipc_lock(),
        [("rdma-without-ipc-lock", f'{C0}.resources.limits["rdma/rdma_shared_device_a"]')],
    ),
    ("IFNAME net1, one Multus network", _rdma_pod(NCCL_SOCKET_IFNAME="net1"), []),
    (
        "IFNAME net2, one Multus network",
        _rdma_pod(NCCL_SOCKET_IFNAME="net2"),
        [("nccl-interface-not-attached", f"{C0}.env[0]")],
    ),
    (
        "IFNAME =net, exact",
        _rdma_pod(NCCL_SOCKET_IFNAME="=net"),
        [("nccl-interface-not-attached", f"{C0}.env[0]")],
    ),
    ("IFNAME ^lo,eth (net1 left)", _rdma_pod(NCCL_SOCKET_IFNAME="^lo,eth"), []),
    (
        "IFNAME ^=lo,eth0,net1: all excluded",
        _rdma_pod(NCCL_SOCKET_IFNAME="^=lo,eth0,net1"),
        [("nccl-interface-not-attached", f"{C0}.env[0]")],
    ),
    # NCCL strips one `=` after `^`: "=eth0" is then a prefix nothing starts with.
    ("IFNAME ^=lo,=eth0,=net1 keeps eth0", _rdma_pod(NCCL_SOCKET_IFNAME="^=lo,=eth0,=net1"), []),
    ("IFNAME ib0 one char? no: 'i' ignored", _rdma_pod(NCCL_SOCKET_IFNAME="i"), []),
    ("Multus name@ib0", _multus("rdma-net@ib0", "ib"), []),
    ("Multus JSON interface", _multus('[{"name": "a", "interface": "roce0"}]', "=roce0"), []),
    (
        "Multus JSON, wrong name",
        _multus('[{"name": "a"}, {"name": "b"}]', "=net3"),
        [("nccl-interface-not-attached", f"{C0}.env[0]")],
    ),
    (
        "hostNetwork: interfaces unknown",
        pod([ctr(1, env={"NCCL_SOCKET_IFNAME": "ens5"})], hostNetwork=True),
        [("host-rdma", "spec.hostNetwork")],
    ),
    (
        "hostNetwork allowed by label",
        pod([ctr(1)], hostNetwork=True, metadata={"name": "p", "labels": {"fabric": "host"}}),
        [("host-rdma", "spec.hostNetwork")],
    ),
    (
        "hostIPC, /dev/infiniband",
        pod(
            [ctr(1)],
            hostIPC=True,
            volumes=[{"name": "ib", "hostPath": {"path": "/dev/infiniband"}}],
        ),
        [("host-rdma", "spec.hostIPC"), ("host-rdma", "spec.volumes[0].hostPath.path")],
    ),
    ("hostNetwork without GPU", pod([ctr(0)], hostNetwork=True), []),
    (
        "2 shared replicas",
        pod([ctr(limits={"nvidia.com/gpu.shared": 2})]),
        [
            ("shm-default", C0),
            ("multi-rank-shared-gpu", f'{C0}.resources.limits["nvidia.com/gpu.shared"]'),
        ],
    ),
    (
        "2 shared, NCCL_MULTI_RANK_GPU_ENABLE=1",
        pod([ctr(limits={"nvidia.com/gpu.shared": 2}, env={"NCCL_MULTI_RANK_GPU_ENABLE": "1"})]),
        [("shm-default", C0)],
    ),
    ("1 shared replica", pod([ctr(limits={"nvidia.com/gpu.shared": 1})]), []),
    (
        "2 MIG slices",
        pod([ctr(limits={"nvidia.com/mig-1g.10gb": 2})]),
        [
            ("shm-default", C0),
            ("multi-rank-mig", f'{C0}.resources.limits["nvidia.com/mig-1g.10gb"]'),
        ],
    ),
    ("1 MIG slice", pod([ctr(limits={"nvidia.com/mig-1g.10gb": 1})]), []),
]


@pytest.mark.parametrize(
    ("obj", "expected"), [v[1:] for v in VARIANTS], ids=[v[0] for v in VARIANTS]
)
def test_variants(obj: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert found(obj) == expected


def test_host_rdma_allowed_where_the_platform_says() -> None:
    obj = pod([ctr(1)], hostNetwork=True, metadata={"name": "p", "labels": {"fabric": "host"}})
    by_label = FabricRules(host_rdma_labels=("fabric=host",))
    assert host_rdma(view(obj), rules=by_label) == []
    by_ns = FabricRules(host_rdma_namespaces=("gpu-*",))
    assert host_rdma(view(obj), rules=by_ns, namespace="gpu-train") == []
    assert len(host_rdma(view(obj), rules=by_ns, namespace="team-a")) == 1


def test_ignore_net_mismatch_only_when_ranks_differ() -> None:
    obj = load(PYTORCH)
    specs = obj["spec"]["pytorchReplicaSpecs"]
    worker = specs["Worker"]["template"]["spec"]["containers"][0]
    worker["env"] = [{"name": "NCCL_IGNORE_NET_MISMATCH", "value": "1"}]
    assert nccl_ignore_net_mismatch(view(obj), rules=RULES) == []
    worker["resources"]["limits"]["rdma/ib"] = 1
    (v,) = nccl_ignore_net_mismatch(view(obj), rules=RULES)
    assert v.message == (
        'role "Worker" (1 Pod): container "pytorch" sets NCCL_IGNORE_NET_MISMATCH=1 while '
        "the job's GPU ranks ask for different numbers of RDMA devices (Master 0, Worker 1): "
        "NCCL goes on at the slowest rank's bandwidth instead of failing; give every rank "
        "the same devices"
    )


def test_messages_name_numbers() -> None:
    (v,) = shm_default(view(pod([ctr(8)])), rules=RULES)
    assert v.message == (
        "the Pod: 8 ranks on 8 GPUs with the 64 MiB default /dev/shm: NCCL's shared-memory "
        'transport and PyTorch DataLoader workers fail with "Bus error"; add an emptyDir '
        "medium: Memory with a sizeLimit within the container's memory limit, mounted at "
        '/dev/shm in container "main"'
    )
    (v,) = shm_unbounded(view(nccl_tests()), rules=RULES)
    assert v.message.startswith(
        'role "Worker" (2 Pods): the memory-backed /dev/shm of container "nccl" has no sizeLimit'
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1", 1), ("0", 0), ("true", 0), ("0x10", 16), ("010", 8), (" 2abc", 2), ("-1", -1), ("", 0)],
)
def test_nccl_int_reads_like_strtoll(value: str, expected: int) -> None:
    assert nccl_int(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("eth", ["eth0"]),
        ("=eth", []),
        ("=eth0,net1", ["eth0", "net1"]),
        ("^lo", ["eth0", "net1"]),
        ("^=eth0", ["lo", "net1"]),
        ("net1:2", ["net1"]),
        ("^", ["lo", "eth0", "net1"]),
    ],
)
def test_socket_ifname_as_nccl_matches(value: str, expected: list[str]) -> None:
    assert selected(value, ("lo", "eth0", "net1")) == expected
