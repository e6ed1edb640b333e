"""The pre-filter passes only objects in which the engine finds nothing and fails on nothing.

For every object the filter calls plain, `evaluate` without the filter must return no
finding, no error and the skip reason the filter's path gives (every shell counts it so,
without the checks). Objects: every document of the examples, the real-world manifests, the public
corpus (where present), and generated ones: the Pod with every GPU channel, some of
its channels taken away, hostile values in some slots, as a Pod, a Deployment or a
custom kind. If a check starts reading a field the filter does not know, one of these
finds it.
"""

from __future__ import annotations

import contextlib
import copy
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import audit_bench  # the generator of bench/audit_bench.py
from tests.support.hostile import HOSTILE, POD_SLOTS, as_kind, full_pod, put
from tests.support.paths import ROOT, SHARED
from webhook.core.engine.evaluation import evaluate
from webhook.core.engine.policy import PolicySet
from webhook.core.engine.subject import subject_of
from webhook.core.supply.gpu_placement import plain_node_names
from webhook.core.supply.inventory import Inventory
from webhook.errors import ManifestError
from webhook.sources.files import read_inventory
from webhook.sources.policy_files import load_policy_dir
from webhook.sources.yamlsource import iter_documents

CORPUS = SHARED / "corpus" / "public"
SOURCES = [ROOT / "examples", ROOT / "tests" / "realworld", ROOT / "policies" / "tests", CORPUS]


@cache
def shipped() -> PolicySet:
    return load_policy_dir(str(ROOT / "policies"))


@cache
def inventories() -> tuple[Inventory, ...]:
    return Inventory.unknown(), read_inventory(str(ROOT / "examples" / "cluster" / "nodes.json"))


def agrees(obj: Any) -> bool:
    """Whether the filter passed `obj` (and then, that the engine agrees)."""
    policy_set = shipped()
    prefilter = policy_set.prefilter
    assert prefilter is not None
    if not isinstance(obj, dict) or prefilter.plain_pods(obj) is None:
        return False
    subject = subject_of(obj)
    for inventory in inventories():
        filtered = evaluate(policy_set, subject, inventory, prefilter=True)
        decision = evaluate(policy_set, subject, inventory)
        assert decision.invalid is None, f"passed, but the engine refuses it: {decision.invalid}"
        assert decision.error is None, decision.error
        assert decision.findings == (), decision.findings
        assert decision.skipped == filtered.skipped
        assert decision.pod_specs == filtered.pod_specs
    return True


def documents() -> list[Any]:
    found = []
    for source in SOURCES:
        for path in sorted(source.rglob("*")) if source.is_dir() else []:
            if path.suffix not in (".yaml", ".yml", ".json"):
                continue
            with contextlib.suppress(ManifestError, UnicodeDecodeError):
                for doc in iter_documents(path.read_bytes(), source=str(path)):
                    items = doc.data.get("items") if isinstance(doc.data, dict) else None
                    found += items if isinstance(items, list) else [doc.data]
    return found


def unbound(pod: dict[str, Any]) -> dict[str, Any]:
    """The Pod as it is created, before the scheduler binds it to a node."""
    return {**pod, "spec": {k: v for k, v in pod["spec"].items() if k != "nodeName"}}


def test_every_real_object_the_filter_passes_has_no_finding() -> None:
    # The benchmarks' Pods as the API returns them (most without a GPU), and as they are
    # created: a bound Pod goes to the engine (nodeName says whether it runs on a GPU
    # node, where an image's device list would reach the GPUs: image-visible-devices).
    bound = [audit_bench.pod(i) for i in range(60)]
    objects = [*documents(), *bound, *(unbound(p) for p in bound)]
    passed = sum(agrees(obj) for obj in objects)
    assert len(objects) > 200 and 40 < passed < len(objects), (passed, len(objects))
    assert not any(agrees(p) for p in bound)


CHANNELS: list[tuple[str | int, ...]] = [
    ("metadata", "annotations"),
    ("spec", "volumes"),
    ("spec", "initContainers"),
    ("spec", "ephemeralContainers"),
    *[
        (*c, field)
        for c in (("spec", "containers", 0),)
        for field in ("resources", "env", "envFrom", "volumeMounts", "securityContext")
    ],
]


@st.composite
def stripped(draw: st.DrawFn) -> dict[str, Any]:
    """full_pod() without some of its channels, with hostile values in a few slots."""
    pod = full_pod()
    for path in CHANNELS:
        if draw(st.integers(0, 9)) > 0:  # most go: a plain object, or nearly
            with contextlib.suppress(KeyError, IndexError, TypeError):
                parent = pod
                for step in path[:-1]:
                    parent = parent[step]
                del parent[path[-1]]
    for slot in draw(st.lists(st.sampled_from(POD_SLOTS), max_size=3, unique=True)):
        with contextlib.suppress(KeyError, IndexError, TypeError):
            put(pod, slot, draw(HOSTILE))
    return as_kind(copy.deepcopy(pod), draw(st.sampled_from(["Pod", "Deployment", "PyTorchJob"])))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stripped())
def test_generated_objects_the_filter_passes_have_no_finding(obj: dict[str, Any]) -> None:
    agrees(obj)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (("spec", "containers", 0, "resources"), {"limits": {"example.com/fpga": "1"}}),
        (("spec", "containers", 0, "env"), [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]),
        (("spec", "containers", 0, "envFrom"), [{"configMapRef": {"name": "gpus"}}]),
        (("spec", "containers", 0, "securityContext"), {"privileged": False}),
        (("spec", "containers", 0, "securityContext"), {"capabilities": {"add": ["SYS_ADMIN"]}}),
        (("spec", "containers", 0, "securityContext"), {"windowsOptions": {"hostProcess": True}}),
        (("spec", "securityContext"), {"windowsOptions": {"hostProcess": True}}),
        (("spec", "volumes"), [{"name": "v", "hostPath": {"path": "/tmp"}}]),
        (("spec", "resourceClaims"), []),
        (("metadata", "annotations"), {"cdi.k8s.io/x": "y"}),
        (("spec", "containers", 0, "volumeMounts"),
         [{"name": "v", "mountPath": "/var/run/nvidia-container-devices/all"}]),
    ],
)  # fmt: skip
def test_each_channel_keeps_an_object_from_the_filter(field: Any, value: Any) -> None:
    plain = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
             "spec": {"containers": [{"name": "c", "image": "i"}]}}  # fmt: skip
    assert agrees(copy.deepcopy(plain))
    put(plain, field, value)
    assert not agrees(plain)


def test_a_pod_bound_to_a_node_without_gpus_passes_with_the_inventory() -> None:
    # An audited Pod is bound: nodeName says where it runs. On a node that advertises no
    # extended resource and carries no GPU label, an image's device list reaches nothing.
    policy_set = shipped()
    prefilter = policy_set.prefilter
    assert prefilter is not None
    inventory = inventories()[1]
    plain = plain_node_names(inventory)
    assert "cpu-0" in plain and not any(n.startswith("gpu-") for n in plain)
    for node, passes in (("cpu-0", True), ("gpu-h100-0", False), ("unknown-7", False)):
        spec = {"nodeName": node, "containers": [{"name": "c", "image": "cuda"}]}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w"}, "spec": spec}
        assert (prefilter.plain_pods(pod, plain) is not None) is passes, node
        decision = evaluate(policy_set, subject_of(pod), inventory)
        assert bool(decision.findings) is (node != "cpu-0"), (node, decision.findings)
        assert evaluate(policy_set, subject_of(pod), inventory, prefilter=True) == decision
