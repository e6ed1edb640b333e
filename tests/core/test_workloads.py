"""Pod specs inside every workload kind, with their paths, labels and effective requests."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from tests.support.builders import container, shipped
from webhook.core.workloads.pods import PodView
from webhook.core.workloads.targets import pod_views


def tpl(app: str, *containers: dict[str, Any]) -> dict[str, Any]:
    """A PodTemplateSpec whose label `app` says which template it is."""
    return {
        "metadata": {"labels": {"app": app}, "annotations": {"note": app}},
        "spec": {"containers": list(containers) or [container(app)]},
    }


def obj(api_version: str, kind: str, spec: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "w", "labels": {"app": "object-label"}},
        "spec": spec,
        **top,
    }


def views(o: dict[str, Any]) -> list[PodView] | None:
    return pod_views(o, custom=shipped().custom_kinds)


CORE_KINDS = [
    (obj("apps/v1", "Deployment", {"template": tpl("d")}), [("spec", "template", "spec")]),
    (obj("apps/v1", "ReplicaSet", {"template": tpl("rs")}), [("spec", "template", "spec")]),
    (obj("apps/v1", "StatefulSet", {"template": tpl("sts")}), [("spec", "template", "spec")]),
    (obj("apps/v1", "DaemonSet", {"template": tpl("ds")}), [("spec", "template", "spec")]),
    (obj("v1", "ReplicationController", {"template": tpl("rc")}), [("spec", "template", "spec")]),
    (obj("batch/v1", "Job", {"template": tpl("job")}), [("spec", "template", "spec")]),
    (
        obj("batch/v1", "CronJob", {"jobTemplate": {"spec": {"template": tpl("cj")}}}),
        [("spec", "jobTemplate", "spec", "template", "spec")],
    ),
    (
        {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "t"},
            "template": tpl("pt"),
        },
        [("template", "spec")],
    ),
]

# Every custom resource shipped in policies/workload-kinds.yaml, with each template path.
CUSTOM_KINDS = [
    (
        obj(
            "kubeflow.org/v1",
            "PyTorchJob",
            {
                "pytorchReplicaSpecs": {
                    "Master": {"template": tpl("m")},
                    "Worker": {"template": tpl("w")},
                }
            },
        ),
        [
            ("spec", "pytorchReplicaSpecs", "Master", "template", "spec"),
            ("spec", "pytorchReplicaSpecs", "Worker", "template", "spec"),
        ],
    ),
    (
        obj(
            "kubeflow.org/v2beta1",
            "MPIJob",
            {
                "mpiReplicaSpecs": {
                    "Launcher": {"template": tpl("l")},
                    "Worker": {"template": tpl("w")},
                }
            },
        ),
        [
            ("spec", "mpiReplicaSpecs", "Launcher", "template", "spec"),
            ("spec", "mpiReplicaSpecs", "Worker", "template", "spec"),
        ],
    ),
    (
        obj(
            "ray.io/v1",
            "RayCluster",
            {
                "headGroupSpec": {"template": tpl("head")},
                "workerGroupSpecs": [{"template": tpl("g0")}, {"template": tpl("g1")}],
            },
        ),
        [
            ("spec", "headGroupSpec", "template", "spec"),
            ("spec", "workerGroupSpecs", 0, "template", "spec"),
            ("spec", "workerGroupSpecs", 1, "template", "spec"),
        ],
    ),
    (
        obj(
            "ray.io/v1",
            "RayJob",
            {
                "rayClusterSpec": {
                    "headGroupSpec": {"template": tpl("head")},
                    "workerGroupSpecs": [{"template": tpl("g0")}],
                },
                "submitterPodTemplate": tpl("submitter"),
            },
        ),
        [
            ("spec", "rayClusterSpec", "headGroupSpec", "template", "spec"),
            ("spec", "rayClusterSpec", "workerGroupSpecs", 0, "template", "spec"),
            ("spec", "submitterPodTemplate", "spec"),
        ],
    ),
    (
        obj(
            "jobset.x-k8s.io/v1alpha2",
            "JobSet",
            {
                "replicatedJobs": [
                    {"name": "driver", "template": {"spec": {"template": tpl("driver")}}},
                    {"name": "workers", "template": {"spec": {"template": tpl("workers")}}},
                ]
            },
        ),
        [
            ("spec", "replicatedJobs", 0, "template", "spec", "template", "spec"),
            ("spec", "replicatedJobs", 1, "template", "spec", "template", "spec"),
        ],
    ),
    (
        obj(
            "leaderworkerset.x-k8s.io/v1",
            "LeaderWorkerSet",
            {
                "leaderWorkerTemplate": {
                    "leaderTemplate": tpl("leader"),
                    "workerTemplate": tpl("worker"),
                }
            },
        ),
        [
            ("spec", "leaderWorkerTemplate", "leaderTemplate", "spec"),
            ("spec", "leaderWorkerTemplate", "workerTemplate", "spec"),
        ],
    ),
    *[
        (
            obj("kubeflow.org/v1", kind, {field: {"Worker": {"template": tpl(kind)}}}),
            [("spec", field, "Worker", "template", "spec")],
        )
        for kind, field in [
            ("TFJob", "tfReplicaSpecs"),
            ("XGBoostJob", "xgbReplicaSpecs"),
            ("PaddleJob", "paddleReplicaSpecs"),
            ("JAXJob", "jaxReplicaSpecs"),
        ]
    ],
    (
        obj(
            "ray.io/v1",
            "RayService",
            {
                "rayClusterConfig": {
                    "headGroupSpec": {"template": tpl("head")},
                    "workerGroupSpecs": [{"template": tpl("gpu")}],
                }
            },
        ),
        [
            ("spec", "rayClusterConfig", "headGroupSpec", "template", "spec"),
            ("spec", "rayClusterConfig", "workerGroupSpecs", 0, "template", "spec"),
        ],
    ),
    (
        obj("batch.volcano.sh/v1alpha1", "Job", {"tasks": [{"template": tpl("t")}]}),
        [("spec", "tasks", 0, "template", "spec")],
    ),
    *[
        (
            obj(
                "trainer.kubeflow.org/v1alpha1",
                kind,
                {
                    "template": {
                        "spec": {
                            "replicatedJobs": [{"template": {"spec": {"template": tpl(kind)}}}]
                        }
                    }
                },
            ),
            [
                (
                    "spec",
                    "template",
                    "spec",
                    "replicatedJobs",
                    0,
                    "template",
                    "spec",
                    "template",
                    "spec",
                )
            ],
        )
        for kind in ("TrainingRuntime", "ClusterTrainingRuntime")
    ],
]


def test_a_pod_is_its_own_spec() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "x"}, "annotations": {"a": "b"}},
        "spec": {"containers": [container()]},
    }
    (view,) = views(pod) or []
    assert (view.path, view.metadata_path) == (("spec",), ("metadata",))
    assert (view.labels, view.annotations) == ({"app": "x"}, {"a": "b"})
    assert view.spec is pod["spec"]


@pytest.mark.parametrize(
    ("workload", "paths"),
    CORE_KINDS + CUSTOM_KINDS,
    ids=lambda v: v["kind"] if isinstance(v, dict) else "",
)
def test_every_kind_yields_its_templates(
    workload: dict[str, Any], paths: list[tuple[str | int, ...]]
) -> None:
    found = views(workload)
    assert found is not None
    assert [v.path for v in found] == paths
    assert [v.metadata_path for v in found] == [(*p[:-1], "metadata") for p in paths]
    # The template's labels are the pod's labels; the object's own labels are not.
    for view in found:
        assert view.labels["app"] != "object-label"
        assert view.annotations == {"note": view.labels["app"]}


def test_shipped_workload_kinds_are_all_covered() -> None:
    from tests.core.test_shapes import SHAPED_KINDS

    shipped_kinds = {(r.group, r.kind) for r in shipped().custom_kinds}
    tested = {(o["apiVersion"].split("/")[0], o["kind"]) for o, _ in CUSTOM_KINDS}
    tested |= {(o["apiVersion"].split("/")[0], o["kind"]) for o, *_ in SHAPED_KINDS}
    assert shipped_kinds == tested


@pytest.mark.parametrize(
    "workload",
    [
        obj("v1", "Service", {"ports": []}),
        obj("v1", "ConfigMap", {}),
        obj("flow.volcano.sh/v1alpha1", "JobFlow", {"flows": [{"name": "a"}]}),
        obj("extensions/v1beta1", "Deployment", {"template": tpl("d")}),  # not the apps group
        obj("kubeflow.org/v1beta1", "Experiment", {"trialTemplate": {"trialSpec": {}}}),
        obj("example.com/v1", "Pod", {"containers": []}),  # a Pod kind of another group
        {"kind": "Deployment"},
        {},
    ],
    ids=lambda o: f"{o.get('apiVersion')}/{o.get('kind')}",
)
def test_kinds_without_pods_yield_none(workload: dict[str, Any]) -> None:
    assert views(workload) is None


@pytest.mark.parametrize(
    "workload",
    [
        obj("apps/v1", "Deployment", {}),
        obj("apps/v1", "Deployment", {"template": "not a map"}),
        obj("kubeflow.org/v1", "PyTorchJob", {"pytorchReplicaSpecs": {}}),
        obj("ray.io/v1", "RayCluster", {"workerGroupSpecs": "oops"}),
    ],
)
def test_known_kinds_without_templates_yield_no_views(workload: dict[str, Any]) -> None:
    assert views(workload) == []


def test_odd_template_metadata_does_not_break_extraction() -> None:
    labels = {"n": 1, "b": True, "empty": None}  # `empty:` with no value is "" in Kubernetes
    workload = obj("apps/v1", "Deployment", {"template": {"metadata": {"labels": labels}}})
    (view,) = views(workload) or []
    assert view.labels == {"n": "1", "b": "True", "empty": ""}
    assert view.spec == {}
    assert view.containers == ()


def test_containers_in_order_with_paths_and_labels() -> None:
    spec = {
        "initContainers": [container("fetch"), container("logs", restartPolicy="Always")],
        "containers": [container("app"), "not a container", {"image": "unnamed"}],
        "ephemeralContainers": [container("debugger")],
    }
    (view,) = views({"apiVersion": "v1", "kind": "Pod", "spec": spec}) or []
    found = [(c.field, c.position, c.path, c.label, c.is_sidecar) for c in view.containers]
    assert found == [
        ("initContainers", 0, ("spec", "initContainers", 0), 'init container "fetch"', False),
        ("initContainers", 1, ("spec", "initContainers", 1), 'init container "logs"', True),
        ("containers", 0, ("spec", "containers", 0), 'container "app"', False),
        ("containers", 2, ("spec", "containers", 2), 'container "#2"', False),
        (
            "ephemeralContainers",
            0,
            ("spec", "ephemeralContainers", 0),
            'ephemeral container "debugger"',
            False,
        ),
    ]


def c(
    name: str, gpus: Any = None, *, requests: Any = None, sidecar: bool = False
) -> dict[str, Any]:
    limits = None if gpus is None else {"nvidia.com/gpu": gpus, "cpu": "1", "memory": "1Gi"}
    reqs = None if requests is None else {"nvidia.com/gpu": requests}
    return container(
        name, limits=limits, requests=reqs, **({"restartPolicy": "Always"} if sidecar else {})
    )


@pytest.mark.parametrize(
    ("init", "regular", "ephemeral", "expected"),
    [
        ([], [c("a", 1), c("b", 2)], [], 3),  # regular containers add up
        ([c("i", 4)], [c("a", 1), c("b", 1)], [], 4),  # the largest init container wins
        ([c("i", 1), c("j", 3)], [c("a", 2)], [], 3),
        ([c("i", 1)], [c("a", 2)], [], 2),  # the running set wins
        ([c("s", 1, sidecar=True)], [c("a", 1)], [], 2),  # a sidecar keeps running
        ([c("s", 1, sidecar=True), c("i", 2)], [c("a", 1)], [], 3),  # init runs beside the sidecar
        ([c("i", 2), c("s", 1, sidecar=True)], [c("a", 1)], [], 2),  # sidecar starts after it
        ([], [c("a", 1)], [c("dbg", 5)], 1),  # ephemeral containers get no resources
        ([], [c("a", requests=2)], [], 2),  # a request alone counts
        ([], [c("a", 1, requests=2)], [], 1),  # the limit is what the apiserver keeps
        ([], [c("a", "one"), c("b", 1)], [], 1),  # not a quantity: not counted
        ([], [c("a", "500m"), c("b", "500m")], [], 1),
        ([c("i", 1)], [c("a")], [], 1),
    ],
)
def test_effective_request(
    init: list[dict[str, Any]],
    regular: list[dict[str, Any]],
    ephemeral: list[dict[str, Any]],
    expected: int,
) -> None:
    spec = {"initContainers": init, "containers": regular, "ephemeralContainers": ephemeral}
    (view,) = views({"apiVersion": "v1", "kind": "Pod", "spec": spec}) or []
    assert view.effective_requests == {"nvidia.com/gpu": Fraction(expected)}


def test_amounts_name_the_field_that_holds_them() -> None:
    spec = {
        "containers": [
            container(
                "a",
                limits={"nvidia.com/gpu": 1, "memory": "1Gi"},
                requests={"nvidia.com/gpu": 1, "rdma/ib": 1},
            )
        ]
    }
    (view,) = views({"apiVersion": "v1", "kind": "Pod", "spec": spec}) or []
    found = [(a.resource, a.amount, a.raw, a.path) for a in view.amounts]
    assert found == [
        (
            "nvidia.com/gpu",
            1,
            1,
            ("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"),
        ),
        ("rdma/ib", 1, 1, ("spec", "containers", 0, "resources", "requests", "rdma/ib")),
    ]
