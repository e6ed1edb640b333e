"""Hostile objects: every field the checks read, filled with what a tenant might send.

Shared by the engine fuzz test and the real-server tests. Values are JSON-shaped
(what orjson reads and writes) unless a test says otherwise: any type where a string
belongs, big integers, long strings, absurd quantities, nesting as deep as every source
lets through (bounds.MAX_DEPTH).
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

from hypothesis import strategies as st

from webhook.sources.bounds import MAX_DEPTH

PEAK = "gpu-admission.io/peak-memory"
SLO = "gpu-admission.io/slo-class"
GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.10gb"

TERMS = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")


def full_pod() -> dict[str, Any]:
    """A Pod with every field some check reads, each with a plausible value."""
    container = {
        "name": "main",
        "image": "cuda",
        "resources": {"limits": {GPU: 1, MIG: "1"}, "requests": {GPU: "1"}},
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}, {"name": "X", "value": "1"}],
        "envFrom": [{"configMapRef": {"name": "cm"}}],
        "volumeMounts": [{"name": "dev", "mountPath": "/var/run/nvidia-container-devices"}],
        "securityContext": {"privileged": True},
        "restartPolicy": "Always",
    }
    expression = {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A100"]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ml",
            "labels": {PEAK: "12Gi", SLO: "latency-sensitive"},
            "annotations": {"cdi.k8s.io/gpu": "nvidia.com/gpu=all"},
        },
        "spec": {
            "containers": [container],
            "initContainers": [copy.deepcopy(container)],
            "ephemeralContainers": [copy.deepcopy(container)],
            "volumes": [{"name": "dev", "hostPath": {"path": "/dev/nvidia0"}}],
            "nodeSelector": {"nvidia.com/gpu.product": "A100"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [expression], "matchFields": [expression]}
                        ]
                    }
                }
            },
            "tolerations": [
                {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}
            ],
        },
    }


C0 = ("spec", "containers", 0)
I0 = ("spec", "initContainers", 0)
EXPR = ("spec", *TERMS, "nodeSelectorTerms", 0, "matchExpressions", 0)
# Every place a check reads, as a path into full_pod(): the value there is replaced.
POD_SLOTS: list[tuple[str | int, ...]] = [
    ("metadata",),
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("metadata", "labels"),
    ("metadata", "labels", PEAK),
    ("metadata", "labels", SLO),
    ("metadata", "annotations"),
    ("metadata", "annotations", "cdi.k8s.io/gpu"),
    ("spec",),
    ("spec", "containers"),
    ("spec", "initContainers"),
    ("spec", "volumes"),
    ("spec", "volumes", 0),
    ("spec", "volumes", 0, "name"),
    ("spec", "volumes", 0, "hostPath"),
    ("spec", "volumes", 0, "hostPath", "path"),
    ("spec", "nodeSelector"),
    ("spec", "nodeSelector", "nvidia.com/gpu.product"),
    ("spec", "affinity"),
    ("spec", *TERMS, "nodeSelectorTerms"),
    (*EXPR,),
    (*EXPR, "key"),
    (*EXPR, "operator"),
    (*EXPR, "values"),
    (*EXPR, "values", 0),
    ("spec", "tolerations"),
    ("spec", "tolerations", 0),
    ("spec", "tolerations", 0, "key"),
    ("spec", "tolerations", 0, "operator"),
    ("spec", "tolerations", 0, "value"),
    ("spec", "tolerations", 0, "effect"),
    (*C0,),
    (*C0, "name"),
    (*C0, "resources"),
    (*C0, "resources", "limits"),
    (*C0, "resources", "limits", GPU),
    (*C0, "resources", "limits", MIG),
    (*C0, "resources", "requests", GPU),
    (*C0, "env"),
    (*C0, "env", 0),
    (*C0, "env", 0, "name"),
    (*C0, "env", 0, "value"),
    (*C0, "envFrom"),
    (*C0, "volumeMounts"),
    (*C0, "volumeMounts", 0, "name"),
    (*C0, "volumeMounts", 0, "mountPath"),
    (*C0, "securityContext"),
    (*C0, "securityContext", "privileged"),
    (*I0, "restartPolicy"),
    (*I0, "resources", "limits", GPU),
]


def put(obj: Any, path: tuple[str | int, ...], value: Any) -> None:
    for step in path[:-1]:
        obj = obj[step]
    obj[path[-1]] = value


def as_kind(pod: dict[str, Any], kind: str) -> dict[str, Any]:
    """The pod as the template of a Deployment or a PyTorchJob (a wildcard path)."""
    template = {"metadata": pod["metadata"], "spec": pod["spec"]}
    if kind == "Deployment":
        return {
            "apiVersion": "apps/v1",
            "kind": kind,
            "metadata": {},
            "spec": {"template": template},
        }
    if kind == "PyTorchJob":
        specs = {"Master": {"template": template}, "Worker": {"template": template}}
        return {
            "apiVersion": "kubeflow.org/v1",
            "kind": kind,
            "metadata": {},
            "spec": {"pytorchReplicaSpecs": specs},
        }
    return pod


def chain(depth: int, leaf: Any = "x") -> Any:
    """Lists and mappings nested `depth` levels, without recursion."""
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


QUANTITIES = st.sampled_from(
    [
        "1e99999999",
        "1e-99999999",
        "8Ei",
        "9223372036854775808",
        "1" * 70,
        "1" * 100_000 + "x",
        "0.000000000000000000001",
        "-1",
        "1.5",
        "\u0663",
        "1e2147483648",
    ]
)
BIG_INTS = st.sampled_from([2**63, -(2**63), 10**300, 10**4000, -(10**4299)])
LONG_STRINGS = st.sampled_from(
    ["x" * 250_000, "/dev/nvidia0/" + "a" * 100_000, "nvidia.com/" + "g" * 100_000]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | BIG_INTS
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | QUANTITIES
    | LONG_STRINGS
)
TREES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
# Nested as deep as any source lets through, less the depth of the slot it goes in.
DEEP = st.builds(chain, st.integers(1, MAX_DEPTH - 16), SCALARS)
HOSTILE = TREES | DEEP
KINDS = st.sampled_from(["Pod", "Deployment", "PyTorchJob"])


@st.composite
def hostile_objects(draw: st.DrawFn) -> dict[str, Any]:
    """A Pod, Deployment or PyTorchJob with hostile values in a few of its slots."""
    pod = full_pod()
    for slot in draw(st.lists(st.sampled_from(POD_SLOTS), min_size=1, max_size=4, unique=True)):
        # An earlier replacement may have taken the field's parent away.
        with contextlib.suppress(KeyError, IndexError, TypeError):
            put(pod, slot, draw(HOSTILE))
    obj = as_kind(pod, draw(KINDS))
    if obj["kind"] == "PyTorchJob" and draw(st.booleans()):
        # The wildcard of its template path (spec.pytorchReplicaSpecs.*.template) meets
        # hostile entries too, or a hostile value instead of the map.
        specs = obj["spec"]["pytorchReplicaSpecs"]
        specs[draw(st.text(max_size=4))] = draw(HOSTILE)
        if draw(st.booleans()):
            obj["spec"]["pytorchReplicaSpecs"] = draw(HOSTILE)
    return obj
