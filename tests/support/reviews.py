"""Objects and AdmissionReviews shared by the server tests: one per rule, and clean ones."""

from __future__ import annotations

import copy
import uuid
from typing import Any

GOOD_LABELS = {"gpu-admission.io/peak-memory": "4Gi", "gpu-admission.io/slo-class": "batch"}


def pod(
    *,
    name: str = "p",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    limits: dict[str, Any] | None = None,
    container: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "main", "image": "nvcr.io/nvidia/cuda:12.4.0-base"}
    if limits is not None:
        c["resources"] = {"limits": limits}
    c.update(container or {})
    meta: dict[str, Any] = {"name": name, "labels": dict(GOOD_LABELS if labels is None else labels)}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [c], **(spec or {})},
    }


def deployment(pod_obj: dict[str, Any], name: str = "d") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": pod_obj["metadata"] | {"name": None}, "spec": pod_obj["spec"]},
        },
    }


def review(
    obj: dict[str, Any] | None,
    *,
    namespace: str = "ml",
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    sub_resource: str | None = None,
) -> dict[str, Any]:
    kind = (obj or old or {}).get("kind", "Pod")
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": "", "version": "v1", "kind": kind},
        "resource": {"group": "", "version": "v1", "resource": kind.lower() + "s"},
        "namespace": namespace,
        "operation": operation,
        "userInfo": {"username": "alice"},
        "object": obj,
        "oldObject": old,
        "dryRun": False,
    }
    if sub_resource:
        request["subResource"] = sub_resource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


# (rule, object) rows: each object violates the named rule of the shipped policies, with the
# example inventory (examples/cluster/nodes.json).
VIOLATIONS: list[tuple[str, dict[str, Any]]] = [
    (
        "gpu-device-injection/hostpath-device",
        pod(
            spec={"volumes": [{"name": "dev", "hostPath": {"path": "//dev/./nvidia0/"}}]},
            container={"volumeMounts": [{"name": "dev", "mountPath": "/dev/nvidia0"}]},
        ),
    ),
    (
        "gpu-device-injection/device-list-volume-mount",
        pod(
            spec={"volumes": [{"name": "null", "emptyDir": {}}]},
            container={
                "volumeMounts": [
                    {"name": "null", "mountPath": "/var/run/nvidia-container-devices/all"}
                ]
            },
        ),
    ),
    (
        "gpu-device-injection/visible-devices-env",
        pod(container={"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}),
    ),
    (
        "gpu-device-injection/cdi-annotation",
        pod(annotations={"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}),
    ),
    (
        "gpu-device-injection/device-annotation",
        pod(annotations={"devices.gke.io/container.main": "- path: /dev/nvidia0"}),
    ),
    ("gpu-device-injection/privileged", pod(container={"securityContext": {"privileged": True}})),
    ("gpu-resource-names/unknown-resource", pod(limits={"nvidia.com/mig-1g.10g": 1})),
    ("gpu-resource-names/non-integer-count", pod(limits={"nvidia.com/gpu": "500m"})),
    (
        "gpu-resource-names/request-without-limit",
        pod(container={"resources": {"requests": {"nvidia.com/gpu": 1}}}),
    ),
    (
        "gpu-resource-names/request-limit-mismatch",
        pod(
            container={
                "resources": {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}
            }
        ),
    ),
    (
        "gpu-resource-names/insufficient-capacity",
        pod(
            limits={"nvidia.com/gpu": 9},
            spec={
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            },
        ),
    ),
    (
        "gpu-resource-names/no-candidate-node",
        pod(
            limits={"nvidia.com/gpu": 1},
            spec={"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-B200"}},
        ),
    ),
    (
        "gpu-memory-fit/missing-peak-memory",
        pod(labels={"gpu-admission.io/slo-class": "batch"}, limits={"nvidia.com/mig-3g.40gb": 1}),
    ),
    (
        "gpu-memory-fit/invalid-peak-memory",
        pod(
            labels={"gpu-admission.io/peak-memory": "12GB", "gpu-admission.io/slo-class": "batch"},
            limits={"nvidia.com/mig-3g.40gb": 1},
        ),
    ),
    (
        "gpu-memory-fit/exceeds-device-memory",
        pod(
            labels={"gpu-admission.io/peak-memory": "12Gi", "gpu-admission.io/slo-class": "batch"},
            limits={"nvidia.com/mig-1g.10gb": 1},
        ),
    ),
    (
        "gpu-slo-class/missing-slo-class",
        pod(labels={"gpu-admission.io/peak-memory": "8Gi"}, limits={"nvidia.com/mig-3g.40gb": 1}),
    ),
    (
        "gpu-slo-class/unknown-slo-class",
        pod(
            labels={"gpu-admission.io/peak-memory": "8Gi", "gpu-admission.io/slo-class": "gold"},
            limits={"nvidia.com/mig-3g.40gb": 1},
        ),
    ),
    (
        "gpu-slo-class/sharing-mode-not-accepted",
        pod(
            labels={
                "gpu-admission.io/peak-memory": "4Gi",
                "gpu-admission.io/slo-class": "latency-sensitive",
            },
            limits={"nvidia.com/gpu": 1},
        ),
    ),
]

CLEAN: list[tuple[str, dict[str, Any]]] = [
    (
        "cpu-only pod",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]},
        },
    ),
    ("batch pod on a MIG slice", pod(limits={"nvidia.com/mig-3g.40gb": 1})),
    (
        "latency-sensitive pod on MIG",
        pod(
            labels={
                "gpu-admission.io/peak-memory": "30Gi",
                "gpu-admission.io/slo-class": "latency-sensitive",
            },
            limits={"nvidia.com/mig-3g.40gb": 1},
        ),
    ),
]


def with_namespace(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["namespace"] = namespace
    return out
