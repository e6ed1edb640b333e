"""Workload shapes beyond PodTemplateSpecs, paths that match nothing, and GPU kinds
no WorkloadKinds entry names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.builders import POLICIES, container, gpu, run, shipped
from webhook.core.engine.evaluation import Finding
from webhook.core.kit.paths import Path as ObjPath
from webhook.core.workloads.targets import pod_views
from webhook.sources.policy_files import load_policy_files

LABELS = {"team": "ml"}


def cr(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": "w", "namespace": "ml", "labels": {"from": "object"}}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}


# (object, [(pod spec path, metadata path, container names, GPU amount paths, labels)])
SHAPED_KINDS: list[
    tuple[dict[str, Any], list[tuple[ObjPath, ObjPath, list[str], list[str], dict[str, str]]]]
] = [
    (
        cr("kubeflow.org/v1", "Notebook", {"template": {"spec": {"containers": [gpu(name="nb")]}}}),
        [
            (
                ("spec", "template", "spec"),
                ("metadata",),
                ["nb"],
                ['spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"]'],
                {"from": "object"},
            )
        ],
    ),
    (
        cr(
            "serving.kserve.io/v1beta1",
            "InferenceService",
            {
                "predictor": {
                    "labels": {"tier": "predictor"},
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                    "model": {
                        "modelFormat": {"name": "huggingface"},
                        "resources": {"limits": {"nvidia.com/gpu": 1}},
                    },
                    "containers": [container("sidecar")],
                },
                "transformer": {"containers": [container("kserve-container")]},
            },
        ),
        [
            (
                ("spec", "predictor"),
                ("spec", "predictor"),
                ["sidecar", "model"],
                ['spec.predictor.model.resources.limits["nvidia.com/gpu"]'],
                {"from": "object", "tier": "predictor"},
            ),
            (
                ("spec", "transformer"),
                ("spec", "transformer"),
                ["kserve-container"],
                [],
                {"from": "object"},
            ),
        ],
    ),
    (
        cr(
            "apps.nvidia.com/v1alpha1",
            "NIMService",
            {"labels": LABELS, "tolerations": [], "resources": {"limits": {"nvidia.com/gpu": 2}}},
        ),
        [(("spec",), ("spec",), ["spec"], ['spec.resources.limits["nvidia.com/gpu"]'], LABELS)],
    ),
    (
        # The shape of kubeflow/spark-operator docs/website/user-guide/writing-sparkapplication.md
        cr(
            "sparkoperator.k8s.io/v1beta2",
            "SparkApplication",
            {
                "driver": {
                    "cores": 1,
                    "gpu": {"name": "amd.com/gpu", "quantity": 1},
                    "labels": LABELS,
                },
                "executor": {
                    "instances": 2,
                    "gpu": {"name": "nvidia.com/gpu", "quantity": 1},
                    "sidecars": [container("logs")],
                },
            },
        ),
        [
            (
                ("spec", "driver"),
                ("spec", "driver"),
                ["driver"],
                ["spec.driver.gpu.quantity"],
                LABELS,
            ),
            (
                ("spec", "executor"),
                ("spec", "executor"),
                ["executor", "logs"],
                ["spec.executor.gpu.quantity"],
                {},
            ),
        ],
    ),
    (
        cr(
            "trainer.kubeflow.org/v1alpha1",
            "TrainJob",
            {"trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}}},
        ),
        [
            (
                ("spec", "trainer"),
                ("spec", "trainer"),
                ["trainer"],
                ['spec.trainer.resourcesPerNode.limits["nvidia.com/gpu"]'],
                {},
            )
        ],
    ),
    (  # a bare `gpu` in one ResourceItem (vLLM production-stack)
        cr(
            "production-stack.vllm.ai/v1alpha1",
            "VLLMRuntime",
            {
                "deploymentConfig": {
                    "resources": {"cpu": "5", "gpu": "1", "gpuType": "nvidia.com/gpu"}
                }
            },
        ),
        [
            (
                ("spec", "deploymentConfig"),
                ("spec", "deploymentConfig"),
                ["deploymentConfig"],
                ['spec.deploymentConfig.resources.limits["nvidia.com/gpu"]'],
                {},
            )
        ],
    ),
    (  # requests/limits of ResourceItems (Dynamo v1alpha1); extraPodSpec its pod fields
        cr(
            "nvidia.com/v1alpha1",
            "DynamoGraphDeployment",
            {
                "services": {
                    "worker": {
                        "labels": {"tier": "w"},
                        "resources": {"limits": {"gpu": "2"}},
                        "extraPodSpec": {"mainContainer": {"image": "x"}},
                    }
                }
            },
        ),
        [
            (
                ("spec", "services", "worker", "extraPodSpec"),
                ("spec", "services", "worker", "extraPodSpec"),
                ["mainContainer"],
                [],
                {},
            ),
            (
                ("spec", "services", "worker"),
                ("spec", "services", "worker"),
                ["worker"],
                ['spec.services.worker.resources.limits["nvidia.com/gpu"]'],
                {"tier": "w"},
            ),
        ],
    ),
]


@pytest.mark.parametrize(
    ("obj", "expected"), SHAPED_KINDS, ids=lambda v: v["kind"] if isinstance(v, dict) else ""
)
def test_every_shape_yields_its_pods(obj: dict[str, Any], expected: list[Any]) -> None:
    views = pod_views(obj, custom=shipped().custom_kinds)
    assert views is not None
    found = [
        (
            v.path,
            v.metadata_path,
            [c.name for c in v.containers],
            [v.describe(*a.path[len(v.path) :]) for a in v.amounts if a.resource.endswith("/gpu")],
            dict(v.labels),
        )
        for v in views
    ]
    assert found == expected


def test_a_shaped_gpu_request_is_judged_like_a_pods() -> None:
    obj = SHAPED_KINDS[2][0]  # the NIMService: no peak-memory or SLO label
    decision = run(shipped(), obj, namespace="ml")
    assert [(f.rule, f.path) for f in decision.findings] == [
        ("missing-peak-memory", ("spec", "resources", "limits", "nvidia.com/gpu")),
        ("missing-slo-class", ("spec", "resources", "limits", "nvidia.com/gpu")),
    ]


TYPO = """\
apiVersion: gpu-admission.io/v1alpha1
kind: WorkloadKinds
metadata: {name: typo}
spec:
  unmatchedPathAction: deny
  customResources:
    - {group: example.com, kind: Trainer, templates: [spec.replicaSpec.*.template]}
"""


def test_a_path_that_matches_nothing_is_a_finding(tmp_path: Path) -> None:
    (tmp_path / "kinds.yaml").write_text(TYPO)
    policies = load_policy_files([POLICIES / "gpu-resource-names.yaml", tmp_path / "kinds.yaml"])
    obj = cr(
        "example.com/v1", "Trainer", {"replicaSpecs": {"Worker": {"template": {}}}, "runPolicy": {}}
    )
    decision = run(policies, obj)
    assert decision.findings == (
        Finding(
            "typo",
            "shape-path-unmatched",
            "deny",
            'WorkloadKinds "typo" reads the pod templates of Trainer (example.com) at '
            "spec.replicaSpec.*.template, but this object has nothing there (spec has: "
            "replicaSpecs, runPolicy): those pods go unjudged; correct the path, or mark it "
            "optional: true if Trainer may leave it out",
            ("spec",),
        ),
    )
    assert decision.outcome == "deny"


def test_an_optional_path_may_be_absent() -> None:
    head_only = cr(
        "ray.io/v1", "RayCluster", {"headGroupSpec": {"template": {"spec": {"containers": []}}}}
    )
    assert run(shipped(), head_only).findings == ()
    no_head = cr("ray.io/v1", "RayCluster", {"workerGroupSpecs": []})
    assert [f.rule for f in run(shipped(), no_head).findings] == ["shape-path-unmatched"]


UNCONFIGURED = [
    (
        cr(
            "example.com/v1",
            "Trainer",
            {"replicaSpecs": [{"template": {"spec": {"containers": [gpu()]}}}]},
        ),
        'spec.replicaSpecs[0].template.spec.containers[0].resources.limits["nvidia.com/gpu"]',
        "{group: example.com, kind: Trainer, templates: [spec.replicaSpecs.*.template]}",
    ),
    (
        cr("example.com/v1", "Server", {"predictor": {"containers": [gpu(count="2")]}}),
        'spec.predictor.containers[0].resources.limits["nvidia.com/gpu"]',
        "{group: example.com, kind: Server, podSpecs: [{path: spec.predictor}]}",
    ),
    (
        cr("example.com/v1", "Model", {"resources": {"requests": {"amd.com/gpu": 1}}}),
        'spec.resources.requests["amd.com/gpu"]',
        "{group: example.com, kind: Model, containers: [{path: spec}]}",
    ),
    (
        cr(
            "example.com/v1",
            "Batch",
            {"worker": {"accel": {"name": "nvidia.com/gpu", "quantity": 4}}},
        ),
        "spec.worker.accel.quantity",
        "{group: example.com, kind: Batch, containers: [{path: spec.worker, gpu: accel}]}",
    ),
    (  # a bare count, as Dynamo's and vLLM production-stack's ResourceItems hold it
        cr("example.com/v1", "Graph", {"services": {"w": {"resources": {"limits": {"gpu": "1"}}}}}),
        "spec.services.w.resources.limits.gpu",
        "{group: example.com, kind: Graph, containers: [{path: spec.services.w, "
        "gpuCount: {form: requirements}}]}",
    ),
    (
        cr("example.com/v1", "Engine", {"deploy": {"resources": {"cpu": "5", "gpu": "2"}}}),
        "spec.deploy.resources.gpu",
        "{group: example.com, kind: Engine, containers: [{path: spec.deploy, "
        "gpuCount: {form: item}}]}",
    ),
]


@pytest.mark.parametrize(
    ("obj", "where", "entry"), UNCONFIGURED, ids=lambda v: v["kind"] if isinstance(v, dict) else ""
)
def test_an_unconfigured_kind_that_requests_gpus_is_a_finding(
    obj: dict[str, Any], where: str, entry: str
) -> None:
    (finding,) = run(shipped(), obj).findings
    assert (finding.policy, finding.rule, finding.action) == (
        "workload-kinds",
        "unconfigured-gpu-kind",
        "warn",
    )
    assert f" at {where}, but {obj['kind']} is not a configured workload kind" in finding.message
    assert finding.message.endswith("add it to a WorkloadKinds document: " + entry)


@pytest.mark.parametrize("row", [0, 4, 5])
def test_the_suggested_entry_reads_the_pods_it_names(tmp_path: Path, row: int) -> None:
    obj, _, entry = UNCONFIGURED[row]
    (tmp_path / "kinds.yaml").write_text(
        "apiVersion: gpu-admission.io/v1alpha1\nkind: WorkloadKinds\nmetadata: {name: mine}\n"
        f"spec:\n  customResources:\n    - {entry}\n"
    )
    policies = load_policy_files([POLICIES / "gpu-memory-fit.yaml", tmp_path / "kinds.yaml"])
    assert [f.rule for f in run(policies, obj).findings] == ["missing-peak-memory"]


def test_unconfigured_kinds_without_gpus_and_ignore_are_skipped(tmp_path: Path) -> None:
    no_gpu = cr(
        "example.com/v1",
        "Trainer",
        {"replicaSpecs": [{"template": {"spec": {"containers": [container()]}}}]},
    )
    assert run(shipped(), no_gpu).outcome == "skip"
    zero = cr("example.com/v1", "Trainer", {"resources": {"limits": {"nvidia.com/gpu": 0}}})
    assert run(shipped(), zero).outcome == "skip"
    (tmp_path / "kinds.yaml").write_text(
        "apiVersion: gpu-admission.io/v1alpha1\nkind: WorkloadKinds\nmetadata: {name: quiet}\n"
        "spec: {unconfiguredGpuKinds: ignore}\n"
    )
    policies = load_policy_files([POLICIES / "gpu-memory-fit.yaml", tmp_path / "kinds.yaml"])
    assert run(policies, UNCONFIGURED[0][0]).outcome == "skip"


def test_the_scan_is_bounded() -> None:
    deep: dict[str, Any] = {"resources": {"limits": {"nvidia.com/gpu": 1}}}
    wide = cr("example.com/v1", "Huge", {"filler": [{"x": i} for i in range(30_000)], "z": deep})
    assert run(shipped(), wide).outcome == "skip"  # past the budget: not scanned further
