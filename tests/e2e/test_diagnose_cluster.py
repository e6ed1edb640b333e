"""`gpu-admission diagnose` against a real kube-apiserver and kube-scheduler.

One cluster (../shared/tools/kubecluster) holds a Pod for every failure domain; the
real scheduler leaves each Pending with its real FailedScheduling event, then the real
CLI diagnoses the cluster live (its kubeconfig) and from a `kubectl get
nodes,pods,events -A -o json` dump of it, and both name the domain, the facts and the
next action. The DRA Pods' DeviceClass and ResourceSlice are created through the API as
a driver would publish them, and the dump holds the DRA objects too.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import traceback
from pathlib import Path
from typing import Any

import pytest

from tests.support.clirun import gpu_admission
from tests.support.controlplane import KIT, Api, Obj, kubectl, start, stop

pytestmark = pytest.mark.skipif(
    not (KIT / "start").exists(), reason=f"kubecluster kit not found at {KIT}"
)

A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
GFD = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "8"}
BASE = {"cpu": "64", "memory": "512Gi", "pods": "110"}
GPU8 = {**BASE, "nvidia.com/gpu": "8"}
READY = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}
PLUGIN_POD = "nvidia-device-plugin-daemonset-x7k2p"
MIG_MANAGER_POD = "nvidia-mig-manager-5x9qz"


def node(
    name: str,
    labels: dict[str, str],
    allocatable: dict[str, str],
    *,
    taints: list[Obj] | None = None,
    unschedulable: bool = False,
    ready: Obj = READY,
) -> tuple[Obj, Obj]:
    spec: Obj = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
    status = {"capacity": allocatable, "allocatable": allocatable, "conditions": [ready]}
    return {**obj, "spec": spec}, status


NODES = [
    node("a100-full", {**GFD, "nvidia.com/gpu.product": A100, "pool": "full"}, GPU8),
    node(
        "a100-cpu",
        {**GFD, "nvidia.com/gpu.product": A100, "pool": "cpu"},
        {"cpu": "8", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"},
    ),
    node("h100-noplugin", {**GFD, "nvidia.com/gpu.product": H100, "pool": "noplugin"}, BASE),
    node(
        "a100-mig",
        {
            **GFD,
            "nvidia.com/gpu.product": A100,
            "nvidia.com/mig.strategy": "mixed",
            "nvidia.com/mig.config": "all-balanced",
            "nvidia.com/mig.config.state": "failed",
            "nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change",
            "pool": "mig",
        },
        BASE,
    ),
    node(
        "a100-migok",
        {
            **GFD,
            "nvidia.com/gpu.product": A100,
            "nvidia.com/mig.strategy": "mixed",
            "nvidia.com/mig.config.state": "success",
            "nvidia.com/mig-1g.10gb.count": "7",
            "pool": "migok",
        },
        {**BASE, "nvidia.com/mig-1g.10gb": "7"},
    ),
    node(
        "h100-tainted",
        {**GFD, "nvidia.com/gpu.product": H100},
        GPU8,
        taints=[{"key": "dedicated", "value": "inference", "effect": "NoSchedule"}],
    ),
    node("a100-cordoned", {**GFD, "pool": "maint"}, GPU8, unschedulable=True),
    node(
        "a100-notready",
        {**GFD, "pool": "maint"},
        GPU8,
        taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}],
        ready={"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "no"},
    ),
]


def pod(
    name: str,
    limits: dict[str, str] | None = None,
    *,
    namespace: str = "default",
    requests: dict[str, str] | None = None,
    containers: list[Obj] | None = None,
    **spec: Any,
) -> Obj:
    resources: Obj = {}
    if limits:
        resources["limits"] = limits
    if requests:
        resources["requests"] = requests
    main = {"name": "main", "image": "registry.example.com/train:1", "resources": resources}
    labels = spec.pop("labels", {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"containers": containers or [main], **spec},
    }


GPU1 = {"nvidia.com/gpu": "1"}
BOUND = [
    pod("holder-a", {"nvidia.com/gpu": "4"}, nodeName="a100-full"),
    pod("holder-b", {"nvidia.com/gpu": "4"}, nodeName="a100-full"),
    pod("holder-done", {"nvidia.com/gpu": "4"}, nodeName="a100-full"),  # then Succeeded
    pod("cpuhog", requests={"cpu": "7"}, nodeName="a100-cpu"),
    pod(
        PLUGIN_POD,
        namespace="gpu-operator",
        nodeName="h100-noplugin",
        labels={"app": "nvidia-device-plugin-daemonset"},
    ),
    pod(
        MIG_MANAGER_POD,
        namespace="gpu-operator",
        nodeName="a100-mig",
        labels={"app": "nvidia-mig-manager"},
    ),
]
PENDING = [
    pod("typo", {"nvidia.com/mig-1g.10g": "1"}),
    pod("noplugin", GPU1, nodeSelector={"pool": "noplugin"}),
    pod("mig", {"nvidia.com/mig-3g.40gb": "1"}, nodeSelector={"pool": "mig"}),
    pod("full", {"nvidia.com/gpu": "4"}, nodeSelector={"pool": "full"}),
    pod("cpu-short", {**GPU1, "cpu": "2"}, nodeSelector={"pool": "cpu"}),
    pod("placement", GPU1, nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB"}),
    pod("maint", GPU1, nodeSelector={"pool": "maint"}),
    pod(
        "toobig",
        containers=[
            {"name": n, "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
            for n in ("rank-0", "rank-1")
        ],
    ),
    pod("nogpu", {"cpu": "1000"}),
    # Two faults: the scheduler names the first filter each node fails (the selector).
    pod("typo-pinned", {"nvidia.com/mig-1g.10g": "1"}, nodeSelector={"pool": "nowhere"}),
]
# DRA: a driver's DeviceClass and the slice it publishes for node a100-full; a claim
# naming a class that does not exist, and a template whose selector matches no device.
DRIVER = "gpu.nvidia.com"
A100_DRA = "NVIDIA A100-SXM4-80GB"
FORTY_GB = f"device.attributes['{DRIVER}'].productName == 'NVIDIA A100-SXM4-40GB'"
DRA_V1 = "resource.k8s.io/v1"


def _claim_spec(device_class: str, selector: str = "") -> Obj:
    exactly: Obj = {"deviceClassName": device_class}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


DRA_OBJECTS: list[Obj] = [
    {
        "apiVersion": DRA_V1,
        "kind": "DeviceClass",
        "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
    },
    {
        "apiVersion": DRA_V1,
        "kind": "ResourceSlice",
        "metadata": {"name": f"a100-full-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "a100-full",
            "pool": {"name": "a100-full", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"productName": {"string": A100_DRA}}}
                for i in range(2)
            ],
        },
    },
    {
        "apiVersion": DRA_V1,
        "kind": "ResourceClaim",
        "metadata": {"name": "no-class", "namespace": "default"},
        "spec": _claim_spec("gpu.nvidia.co"),
    },
    {
        "apiVersion": DRA_V1,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "a100-40gb", "namespace": "default"},
        "spec": {"spec": _claim_spec(DRIVER, FORTY_GB)},
    },
    {
        "apiVersion": DRA_V1,
        "kind": "ResourceClaim",
        "metadata": {"name": "both-gpus", "namespace": "default"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": 2}}]
            }
        },
    },
    {
        "apiVersion": DRA_V1,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "default"},
        "spec": {"spec": _claim_spec(DRIVER)},
    },
]


def dra_pod(name: str, source: str, claim: str) -> Obj:
    main = {"name": "main", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}
    obj = pod(name, containers=[main])
    obj["spec"]["resourceClaims"] = [{"name": "gpu", source: claim}]
    return obj


PENDING += [
    dra_pod("dra-noclass", "resourceClaimName", "no-class"),
    dra_pod("dra-nomatch", "resourceClaimTemplateName", "a100-40gb"),
]
# The scheduler allocates both devices to the claim of dra-holder and binds it; then
# dra-waits asks for one more.
DRA_HOLDER = dra_pod("dra-holder", "resourceClaimName", "both-gpus")
DRA_WAITS = dra_pod("dra-waits", "resourceClaimTemplateName", "one-gpu")
# Not tried by the default scheduler: no FailedScheduling event.
QUIET = [
    pod("gated", GPU1, schedulingGates=[{"name": "kueue.x-k8s.io/admission"}]),
    pod("fits", {"nvidia.com/mig-1g.10gb": "1"}, schedulerName="other-scheduler"),
]


def _setup(api: Api) -> None:
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}})
    for obj, status in NODES:
        api.patch_status(api.create(obj), status)
    for namespace in ("default", "gpu-operator"):  # the ServiceAccount admission needs it
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/default"
        api.wait_for(f"sa/default in {namespace}", lambda p=path: _exists(api, p))
    for obj in DRA_OBJECTS:
        api.create(obj)
    api.create(DRA_HOLDER)
    api.wait_for("the claim both-gpus allocated", lambda: _allocated(api, "both-gpus"))
    for obj in BOUND + PENDING + QUIET + [DRA_WAITS]:
        api.create(obj)
    api.patch_status(BOUND[2], {"phase": "Succeeded"})
    running = {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}
    crash = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}}
    running["containerStatuses"] = [
        {"name": "main", "ready": False, "restartCount": 7, "image": "x", "imageID": "",
         "state": crash}
    ]  # fmt: skip
    api.patch_status(BOUND[4], running)
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    api.patch_status(BOUND[5], ready)
    wanted = {p["metadata"]["name"] for p in [*PENDING, DRA_WAITS]}
    api.wait_for("a FailedScheduling event for every Pending Pod", lambda: wanted <= _failed(api))


def _exists(api: Api, path: str) -> bool:
    try:
        api.call("GET", path)
    except RuntimeError:
        return False
    return True


def _allocated(api: Api, claim: str) -> bool:
    path = f"/apis/{DRA_V1}/namespaces/default/resourceclaims/{claim}"
    return bool(api.call("GET", path).get("status", {}).get("allocation"))


def _failed(api: Api) -> set[str]:
    events = api.call("GET", "/api/v1/events", fieldSelector="reason=FailedScheduling")
    return {e["involvedObject"]["name"] for e in events["items"]}


def _build(shared: Path) -> None:
    """Start the cluster, set it up, dump it, diagnose it live and from the dump (the
    JSON of both in `shared`), and stop it: everything later reads these files."""
    kubeconfig = start(shared / "kubecluster")
    try:
        _setup(Api(kubeconfig))
        dump = shared / "dump.json"
        kinds = (
            "nodes,pods,events,deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates"
        )
        dump.write_text(kubectl(kubeconfig, "get", kinds, "-A", "-o", "json"))
        for name, args in (
            ("live", ("--kubeconfig", str(kubeconfig))),
            ("dump", ("--from", str(dump))),
        ):
            proc = run(*args, "-o", "json")
            assert proc.returncode == 1, proc.stderr
            (shared / f"{name}.out.json").write_text(proc.stdout)
        proc = run("--kubeconfig", str(kubeconfig), "-o", "markdown", "default/mig")
        (shared / "live.md").write_text(f"{proc.returncode}\n{proc.stdout}")
    finally:
        stop(shared / "kubecluster", wait=False)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of the cluster's dump and diagnoses. One cluster per run: xdist
    workers share a base directory, and the first to take the lock builds it."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if base.name.startswith("popen-gw") else base
    shared = root / "diagnose-cluster"
    with open(root / "diagnose-cluster.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "built").exists() and not (shared / "failed").exists():
            shared.mkdir(exist_ok=True)
            try:
                _build(shared)
            except BaseException:
                (shared / "failed").write_text(traceback.format_exc())
                raise
            (shared / "built").touch()
    if (shared / "failed").exists():
        pytest.fail(f"the cluster did not build:\n{(shared / 'failed').read_text()}")
    return shared


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return gpu_admission("diagnose", *args)


@pytest.fixture(scope="session")
def live(cluster: Path) -> dict[str, Obj]:
    return {r["pod"]: r for r in json.loads((cluster / "live.out.json").read_text())}


@pytest.fixture(scope="session")
def dumped(cluster: Path) -> dict[str, Obj]:
    return {r["pod"]: r for r in json.loads((cluster / "dump.out.json").read_text())}


# pod -> (domain, verdict, next action, facts that must be among the record's, candidates)
EXPECTED: dict[str, tuple[str, str, str, list[tuple[str, str, str]], int]] = {
    "typo": (
        "name-not-advertised",
        "no node advertises nvidia.com/mig-1g.10g, so the scheduler finds it Insufficient on "
        "every node that passes its other filters; did you mean nvidia.com/mig-1g.10gb?",
        "fix the resource name to nvidia.com/mig-1g.10gb",
        [
            ("cluster", "nodes advertising nvidia.com/mig-1g.10g", "0 of 8"),
            (
                "cluster",
                "advertised nvidia.com/ GPU resources",
                "nvidia.com/gpu, nvidia.com/mig-1g.10gb",
            ),
        ],
        0,
    ),
    "typo-pinned": (
        "name-not-advertised",
        "no node advertises nvidia.com/mig-1g.10g, so the scheduler finds it Insufficient on "
        "every node that passes its other filters; did you mean nvidia.com/mig-1g.10gb?",
        "fix the resource name to nvidia.com/mig-1g.10gb",
        [("cluster", "nodes advertising nvidia.com/mig-1g.10g", "0 of 8")],
        0,
    ),
    "noplugin": (
        "plugin-not-registered",
        "GPU Feature Discovery says node h100-noplugin has GPUs, but the device plugin has not "
        f"registered nvidia.com/gpu there (its Pod gpu-operator/{PLUGIN_POD} is Running, not "
        "ready (CrashLoopBackOff)), and the nodes that offer nvidia.com/gpu are outside the "
        "Pod's placement",
        f"restart the device plugin on node h100-noplugin: read its logs (kubectl logs -n "
        f"gpu-operator {PLUGIN_POD}), then kubectl delete pod -n gpu-operator {PLUGIN_POD} (its "
        "DaemonSet starts a new one)",
        [
            ("node h100-noplugin", "label nvidia.com/gpu.present", "true"),
            ("node h100-noplugin", "label nvidia.com/gpu.count", "8"),
            ("node h100-noplugin", "allocatable nvidia.com/gpu", "absent"),
            (
                "node h100-noplugin",
                f"device plugin Pod gpu-operator/{PLUGIN_POD}",
                "Running, not ready (CrashLoopBackOff)",
            ),
        ],
        0,
    ),
    "mig": (
        "mig-reconfiguring",
        "the MIG manager failed to reconfigure node a100-mig (label "
        "nvidia.com/mig.config.state=failed), which offers no nvidia.com/mig-3g.40gb meanwhile, "
        "and no other node offers it",
        f"the MIG manager failed on node a100-mig: read its logs (kubectl logs -n gpu-operator "
        f"{MIG_MANAGER_POD}), fix the layout it was asked for (nvidia.com/mig.config=all-balanced) "
        "and set the label again to retry",
        [
            ("node a100-mig", "label nvidia.com/mig.config.state", "failed"),
            ("node a100-mig", "label nvidia.com/gpu.deploy.device-plugin", "paused-for-mig-change"),
            ("node a100-mig", "allocatable nvidia.com/mig-3g.40gb", "absent"),
            ("node a100-mig", f"MIG manager Pod gpu-operator/{MIG_MANAGER_POD}", "Running"),
        ],
        0,
    ),
    "full": (
        "capacity-exhausted",
        "no node that could take it has room now: the one candidate node lacks nvidia.com/gpu "
        "(0 free of 8; the Pod asks 4); preemption cannot help: no candidate node has enough "
        "held by Pods of priority below 0",
        "wait for nvidia.com/gpu to free up on node a100-full (held by default/holder-a, "
        "default/holder-b), or add nodes; or give it a PriorityClass above the Pods that hold "
        "the room, so it preempts them",
        [
            (
                "node a100-full",
                "nvidia.com/gpu",
                "8 allocatable, 8 allocated, 0 free; the Pod asks 4",
            ),
            ("node a100-full", "held by Pod default/holder-a", "4 nvidia.com/gpu (priority 0)"),
            ("node a100-full", "held by Pod default/holder-b", "4 nvidia.com/gpu (priority 0)"),
        ],
        1,
    ),
    "cpu-short": (
        "capacity-exhausted",
        "GPUs are free on node a100-cpu, which could take it, but it lacks cpu (1 free of 8; the "
        "Pod asks 2); preemption cannot help: no candidate node has enough held by Pods of "
        "priority below 0",
        "free cpu on node a100-cpu (1 free, the Pod asks 2): lower the Pod's cpu request, or "
        "keep Pods that use no GPU off the GPU nodes (a taint on them does); or give it a "
        "PriorityClass above the Pods that hold the room, so it preempts them",
        [
            ("node a100-cpu", "cpu", "8 allocatable, 7 allocated, 1 free; the Pod asks 2"),
            (
                "node a100-cpu",
                "nvidia.com/gpu",
                "8 allocatable, 0 allocated, 8 free; the Pod asks 1",
            ),
        ],
        1,
    ),
    "placement": (
        "excluded-by-placement",
        "nodeSelector nvidia.com/gpu.product=NVIDIA-H100-80GB excludes all 5 nodes whose "
        "allocatable could hold the Pod (taint dedicated=inference:NoSchedule excludes some too)",
        "change nodeSelector nvidia.com/gpu.product=NVIDIA-H100-80GB to "
        "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3, and add a toleration for "
        "dedicated=inference:NoSchedule (1 node has NVIDIA-H100-80GB-HBM3)",
        [
            ("cluster", "nodes whose allocatable could hold the Pod", "5"),
            (
                "Pod default/placement",
                "nodeSelector nvidia.com/gpu.product=NVIDIA-H100-80GB",
                "excludes 5 of them",
            ),
            (
                "cluster",
                "nearest value of nvidia.com/gpu.product",
                "NVIDIA-H100-80GB-HBM3 (1 node)",
            ),
            ("Pod default/placement", "taint dedicated=inference:NoSchedule", "excludes 1 of them"),
        ],
        0,
    ),
    "maint": (
        "node-unavailable",
        "every node that could take it is out of service: a100-cordoned (cordoned), "
        "a100-notready (not Ready, taint node.kubernetes.io/not-ready:NoSchedule)",
        "uncordon node a100-cordoned once its maintenance is done (kubectl uncordon a100-cordoned)",
        [
            ("node a100-cordoned", "spec.unschedulable", "true"),
            ("node a100-notready", "condition Ready", "False KubeletNotReady"),
            ("node a100-notready", "taint node.kubernetes.io/not-ready:NoSchedule", ""),
        ],
        2,
    ),
    "toobig": (
        "exceeds-any-node",
        "the Pod asks 16 nvidia.com/gpu; the most any node offering nvidia.com/gpu has is 8 "
        "(node a100-cpu), so no node can ever hold it",
        "request at most 8 nvidia.com/gpu per Pod, or split the work across Pods",
        [
            ("Pod default/toobig", "requests nvidia.com/gpu", "16 in all (rank-0: 8, rank-1: 8)"),
            ("node a100-cpu", "allocatable nvidia.com/gpu", "8"),
        ],
        0,
    ),
    "gated": (
        "gated",
        "the Pod has scheduling gates (kueue.x-k8s.io/admission): the scheduler does not try to "
        "place it until every gate is removed",
        "Kueue has not admitted it: check its Workload (kubectl get workloads -n default) and "
        "the quota of its ClusterQueue (kubectl describe clusterqueue)",
        [("Pod default/gated", "spec.schedulingGates", "kueue.x-k8s.io/admission")],
        0,
    ),
    "fits": (
        "not-stuck",
        "it fits node a100-migok now (1 node has room for it); it names the scheduler "
        "other-scheduler, which has not placed it",
        "nothing in the GPU stack: check that the scheduler other-scheduler runs",
        [
            (
                "node a100-migok",
                "nvidia.com/mig-1g.10gb",
                "7 allocatable, 0 allocated, 7 free; the Pod asks 1",
            ),
            ("Pod default/fits", "spec.schedulerName", "other-scheduler"),
        ],
        1,
    ),
    "dra-noclass": (
        "dra-unallocatable",
        'claim "gpu" (ResourceClaim default/no-class) request "gpu" names DeviceClass '
        "gpu.nvidia.co, which does not exist (did you mean gpu.nvidia.com?)",
        "fix the DeviceClass name to gpu.nvidia.com in ResourceClaim default/no-class",
        [
            ("Pod default/dra-noclass", "resourceClaims gpu", "resourceClaimName no-class"),
            ("ResourceClaim default/no-class", "request gpu", "deviceClassName gpu.nvidia.co"),
            ("cluster", "DeviceClasses", "gpu.nvidia.com"),
        ],
        7,
    ),
    "dra-nomatch": (
        "dra-unallocatable",
        'claim "gpu" (ResourceClaimTemplate default/a100-40gb) request "gpu": no device of '
        "class gpu.nvidia.com matches its selectors (2 devices of the class, 2 devices "
        "published)",
        "fix the selector in ResourceClaimTemplate default/a100-40gb: productName is NVIDIA "
        "A100-SXM4-80GB on the published devices, not 'NVIDIA A100-SXM4-40GB'",
        [
            ("ResourceClaimTemplate default/a100-40gb", "request gpu selectors", FORTY_GB),
            ("cluster", "devices of class gpu.nvidia.com", "2"),
            (
                "cluster",
                "published devices",
                "productName is NVIDIA A100-SXM4-80GB on the published devices, not "
                "'NVIDIA A100-SXM4-40GB'",
            ),
        ],
        7,
    ),
    "dra-waits": (
        "dra-unallocatable",
        'claim "gpu" (ResourceClaimTemplate default/one-gpu) request "gpu" asks for 1 device of '
        "class gpu.nvidia.com; 2 devices match, 2 of them allocated (to ResourceClaims "
        "default/both-gpus), and no node has 1 free",
        "wait for the claims holding the devices to be released (default/both-gpus: their Pods "
        "must end and the claims be deallocated), or add devices",
        [
            (
                "device gpu.nvidia.com/a100-full/gpu-0",
                "allocated to",
                "ResourceClaim default/both-gpus",
            ),
            (
                "device gpu.nvidia.com/a100-full/gpu-1",
                "allocated to",
                "ResourceClaim default/both-gpus",
            ),
        ],
        7,
    ),
}
# What the real scheduler says about each (its reasons for the nodes in the Pod's scope).
SCHEDULER_SAYS = {
    "typo": "5 Insufficient nvidia.com/mig-1g.10g",
    "typo-pinned": "5 node(s) didn't match Pod's node affinity/selector",
    "noplugin": "1 Insufficient nvidia.com/gpu",
    "mig": "1 Insufficient nvidia.com/mig-3g.40gb",
    "full": "1 Insufficient nvidia.com/gpu",
    "cpu-short": "1 Insufficient cpu",
    "placement": "5 node(s) didn't match Pod's node affinity/selector",
    "maint": "1 node(s) were unschedulable",
    "toobig": "5 Insufficient nvidia.com/gpu",
    # DynamicResources' PreFilter: one reason for all nodes; its Filter: per node.
    "dra-noclass": "0/8 nodes are available: request gpu: device class gpu.nvidia.co does not "
    "exist.",
    "dra-nomatch": "5 cannot allocate all claims",
    "dra-waits": "5 cannot allocate all claims",
}


DISAGREEMENTS = {
    "typo-pinned": (
        "disagrees",
        "the scheduler names 1 node(s) were unschedulable, 2 node(s) had untolerated taint(s), "
        "5 node(s) didn't match Pod's node affinity/selector (excluded-by-placement or "
        "node-unavailable): it reports only the first filter each node failed, or the cluster "
        "changed since; name-not-advertised holds now and must be fixed first",
    )
}


@pytest.mark.parametrize("source", ["live", "dump"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_domain_with_its_evidence(
    name: str, source: str, live: dict[str, Obj], dumped: dict[str, Obj]
) -> None:
    record = (live if source == "live" else dumped)[f"default/{name}"]
    domain, verdict, action, facts, candidates = EXPECTED[name]

    assert (record["domain"], record["verdict"], record["next_action"]) == (domain, verdict, action)
    found = [(f["about"], f["name"], f["value"]) for f in record["facts"]]
    assert [f for f in facts if f not in found] == []
    assert record["candidates"]["count"] == candidates
    message = record["scheduler_message"]
    if name in SCHEDULER_SAYS:
        assert message.startswith("0/8 nodes are available: ")
        assert SCHEDULER_SAYS[name] in message
        assert ("scheduler", "FailedScheduling", message) in found  # verbatim, as evidence
        assert (record["agreement"], record["disagreement"]) == DISAGREEMENTS.get(
            name, ("agrees", None)
        )
    else:
        assert (message, record["agreement"]) == (None, "no-event")


def test_live_and_dump_agree_and_leave_the_rest_out(
    live: dict[str, Obj], dumped: dict[str, Obj]
) -> None:
    def comparable(r: Obj) -> Obj:
        facts = [f for f in r["facts"] if f["name"] != "age"]
        return {**r, "time": None, "facts": facts}

    assert sorted(live) == sorted(f"default/{n}" for n in EXPECTED)  # nogpu: asks for none
    assert {k: comparable(r) for k, r in live.items()} == {
        k: comparable(r) for k, r in dumped.items()
    }
    assert set(live["default/full"]) >= {
        "pod",
        "domain",
        "facts",
        "scheduler_message",
        "next_action",
    }
    held = [f["name"] for f in live["default/full"]["facts"]]
    assert "held by Pod default/holder-done" not in held  # Succeeded: it holds nothing


def test_text_groups_by_domain_most_pods_first(cluster: Path) -> None:
    proc = run("--from", str(cluster / "dump.json"), "--no-color")

    assert proc.returncode == 1, proc.stderr
    heads = [line for line in proc.stdout.splitlines() if line and not line.startswith(" ")]
    assert heads[0] == (
        "14 Pending GPU Pods diagnosed, 13 stuck (15 Pending Pods in all; 22 Pods and 8 nodes "
        f"read; as of {heads[0].split('as of ')[1]}"
    )
    assert heads[1:] == [
        "dra-unallocatable: 3 Pods",
        "name-not-advertised: 2 Pods",
        "capacity-exhausted: 2 Pods",
        "gated: 1 Pod",
        "plugin-not-registered: 1 Pod",
        "mig-reconfiguring: 1 Pod",
        "exceeds-any-node: 1 Pod",
        "excluded-by-placement: 1 Pod",
        "node-unavailable: 1 Pod",
        "not-stuck: 1 Pod",
    ]
    assert (
        "    next:      uncordon node a100-cordoned once its maintenance is done "
        "(kubectl uncordon a100-cordoned)"
    ) in proc.stdout.splitlines()


def test_markdown_for_a_ticket(cluster: Path) -> None:
    code, _, markdown = (cluster / "live.md").read_text().partition("\n")

    assert code == "1"
    lines = markdown.splitlines()
    assert lines[0] == "# Pending GPU Pods"
    assert "## `mig-reconfiguring`: 1 Pod" in lines
    assert "### default/mig" in lines
    assert "  - node a100-mig: label nvidia.com/mig.config.state = failed" in lines


@pytest.mark.parametrize(
    ("args", "code", "out", "err"),
    [
        # A Pod named on the command line is diagnosed even when it asks for no GPU.
        (["default/nogpu"], 0, "not-stuck: 1 Pod", ""),
        (["fits"], 0, "not-stuck: 1 Pod", ""),
        (["default/holder-a"], 0, "note: Pod default/holder-a is not waiting for the scheduler: "
         "bound to node a100-full (phase Pending)", ""),
        (["default/nothere"], 2, "error: Pod default/nothere not found", ""),
        (["a/b/c"], 2, "", "Invalid value for PODS: 'a/b/c': give namespace/name or a name"),
        (["-n", "gpu-operator"], 0, "0 Pending GPU Pods diagnosed, 0 stuck (15 Pending Pods in "
         "all; 22 Pods and 8 nodes read; as of 2026-", ""),
    ],
)  # fmt: skip
def test_named_pods(cluster: Path, args: list[str], code: int, out: str, err: str) -> None:
    proc = run("--from", str(cluster / "dump.json"), "--no-color", *args)

    assert proc.returncode == code, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith(out) for line in lines) if out else proc.stdout == ""
    assert err in proc.stderr
