"""How the real kube-scheduler places a multi-Pod GPU job, with and without a gang.

One cluster (../shared/tools/kubecluster v1.37.2: etcd, kube-apiserver, kube-scheduler,
kube-controller-manager) with the Workload API on, and kwok (../shared/tools/kwok) playing
the kubelet of four H100 Nodes of 8 GPUs each: it keeps them Ready and moves the Pods
bound to them to Running. Two jobs of three Pods of 8 GPUs each (requests = limits,
labelled as the Kubeflow training-operator labels a PyTorchJob's Pods), each pinned by
`nodeSelector: {pool: ...}` to two Nodes of its own, 16 GPUs for 24 asked, so that one
job's Pods never compete with the other's:

- "partial" (`train-worker-0..2`, pool train): no gang mechanism. The scheduler places
  Pods one at a time (pkg/scheduler/schedule_one.go: one Pod per scheduling cycle, each
  judged alone by the NodeResourcesFit filter, pkg/scheduler/framework/plugins/
  noderesources/fit.go), so two are bound to the two Nodes and Running, and the third
  stays Pending with a FailedScheduling event "... Insufficient nvidia.com/gpu ...":
  a partial placement holds 16 GPUs for a job that cannot start.
- "never fits" (`gang-worker-0..2`, pool gang): the same job as one gang of the
  Workload API (KEP-4671): a Workload with one pod group template whose
  `schedulingPolicy.gang.minCount` is 3, the PodGroup a workload controller would make
  of it (no controller does for bare Pods: the fixture creates it), and Pods naming that
  PodGroup in `spec.schedulingGroup.podGroupName`. The scheduler takes the group's Pods
  in one pod group scheduling cycle (pkg/scheduler/schedule_one_podgroup.go: each Pod is
  placed in the cycle's snapshot only tentatively, assumed and then reverted, and the
  GangScheduling plugin, pkg/scheduler/framework/plugins/gangscheduling/
  gangscheduling.go, lets the group bind only when minCount of them fit), so no rank is
  bound, not even the two that would fit, for as long as the test watches (HOLD); the
  PodGroup's condition says Unschedulable. Binding is final (a Pod's `spec.nodeName` is
  never unset, and no Pod here is made twice), so one look after HOLD, with no
  `Scheduled` event, proves none was bound before.

The scheduler's texts (v1.37.2; v1.36.3's are in WORKLOAD_APIS): the ranks the gang holds
back get "pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0
remaining, pod group preemption: ...", the rank that does not fit "0/4 nodes are
available: 2 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node
affinity/selector.", the PodGroup condition PodGroupInitiallyScheduled=False
(Unschedulable) "minCount (3) cannot be satisfied: ...". The source files named here are
upstream kubernetes of the 1.36/1.37 line, read from indexed copies, not at the tags.

The fixture `gang` leaves the cluster running for the module and, once both jobs have
settled, writes `kubectl get nodes,pods,events -A -o json` (the kit's kubectl of the
cluster's version) to `dump`, for the tests below that diagnose the cluster live and
from the dump.

The Workload API as the apiserver serves it (`kubectl api-resources`, `kubectl explain`)
is not the shape of Kubernetes 1.35 (`scheduling.k8s.io/v1alpha1`, Pods with
`spec.workloadRef`): neither v1.36.3 nor v1.37.2 serves that group version or that Pod
field (test_workload_ref_of_1_35_is_gone).
- v1.36.3: `scheduling.k8s.io/v1alpha2` Workload and PodGroup (the PodGroup's
  `spec.podGroupTemplateRef.workload.{workloadName,podGroupTemplateName}`), feature gates
  GenericWorkload and GangScheduling (alpha) on apiserver, scheduler and
  controller-manager, and `--runtime-config=scheduling.k8s.io/v1alpha2=true`;
- v1.37.2 (used here, the newest): `scheduling.k8s.io/v1beta1` (the PodGroup's
  `spec.workloadRef.{workloadName,templateName}`), the gate GenericWorkload (beta, off by
  default; there is no GangScheduling gate any more) and
  `--runtime-config=scheduling.k8s.io/v1beta1=true`.
Both versions pass this file; WORKLOAD_APIS holds the shapes and texts of each (set
VERSION to switch).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.clirun import gpu_admission
from tests.support.controlplane import Api, Obj
from tests.support.kubeclusters import KIT, NEWEST, Cluster, Clusters, start_cluster
from tests.support.paths import TOOLS

KWOK = TOOLS / "kwok"


@dataclass(frozen=True)
class WorkloadApi:
    """The Workload API of one Kubernetes version, and what its scheduler says."""

    group_version: str
    gates: str  # on kube-apiserver, kube-scheduler and kube-controller-manager
    template_ref: Obj  # the PodGroup's reference to the Workload's pod group template
    condition: str  # the PodGroup status condition the scheduler writes
    condition_message: str  # how its message begins
    gang_message: str  # how the FailedScheduling of the ranks the gang holds back begins


WORKLOAD, TEMPLATE, PODGROUP = "gang", "workers", "gang-workers"
WORKLOAD_APIS = {
    "v1.36.3": WorkloadApi(
        "scheduling.k8s.io/v1alpha2",
        "GenericWorkload=true,GangScheduling=true",
        {"podGroupTemplateRef": {"workload": {
            "workloadName": WORKLOAD, "podGroupTemplateName": TEMPLATE}}},
        "PodGroupScheduled",
        "pod group is unschedulable",
        "pod group is unschedulable, waiting for minCount pods from a gang to be scheduled",
    ),
    "v1.37.2": WorkloadApi(
        "scheduling.k8s.io/v1beta1",
        "GenericWorkload=true",
        {"workloadRef": {"workloadName": WORKLOAD, "templateName": TEMPLATE}},
        "PodGroupInitiallyScheduled",
        "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining",
        "pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0 remaining",
    ),
}  # fmt: skip
VERSION = NEWEST
API = WORKLOAD_APIS[VERSION]

pytestmark = [
    pytest.mark.skipif(
        not (KIT / "bin" / VERSION).is_dir(), reason=f"kubecluster {VERSION} not found at {KIT}"
    ),
    pytest.mark.skipif(not (KWOK / "kwok").exists(), reason=f"kwok not found at {KWOK}"),
    pytest.mark.xdist_group("kubecluster-gang"),
]

NAMESPACE = "gang"
HOLD = 15.0  # seconds the gang is watched Pending, from the creation of its Pods
H100 = "NVIDIA-H100-80GB-HBM3"
GPU = "nvidia.com/gpu"
GPU8 = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: "8"}
KWOK_NODE = {"kwok.x-k8s.io/node": "fake"}  # the annotation kwok is told to manage
POOLS = {"train": ["h100-train-0", "h100-train-1"], "gang": ["h100-gang-0", "h100-gang-1"]}
NODES = [name for names in POOLS.values() for name in names]
JOB_NAME = "training.kubeflow.org/job-name"
TRAIN = [f"train-worker-{i}" for i in range(3)]
GANG = [f"gang-worker-{i}" for i in range(3)]


@dataclass(frozen=True)
class GangCluster:
    kubeconfig: Path
    dump: Path
    namespace: str
    version: str


def node(name: str, pool: str) -> Obj:
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": H100,
        "nvidia.com/gpu.count": "8",
        "pool": pool,
    }
    meta = {"name": name, "labels": labels, "annotations": KWOK_NODE}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta}


def worker(job: str, index: int, **spec: Any) -> Obj:
    """A PyTorchJob's worker Pod as the training-operator makes it (its labels,
    pkg/apis/kubeflow.org/v1/common_types.go; its container name, `pytorch`)."""
    labels = {
        JOB_NAME: job,
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": str(index),
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
    }
    gpus = {GPU: "8"}
    main = {"name": "pytorch", "image": "registry.example.com/train:1",
            "resources": {"requests": gpus, "limits": gpus}}  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{job}-worker-{index}", "namespace": NAMESPACE, "labels": labels},
        "spec": {"containers": [main], "nodeSelector": {"pool": job}, **spec},
    }


def gang_objects() -> list[Obj]:
    """The Workload, the PodGroup a workload controller makes of its template, and the
    Pods naming the PodGroup."""
    gang_policy = {"gang": {"minCount": 3}}
    workload = {
        "apiVersion": API.group_version,
        "kind": "Workload",
        "metadata": {"name": WORKLOAD, "namespace": NAMESPACE},
        "spec": {"podGroupTemplates": [{"name": TEMPLATE, "schedulingPolicy": gang_policy}]},
    }
    podgroup = {
        "apiVersion": API.group_version,
        "kind": "PodGroup",
        "metadata": {"name": PODGROUP, "namespace": NAMESPACE},
        "spec": {**API.template_ref, "schedulingPolicy": gang_policy},
    }
    group = {"podGroupName": PODGROUP}
    return [workload, podgroup, *(worker("gang", i, schedulingGroup=group) for i in range(3))]


# -- the cluster and kwok ----------------------------------------------------------------


def start_gated_cluster(directory: Path) -> Cluster:
    """kubecluster of VERSION with the Workload API on (its gates and group version)."""
    gates = f"--feature-gates={API.gates}"
    args = [
        f"--apiserver-arg={gates}",
        f"--apiserver-arg=--runtime-config={API.group_version}=true",
        f"--scheduler-arg={gates}",
        f"--controller-manager-arg={gates}",
    ]
    return start_cluster(directory, VERSION, args)


def start_kwok(kubeconfig: Path, log: Path) -> subprocess.Popen[bytes]:
    """kwok managing the Nodes annotated KWOK_NODE, with its own stage files (README)."""
    stages = [arg for f in sorted((KWOK / "stages").glob("*.yaml")) for arg in ("-c", str(f))]
    selector = ",".join(f"{k}={v}" for k, v in KWOK_NODE.items())
    command = [str(KWOK / "kwok"), "--kubeconfig", str(kubeconfig),
               f"--manage-nodes-with-annotation-selector={selector}",
               "--cidr", "127.64.0.0/16", "--node-ip", "127.0.0.1", *stages]  # fmt: skip
    with log.open("wb") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)


def stop_kwok(kwok: subprocess.Popen[bytes]) -> None:
    if kwok.poll() is None:
        kwok.terminate()
        try:
            kwok.wait(10)
        except subprocess.TimeoutExpired:
            kwok.kill()
            kwok.wait()


# -- reading the cluster ------------------------------------------------------------------


@dataclass(frozen=True)
class State:
    """Pods and events of the namespace, and the Nodes, live or from the dump."""

    nodes: dict[str, Obj]
    pods: dict[str, Obj]
    events: list[Obj]
    at: datetime  # when it was read

    def failed(self, pod: str) -> list[str]:
        """The messages of the pod's FailedScheduling events."""
        return [e["message"] for e in self._about(pod) if e["reason"] == "FailedScheduling"]

    def reasons(self, pod: str) -> set[str]:
        return {e["reason"] for e in self._about(pod)}

    def _about(self, pod: str) -> list[Obj]:
        return [e for e in self.events if e["involvedObject"]["name"] == pod]


def live(api: Api) -> State:
    def items(path: str) -> list[Obj]:
        found: list[Obj] = api.call("GET", path)["items"]
        return found

    return State(
        {n["metadata"]["name"]: n for n in items("/api/v1/nodes")},
        {p["metadata"]["name"]: p for p in items(f"/api/v1/namespaces/{NAMESPACE}/pods")},
        items(f"/api/v1/namespaces/{NAMESPACE}/events"),
        datetime.now(UTC),
    )


def dumped(dump: Path) -> State:
    """The dump's Nodes, and its Pods and events of NAMESPACE."""
    items = json.loads(dump.read_text())["items"]

    def of(kind: str, namespace: str | None) -> list[Obj]:
        return [
            i for i in items if i["kind"] == kind and i["metadata"].get("namespace") == namespace
        ]

    return State(
        {n["metadata"]["name"]: n for n in of("Node", None)},
        {p["metadata"]["name"]: p for p in of("Pod", NAMESPACE)},
        of("Event", NAMESPACE),
        datetime.fromtimestamp(dump.stat().st_mtime, UTC),
    )


def bound(state: State, names: list[str]) -> dict[str, str]:
    """Pod -> the Node it is bound to, of those bound."""
    found = {n: state.pods[n]["spec"].get("nodeName") for n in names if n in state.pods}
    return {pod: node for pod, node in found.items() if node}


def ready(obj: Obj) -> bool:
    conditions = obj.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def podgroup(api: Api) -> Obj:
    return api.call("GET", f"/apis/{API.group_version}/namespaces/{NAMESPACE}/podgroups/{PODGROUP}")


def unschedulable(group: Obj) -> Obj | None:
    """The PodGroup's condition that says it does not fit, if written yet."""
    for c in group.get("status", {}).get("conditions") or []:
        if c["type"] == API.condition and c["status"] == "False" and c["reason"] == "Unschedulable":
            return dict(c)
    return None


def _partial_settled(state: State) -> bool:
    placed = bound(state, TRAIN)
    waiting = [p for p in TRAIN if p not in placed]
    return (
        len(placed) == 2
        and all(state.pods[p]["status"].get("phase") == "Running" for p in placed)
        and len(waiting) == 1
        and any(f"Insufficient {GPU}" in m for m in state.failed(waiting[0]))
    )


def _gang_settled(api: Api, state: State) -> bool:
    return all(state.failed(p) for p in GANG) and unschedulable(podgroup(api)) is not None


def wait(what: str, api: Api, done: Callable[[State], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not done(state := live(api)):
        if time.monotonic() > deadline:
            summary = {
                name: (p["spec"].get("nodeName"), p["status"].get("phase"), state.failed(name))
                for name, p in state.pods.items()
            }
            raise AssertionError(f"waited {timeout} s for {what}: {summary}")
        time.sleep(0.25)


# -- the fixture --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gang(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GangCluster]:
    """The cluster with both jobs settled (the gang watched Pending for HOLD seconds) and
    its dump; stopped, with kwok, at the end of the module whatever happens."""
    base = tmp_path_factory.mktemp("kubecluster-gang")
    clusters = Clusters(base)
    try:
        cluster = clusters.started[VERSION] = start_gated_cluster(base / VERSION)
        api = Api(cluster.kubeconfig)
        for pool, names in POOLS.items():
            for name in names:
                api.patch_status(
                    api.create(node(name, pool)), {"capacity": GPU8, "allocatable": GPU8}
                )
        # After the status: kwok's node-initialize keeps an allocatable it finds.
        kwok = start_kwok(cluster.kubeconfig, base / "kwok.log")
        try:
            cluster.namespace(NAMESPACE)  # waits for its default ServiceAccount
            objects = [*gang_objects(), *(worker("train", i) for i in range(3))]
            created = time.monotonic()
            cluster.kubectl("create", "-f", "-", stdin=yaml.safe_dump({"kind": "List",
                            "apiVersion": "v1", "items": objects}))  # fmt: skip
            wait("kwok's Nodes Ready", api, lambda s: all(ready(s.nodes[n]) for n in NODES))
            wait("2 train workers Running, 1 FailedScheduling", api, _partial_settled)
            wait("the gang Unschedulable", api, lambda s: _gang_settled(api, s))
            time.sleep(max(0.0, created + HOLD - time.monotonic()))
            assert kwok.poll() is None, (base / "kwok.log").read_text()[-3000:]
            dump = base / "dump.json"
            dump.write_text(cluster.kubectl("get", "nodes,pods,events", "-A", "-o", "json").stdout)
            yield GangCluster(cluster.kubeconfig, dump, NAMESPACE, VERSION)
        finally:
            stop_kwok(kwok)
    finally:
        clusters.stop_all()


@pytest.fixture(scope="module")
def api(gang: GangCluster) -> Api:
    return Api(gang.kubeconfig)


@pytest.fixture(params=["live", "dump"])
def state(request: pytest.FixtureRequest, gang: GangCluster, api: Api) -> State:
    """What the tests read: the cluster itself, then the dump of it."""
    return live(api) if request.param == "live" else dumped(gang.dump)


# -- the tests ----------------------------------------------------------------------------


def test_nodes_are_kwok_managed_h100s(state: State) -> None:
    assert sorted(state.nodes) == sorted(NODES)
    for name, obj in state.nodes.items():
        assert ready(obj), name  # kwok's heartbeat
        assert obj["status"]["allocatable"][GPU] == "8", name
        assert obj["metadata"]["labels"]["nvidia.com/gpu.product"] == H100


def test_partial_placement_holds_gpus(state: State) -> None:
    """No gang: two ranks bound and Running on the two Nodes, 16 GPUs held, the third
    Pending with the scheduler's FailedScheduling event."""
    placed = bound(state, TRAIN)
    assert len(placed) == 2, placed
    assert sorted(placed.values()) == POOLS["train"]  # distinct Nodes, one rank each
    for pod in placed:
        assert state.pods[pod]["status"]["phase"] == "Running", pod  # kwok's pod-ready
        assert "Scheduled" in state.reasons(pod)
    [waiting] = [p for p in TRAIN if p not in placed]
    assert state.pods[waiting]["status"]["phase"] == "Pending"
    [cond] = [c for c in state.pods[waiting]["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    messages = state.failed(waiting)
    assert messages, state.reasons(waiting)
    # "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) didn't match
    # Pod's node affinity/selector. preemption: ..."
    assert all(f"Insufficient {GPU}" in m for m in messages), messages
    assert all(m.startswith("0/4 nodes are available: 2 Insufficient") for m in messages)


def test_never_fits_gang_stays_pending(state: State, api: Api) -> None:
    """The gang: no rank bound, though two would fit, HOLD seconds after the Pods were
    made; the ranks the gang holds back say so, the one that does not fit says why."""
    assert bound(state, GANG) == {}
    created = max(datetime.fromisoformat(state.pods[p]["metadata"]["creationTimestamp"])
                  for p in GANG)  # fmt: skip
    assert (state.at - created).total_seconds() >= HOLD - 1  # the stamps are whole seconds
    for pod in GANG:
        obj = state.pods[pod]
        assert obj["spec"]["schedulingGroup"] == {"podGroupName": PODGROUP}
        assert obj["status"]["phase"] == "Pending"
        assert "Scheduled" not in state.reasons(pod)
        assert state.failed(pod), pod
    messages = {m for p in GANG for m in state.failed(p)}
    held = {m for m in messages if m.startswith(API.gang_message)}
    assert held, messages
    # The rank tried last: "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2
    # node(s) didn't match Pod's node affinity/selector. ..."
    assert any(f"Insufficient {GPU}" in m for m in messages - held), messages
    condition = unschedulable(podgroup(api))
    assert condition is not None
    assert condition["message"].startswith(API.condition_message), condition


def test_workload_ref_of_1_35_is_gone(gang: GangCluster, api: Api) -> None:
    """`spec.workloadRef` (the 1.35 shape) is no Pod field here: the apiserver refuses it."""
    pod = worker("gang", 9, workloadRef={"name": WORKLOAD, "podGroup": TEMPLATE})
    env = {**os.environ, "KUBECLUSTER_BIN": str(KIT / "bin" / gang.version)}
    run = subprocess.run(
        [str(KIT / "kubectl"), "--kubeconfig", str(gang.kubeconfig), "create", "--dry-run=server",
         "-f", "-"], input=json.dumps(pod), capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert run.returncode != 0
    assert 'unknown field "spec.workloadRef"' in run.stderr, run.stderr


# -- diagnose says so, live and from the dump -----------------------------------------------


@pytest.fixture(params=["live", "dump"])
def diagnosed(request: pytest.FixtureRequest, gang: GangCluster) -> dict[str, Any]:
    """`gpu-admission diagnose -o json` of the cluster (its kubeconfig) or of the dump."""
    where = (
        ["--kubeconfig", str(gang.kubeconfig)]
        if request.param == "live"
        else ["--from", str(gang.dump)]
    )
    proc = gpu_admission("diagnose", "-n", NAMESPACE, "-o", "json", *where)
    assert proc.returncode == 1, proc.stderr  # some Pod is stuck
    records = json.loads(proc.stdout)
    jobs = {r["job"]: r for r in records if r["type"] == "job"}
    pods = {r["pod"]: r for r in records if r["type"] == "pod"}
    return {"jobs": jobs, "pods": pods}


def test_diagnose_partial_placement_holds_gpus(diagnosed: dict[str, Any]) -> None:
    job = diagnosed["jobs"][f"job {NAMESPACE}/train"]
    assert (job["fit"], job["placed"], job["waiting"], job["held"]) == ("never", 2, 1, {GPU: 16})
    assert job["gang"] is None
    assert "with no gang mechanism" in job["verdict"]
    placed = {r["pod"]: (r["node"], r["product"]) for r in job["ranks"] if r["state"] == "placed"}
    assert sorted(n for n, _ in placed.values()) == POOLS["train"]
    assert {p for _, p in placed.values()} == {H100}
    (waiting,) = [r for r in job["ranks"] if r["state"] == "waiting"]
    assert waiting["domain"] == "capacity-exhausted"
    record = diagnosed["pods"][waiting["pod"]]
    assert (
        record["agreement"] == "agrees"
        and "Insufficient nvidia.com/gpu" in (record["scheduler_message"])
    )
    holders = {f["name"] for f in record["facts"] if f["name"].startswith("held by Pod")}
    assert holders == {f"held by Pod {p}" for p in placed}
    assert f"kubectl get pods -n {NAMESPACE} -l {JOB_NAME}=train -o wide" in job["commands"]


def test_diagnose_never_fits_gang(diagnosed: dict[str, Any]) -> None:
    job = diagnosed["jobs"][f"job {NAMESPACE}/gang"]
    assert (job["fit"], job["placed"], job["waiting"], job["held"]) == ("never", 0, 3, {})
    assert job["gang"] == "gang: spec.schedulingGroup.podGroupName"
    assert job["verdict"].startswith("3 of 3 ranks wait. The job can never be placed at once: ")
    assert {r["state"] for r in job["ranks"]} == {"waiting"}
    domains = {diagnosed["pods"][f"{NAMESPACE}/{name}"]["domain"] for name in GANG}
    # two ranks fit a node alone (the gang holds them back), one does not (Insufficient)
    assert domains <= {"gang-does-not-fit", "capacity-exhausted"}
    assert "gang-does-not-fit" in domains
    # the GangScheduling plugin's words, and a rank's Insufficient in the group's cycle,
    # are evidence for the gang's domain
    ranks = [diagnosed["pods"][f"{NAMESPACE}/{name}"] for name in GANG]
    assert {r["agreement"] for r in ranks if r["domain"] == "gang-does-not-fit"} == {"agrees"}
    assert {r["domain"] for r in job["ranks"]} == domains
