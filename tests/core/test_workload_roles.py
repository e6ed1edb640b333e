"""Roles and Pod counts of custom kinds, as policies/workload-kinds.yaml gives them.

Real upstream manifests first (tests/data/workloads, PROVENANCE.md there, and the
training and serving resources of tests/realworld), each with every (role, Pods) it
makes; then what the shipped entries make of absent fields (the upstream defaults),
of counts that are not whole numbers, and the LeaderWorkerSet's shared template.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.builders import LABELS, POLICIES, container, only, rules, run, shipped
from tests.support.paths import TESTS
from webhook.core.workloads.kinds import WorkloadView
from webhook.core.workloads.shapes import KindShape
from webhook.core.workloads.targets import workload_of
from webhook.sources.policy_files import load_policy_files

DATA = TESTS / "data" / "workloads"
REALWORLD = TESTS / "realworld"

Roles = list[tuple[str, int | None]]


def view(obj: dict[str, Any]) -> WorkloadView:
    found = workload_of(obj, custom=shipped().custom_kinds)
    assert found is not None
    return found


def roles(obj: dict[str, Any]) -> Roles:
    return [(r.name, r.replicas) for r in view(obj).roles]


def document(path: Path, kind: str) -> dict[str, Any]:
    (found,) = [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == kind]
    return found  # type: ignore[no-any-return]


# (file, kind, every role with its Pods). The counts are read off each file by hand.
REAL: list[tuple[Path, str, Roles]] = [
    (DATA / "examples__v2beta1__nccl-tests__nccl-tests.yaml", "MPIJob",
     [("Launcher", 1), ("Worker", 2)]),
    (DATA / "Deployment__Kubernetes__EKS_Multinode_Triton_TRTLLM__multinode_helm_chart__"
     "nccl_test.yaml", "MPIJob", [("Launcher", 1), ("Worker", 2)]),
    (DATA / "examples__pytorch__mnist__v1__pytorch_job_mnist_nccl.yaml", "PyTorchJob",
     [("Master", 1), ("Worker", 1)]),
    (DATA / "samples__kueue__02-pytorchjob.yaml", "PyTorchJob", [("Master", 1), ("Worker", 2)]),
    # a bare Pod: one role, unnamed, of one Pod
    (DATA / "example__rdma-gpu-test-pod1.yaml", "Pod", [("", 1)]),
    # driver: 1 Job x parallelism 1; workers: 2 Jobs x parallelism 1
    (DATA / "samples__kueue__04-jobset.yaml", "JobSet", [("driver", 1), ("workers", 2)]),
    # replicas 1, size 3: one leader, two workers
    (DATA / "samples__kueue__05-leaderworkerset.yaml", "LeaderWorkerSet",
     [("leader", 1), ("worker", 2)]),
    # replicas 2, size 2: two groups of a leader and a worker
    (DATA / "docs__examples__vllm__GPU__lws.yaml", "LeaderWorkerSet",
     [("leader", 2), ("worker", 2)]),
    (REALWORLD / "lws" / "vllm-gpu-lws.yaml", "LeaderWorkerSet", [("leader", 2), ("worker", 2)]),
    (DATA / "ray-operator__config__samples__pytorch-text-classifier__ray-job.pytorch-"
     "distributed-training.yaml", "RayJob", [("head", 1)]),
    (DATA / "ray-operator__config__samples__ray-cluster.kai-gpu-sharing.yaml", "RayCluster",
     [("head", 1), ("shared-gpu", 2)]),
    (REALWORLD / "kuberay" / "ray-job.batch-inference.yaml", "RayJob", [("head", 1)]),
    (REALWORLD / "kuberay" / "ray-service.text-summarizer.yaml", "RayService",
     [("head", 1), ("gpu-group", 1)]),
    (DATA / "example__MindSpore-example__mindspore_gpu__mindspore-gpu.yaml", "Job",
     [("mpimaster", 1), ("mpiworker", 2)]),
    (REALWORLD / "volcano" / "mindspore-gpu.yaml", "Job", [("mpimaster", 1), ("mpiworker", 2)]),
    (REALWORLD / "training-operator" / "pytorch_job_mnist_gloo.yaml", "PyTorchJob",
     [("Master", 1), ("Worker", 1)]),
    (REALWORLD / "training-operator" / "multi_worker_tfjob.yaml", "TFJob", [("Worker", 2)]),
    (REALWORLD / "training-operator" / "paddle-simple-gpu.yaml", "PaddleJob", [("Worker", 2)]),
    (REALWORLD / "trainer" / "lammps-train-gpus.yaml", "TrainJob", [("trainer", 2)]),
    (
        REALWORLD / "trainer" / "02-runtime-patches.yaml",
        "TrainJob",
        [("node", 0), ("trainer", 2)],  # the patch of the runtime's "node" job: no Pods of its own
    ),
    # a runtime runs no Pods of its own: named roles, no counts
    (REALWORLD / "trainer" / "torchtune-llama3_2_1B.yaml", "ClusterTrainingRuntime",
     [("dataset-initializer", None), ("model-initializer", None), ("node", None)]),
    (REALWORLD / "spark-operator" / "spark-pi.yaml", "SparkApplication",
     [("driver", 1), ("executor", 1)]),
    (REALWORLD / "nim-operator" / "standalone-basic-llm.yaml", "NIMService", [("", 1)]),
    (DATA / "examples__spark-pi-emptydir.yaml", "SparkApplication",
     [("driver", 1), ("executor", 1)]),
    (DATA / "config__samples__nim__serving__standalone__no-precaching__llm-emptydir.yaml",
     "NIMService", [("", 1)]),
    # GPUs as a bare `gpu: "1"` in the kind's own ResourceItems; a Dynamo component's
    # extraPodSpec is its pod-level fields (no Pods of its own), its resources the GPUs
    (DATA / "examples__backends__vllm__deploy__agg.yaml", "DynamoGraphDeployment",
     [("Frontend", 0), ("worker", 0), ("Frontend", 1), ("worker", 1)]),
    (DATA / "operator__config__samples__production-stack_v1alpha1_vllmruntime.yaml",
     "VLLMRuntime", [("deploymentConfig", 2)]),
    # autoscaled: unknown
    (DATA / "docs__samples__accelerators__tensorflow-gpu.yaml", "InferenceService",
     [("predictor", None)]),
    (REALWORLD / "kserve" / "hf_isvc.yaml", "InferenceService", [("predictor", None)]),
    (REALWORLD / "notebooks" / "_v1_notebook.yaml", "Notebook", [("", None)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "kind", "expected"), REAL, ids=[f"{p.parent.name}/{p.name}" for p, _, _ in REAL]
)
def test_real_manifests(path: Path, kind: str, expected: Roles) -> None:
    found = view(document(path, kind))
    assert [(r.name, r.replicas) for r in found.roles] == expected
    assert found.unmatched == ()


def test_every_manifest_in_the_data_folder_is_in_the_table() -> None:
    tested = {p.name for p, _, _ in REAL if p.parent == DATA}
    assert tested == {p.name for p in DATA.glob("*.yaml")}


def tpl(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"labels": LABELS}, "spec": {"containers": list(containers)}}


def cr(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "w"}, "spec": spec}


T = tpl(container())


def lws(spec: dict[str, Any], template: dict[str, Any] = T) -> dict[str, Any]:
    group = {"workerTemplate": template, **spec.pop("group", {})}
    return cr(
        "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", {"leaderWorkerTemplate": group, **spec}
    )


def ray(kind: str, *groups: dict[str, Any]) -> dict[str, Any]:
    cluster = {
        "headGroupSpec": {"template": T},
        "workerGroupSpecs": [{"template": T, **g} for g in groups],
    }
    field = {"RayCluster": None, "RayJob": "rayClusterSpec", "RayService": "rayClusterConfig"}[kind]
    return cr("ray.io/v1", kind, cluster if field is None else {field: cluster})


def jobset(*jobs: dict[str, Any]) -> dict[str, Any]:
    replicated = [
        {
            "name": j.get("name", "j"),
            **({"replicas": j["replicas"]} if "replicas" in j else {}),
            "template": {"spec": {"template": T, **j.get("job", {})}},
        }
        for j in jobs
    ]
    return cr("jobset.x-k8s.io/v1alpha2", "JobSet", {"replicatedJobs": replicated})


def replica_specs(kind: str, field: str, **types: dict[str, Any]) -> dict[str, Any]:
    version = "v2beta1" if kind == "MPIJob" else "v1"
    specs = {name: {"template": T, **fields} for name, fields in types.items()}
    return cr(f"kubeflow.org/{version}", kind, {field: specs})


def with_spec(obj: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**obj, "spec": {**obj["spec"], **fields}}


SPARK_POD = {"cores": 1, "memory": "512m"}

# What the shipped entries make of absent fields (each upstream default, cited in
# policies/workload-kinds.yaml) and of set ones, for the kinds the table above lacks.
DEFAULTS: list[tuple[str, dict[str, Any], Roles]] = [
    ("training-operator: replicas 1 when absent",
     replica_specs("PyTorchJob", "pytorchReplicaSpecs", Master={}, Worker={}),
     [("Master", 1), ("Worker", 1)]),
    ("XGBoostJob as examples/xgboost/xgboostjob.yaml",
     replica_specs("XGBoostJob", "xgbReplicaSpecs", Master={"replicas": 1}, Worker={"replicas": 2}),
     [("Master", 1), ("Worker", 2)]),
    ("XGBoostJob defaults", replica_specs("XGBoostJob", "xgbReplicaSpecs", Worker={}),
     [("Worker", 1)]),
    ("JAXJob as examples/jax/jax-dist-spmd-mnist",
     replica_specs("JAXJob", "jaxReplicaSpecs", Worker={"replicas": 2}), [("Worker", 2)]),
    ("JAXJob defaults", replica_specs("JAXJob", "jaxReplicaSpecs", Worker={}), [("Worker", 1)]),
    ("TFJob defaults", replica_specs("TFJob", "tfReplicaSpecs", Chief={}, PS={"replicas": 2}),
     [("Chief", 1), ("PS", 2)]),
    ("PaddleJob defaults", replica_specs("PaddleJob", "paddleReplicaSpecs", Master={}),
     [("Master", 1)]),
    # the Launcher first, as the entry lists it, wherever the object puts it
    ("MPIJob: Launcher 1, Worker 0 when absent",
     replica_specs("MPIJob", "mpiReplicaSpecs", Worker={}, Launcher={}),
     [("Launcher", 1), ("Worker", 0)]),
    ("MPIJob: only Launcher and Worker make Pods",
     replica_specs("MPIJob", "mpiReplicaSpecs", Launcher={}, Other={"replicas": 5}),
     [("Launcher", 1)]),
    ("RayCluster: a group's replicas 0 and numOfHosts 1 when absent",
     ray("RayCluster", {"groupName": "g"}), [("head", 1), ("g", 0)]),
    ("RayCluster: multi-host groups, as ray-cluster.tpu-v6e-16-multihost.yaml",
     ray("RayCluster", {"groupName": "tpu-group", "replicas": 1, "numOfHosts": 4},
         {"groupName": "cpu", "replicas": 3}),
     [("head", 1), ("tpu-group", 4), ("cpu", 3)]),
    ("RayCluster: a group without groupName is named by its index",
     ray("RayCluster", {"replicas": 2}), [("head", 1), ("workerGroupSpecs[0]", 2)]),
    ("RayService", ray("RayService", {"groupName": "gpu", "replicas": 2, "numOfHosts": 2}),
     [("head", 1), ("gpu", 4)]),
    ("RayJob: the submitter's count depends on submissionMode",
     with_spec(ray("RayJob", {"groupName": "g", "replicas": 1}), submitterPodTemplate=T),
     [("head", 1), ("g", 1), ("submitter", None)]),
    ("JobSet: replicas 1 and parallelism 1 when absent", jobset({"name": "solo"}),
     [("solo", 1)]),
    ("JobSet: replicas x parallelism, as site/static/examples/simple/paralleljobs.yaml",
     jobset({"name": "workers", "job": {"parallelism": 4, "completions": 4}},
            {"name": "driver", "replicas": 2, "job": {"parallelism": 1}}),
     [("workers", 4), ("driver", 2)]),
    ("LeaderWorkerSet: replicas 1 and size 1 when absent", lws({}),
     [("leader", 1), ("worker", 0)]),
    ("LeaderWorkerSet without leaderTemplate, as config/samples/leaderworkerset_v1_"
     "leaderworkerset.yaml", lws({"replicas": 3, "group": {"size": 4}}),
     [("leader", 3), ("worker", 9)]),
    ("LeaderWorkerSet with a leader template",
     lws({"replicas": 2, "group": {"size": 8, "leaderTemplate": T}}),
     [("leader", 2), ("worker", 14)]),
    ("Volcano: replicas 0 when absent; a nameless task by its index",
     cr("batch.volcano.sh/v1alpha1", "Job",
        {"tasks": [{"name": "ps", "template": T}, {"replicas": 3, "template": T}]}),
     [("ps", 0), ("tasks[1]", 3)]),
    ("NIMService: replicas 1 when absent",
     cr("apps.nvidia.com/v1alpha1", "NIMService", {"image": {"repository": "nim"}}), [("", 1)]),
    ("NIMService multi-node, as multi-node/multi-node-nimservice.yaml",
     cr("apps.nvidia.com/v1alpha1", "NIMService",
        {"replicas": 1, "multiNode": {"parallelism": {"pipeline": 2, "tensor": 8}}}),
     [("", 2)]),
    ("SparkApplication: executors unknown without instances",
     cr("sparkoperator.k8s.io/v1beta2", "SparkApplication",
        {"driver": SPARK_POD, "executor": SPARK_POD}),
     [("driver", 1), ("executor", None)]),
    ("SparkApplication with instances",
     cr("sparkoperator.k8s.io/v1beta2", "SparkApplication",
        {"driver": SPARK_POD, "executor": {**SPARK_POD, "instances": 4}}),
     [("driver", 1), ("executor", 4)]),
    ("TrainJob: the runtime's numNodes when absent: unknown",
     cr("trainer.kubeflow.org/v1alpha1", "TrainJob",
        {"runtimeRef": {"name": "torch"}, "trainer": {"image": "x"}}),
     [("trainer", None)]),
    ("TrainingRuntime: named roles, no counts",
     cr("trainer.kubeflow.org/v1alpha1", "TrainingRuntime",
        {"template": {"spec": {"replicatedJobs": [
            {"name": "node", "template": {"spec": {"template": T}}}]}}}),
     [("node", None)]),
    ("InferenceService with a transformer",
     cr("serving.kserve.io/v1beta1", "InferenceService",
        {"predictor": {"model": container("kserve-container")},
         "transformer": {"containers": [container("t")]}}),
     [("predictor", None), ("transformer", None)]),
    ("a groupName that is no string", ray("RayCluster", {"groupName": 7, "replicas": 1}),
     [("head", 1), ("workerGroupSpecs[0]", 1)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("obj", "expected"), [r[1:] for r in DEFAULTS], ids=[r[0] for r in DEFAULTS]
)
def test_defaults_and_synthetic_objects(obj: dict[str, Any], expected: Roles) -> None:
    assert roles(obj) == expected


def test_every_shipped_kind_has_a_row() -> None:
    kinds = {(k.group, k.kind) for k in shipped().custom_kinds}
    objs = [document(p, kind) for p, kind, _ in REAL] + [o for _, o, _ in DEFAULTS]
    found = {(o["apiVersion"].split("/")[0], o["kind"]) for o in objs}
    assert found - {("v1", "Pod")} == kinds  # a bare Pod is a core kind, in the table too


# A count the apiserver would refuse (a string, a float, a negative number, a boolean)
# is unknown, as kinds.count reads a core kind's; so is a `less` larger than the value.
UNKNOWN: list[tuple[str, dict[str, Any], Roles]] = [
    ("a string", replica_specs("PyTorchJob", "pytorchReplicaSpecs", Worker={"replicas": "2"}),
     [("Worker", None)]),
    ("a float", replica_specs("TFJob", "tfReplicaSpecs", Worker={"replicas": 2.0}),
     [("Worker", None)]),
    ("a negative number", jobset({"name": "j", "replicas": -1}), [("j", None)]),
    ("a boolean", ray("RayCluster", {"groupName": "g", "replicas": 1, "numOfHosts": True}),
     [("head", 1), ("g", None)]),
    ("one factor unknown, another 0", ray("RayCluster", {"groupName": "g", "numOfHosts": "4"}),
     [("head", 1), ("g", None)]),
    ("size 0: less 1 than nothing", lws({"replicas": 2, "group": {"size": 0}}),
     [("leader", 2), ("worker", None)]),
]  # fmt: skip


@pytest.mark.parametrize(("obj", "expected"), [r[1:] for r in UNKNOWN], ids=[r[0] for r in UNKNOWN])
def test_unknown_counts(obj: dict[str, Any], expected: Roles) -> None:
    found = view(obj)
    assert [(r.name, r.replicas) for r in found.roles] == expected
    assert found.replicas is None  # the workload's total too


def test_a_total_adds_every_role() -> None:
    assert view(lws({"replicas": 3, "group": {"size": 4}})).replicas == 12


def test_roles_name_their_holder() -> None:
    found = view(jobset({"name": "a"}, {"name": "b"}))
    assert [r.path for r in found.roles] == [
        ("spec", "replicatedJobs", 0),
        ("spec", "replicatedJobs", 1),
    ]
    assert [r.path for r in view(lws({})).roles] == [(), ()]


def test_a_leader_without_template_shares_the_worker_view() -> None:
    found = view(lws({"replicas": 2, "group": {"size": 3}}))
    leader, worker = found.roles
    assert leader.pod is worker.pod
    assert found.pods == [worker.pod]
    assert worker.pod.path == ("spec", "leaderWorkerTemplate", "workerTemplate", "spec")


def test_a_shared_template_is_judged_once() -> None:
    privileged = container("w", securityContext={"privileged": True})
    decision = run(only("gpu-device-injection"), lws({"replicas": 2}, tpl(privileged)))
    assert rules(decision) == ["privileged"]
    assert decision.pod_specs == 1
    assert decision.findings[0].path == (
        "spec", "leaderWorkerTemplate", "workerTemplate", "spec", "containers", 0,
        "securityContext", "privileged",
    )  # fmt: skip


def test_a_leader_template_of_its_own_is_judged_too() -> None:
    privileged = tpl(container("w", securityContext={"privileged": True}))
    obj = lws({"group": {"leaderTemplate": privileged}}, privileged)
    decision = run(only("gpu-device-injection"), obj)
    assert rules(decision) == ["privileged", "privileged"]
    assert decision.pod_specs == 2


KINDS = """\
apiVersion: gpu-admission.io/v1alpha1
kind: WorkloadKinds
metadata: {name: k}
spec:
  customResources:
    - group: example.com
      kind: Thing
      templates:
%s
"""


def kinds_of(tmp_path: Path, entries: str) -> tuple[KindShape, ...]:
    """The kinds of a WorkloadKinds document with these templates (and a policy, as a
    policy set needs one)."""
    path = tmp_path / "kinds.yaml"
    path.write_text(KINDS % entries)
    return load_policy_files([path, POLICIES / "gpu-device-injection.yaml"]).custom_kinds


# Fields of a WorkloadKinds entry on an object of their own: (templates entries, object
# spec, roles). Each shows one rule of role_of.
CONFIGURED: list[tuple[str, str, dict[str, Any], Roles]] = [
    ("the key a * matched, no count", "        - spec.groups.*.template",
     {"groups": {"a": {"template": T}}}, [("a", None)]),
    ("a constant", "        - {path: spec.groups.*.template, replicas: [3]}",
     {"groups": {"a": {"template": T}}}, [("a", 3)]),
    ("a plain path: 1 when absent",
     "        - {path: spec.groups.*.template, replicas: [size]}",
     {"groups": {"a": {"template": T, "size": 5}, "b": {"template": T}}}, [("a", 5), ("b", 1)]),
    ("from the root, times a constant, less",
     "        - {path: spec.groups.*.template, replicas: [2, {path: $.spec.n, less: 1}]}",
     {"n": 4, "groups": {"a": {"template": T}}}, [("a", 6)]),
    ("default null: unknown when absent",
     "        - {path: spec.groups.*.template, replicas: [{path: size, default: null}]}",
     {"groups": {"a": {"template": T}, "b": {"template": T, "size": 0}}}, [("a", None), ("b", 0)]),
    ("roleAt, nested", "        - {path: spec.groups.*.template, roleAt: meta.name}",
     {"groups": [{"meta": {"name": "x"}, "template": T}, {"template": T}]},
     [("x", None), ("groups[1]", None)]),
    ("roleAt from the root", "        - {path: spec.template, roleAt: $.metadata.name}",
     {"template": T}, [("w", None)]),
    ("a literal role", "        - {path: spec.template, role: main, replicas: [1]}",
     {"template": T}, [("main", 1)]),
    ("a fallback without a role: named by its own path",
     "        - {path: spec.leader, fallback: spec.worker}\n        - spec.worker",
     {"worker": T}, [("leader", None), ("worker", None)]),
    ("a fallback not taken", "        - {path: spec.leader, fallback: spec.worker}",
     {"leader": T, "worker": T}, [("leader", None)]),
    ("a fallback to a null template", "        - {path: spec.leader, fallback: spec.worker}",
     {"leader": None, "worker": T}, [("leader", None)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("entries", "spec", "expected"), [r[1:] for r in CONFIGURED], ids=[r[0] for r in CONFIGURED]
)
def test_configured_roles(
    tmp_path: Path, entries: str, spec: dict[str, Any], expected: Roles
) -> None:
    found = workload_of(cr("example.com/v1", "Thing", spec), custom=kinds_of(tmp_path, entries))
    assert found is not None
    assert [(r.name, r.replicas) for r in found.roles] == expected
    assert found.unmatched == ()


def test_a_fallback_that_matches_nothing_is_unmatched(tmp_path: Path) -> None:
    entry = "        - {path: spec.leader, fallback: spec.worker}"
    found = workload_of(cr("example.com/v1", "Thing", {}), custom=kinds_of(tmp_path, entry))
    assert found is not None
    assert found.roles == ()
    assert [shape.path for _, shape in found.unmatched] == [("spec", "leader")]


@pytest.mark.parametrize(
    ("name", "kind", "path"),
    [
        ("examples__backends__vllm__deploy__agg.yaml", "DynamoGraphDeployment",
         ("spec", "services", "worker", "resources", "limits", "nvidia.com/gpu")),
        ("operator__config__samples__production-stack_v1alpha1_vllmruntime.yaml", "VLLMRuntime",
         ("spec", "deploymentConfig", "resources", "limits", "nvidia.com/gpu")),
    ],
)  # fmt: skip
def test_a_bare_gpu_count_is_the_resource_its_operator_makes(
    name: str, kind: str, path: tuple[str, ...]
) -> None:
    """Dynamo's and vLLM production-stack's `gpu: "1"` (gpuType, else nvidia.com/gpu)."""
    amounts = [a for r in view(document(DATA / name, kind)).roles for a in r.pod.amounts]
    assert [(a.resource, a.amount, a.path) for a in amounts] == [("nvidia.com/gpu", 1, path)]
