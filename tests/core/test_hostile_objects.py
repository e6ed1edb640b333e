"""Any object a tenant can write is judged, in bounded time, with bounded messages.

Hypothesis fills the fields the checks read with the wrong types, big integers, long
strings, absurd quantities and nesting as deep as any source lets through, in Pods,
Deployments and a custom resource, and runs them through `evaluate` with the shipped
policies and the example inventory, with and without the evaluation cache.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.support.hostile import GPU, PEAK, SLO, as_kind, chain, full_pod, hostile_objects, put
from tests.support.paths import ROOT
from webhook.core.engine.evaluation import Subject, evaluate
from webhook.core.kit.text import MESSAGE_LIMIT
from webhook.core.workloads.pods import MAX_FAN_OUT
from webhook.serve.evalcache import EvaluationCache
from webhook.sources.files import read_inventory
from webhook.sources.policy_files import load_policy_dir

POLICIES = load_policy_dir(ROOT / "policies")
INVENTORY = read_inventory(str(ROOT / "examples/cluster/nodes.json"))
CACHE = EvaluationCache()


def judged(obj: dict[str, Any]) -> float:
    """Seconds `evaluate` took; every finding's message bounded; same through the cache."""
    started = time.thread_time()
    decision = evaluate(POLICIES, Subject(obj, "ml"), INVENTORY)
    elapsed = time.thread_time() - started
    for f in decision.findings:
        assert len(f.message) <= MESSAGE_LIMIT, (f.rule, f.message[:300])
    assert CACHE.evaluate(POLICIES, Subject(obj, "ml"), INVENTORY) == decision
    return elapsed


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(hostile_objects())
def test_any_shape_in_any_field_is_judged(obj: dict[str, Any]) -> None:
    assert judged(obj) < 0.5  # a few ms at most, on a busy machine too


# The readers of these fields walk no deeper than they look: 10,000 levels (more than any
# source lets through) cost what 1 does.
DEEP_SLOTS = [
    ("metadata", "labels", PEAK),
    ("metadata", "labels", SLO),
    ("metadata", "labels", "team"),
    ("metadata", "annotations", "cdi.k8s.io/gpu"),
    ("metadata", "name"),
    ("spec", "containers", 0, "name"),
    ("spec", "containers", 0, "resources", "limits", GPU),
    ("spec", "containers", 0, "resources", "requests", GPU),
    ("spec", "volumes", 0, "name"),
    ("spec", "containers", 0, "volumeMounts", 0, "name"),
]


@pytest.mark.parametrize("kind", ["Pod", "PyTorchJob"])
@pytest.mark.parametrize("slot", DEEP_SLOTS, ids=lambda p: ".".join(map(str, p)))
def test_deep_values_cost_nothing(slot: tuple[str | int, ...], kind: str) -> None:
    pod = full_pod()
    put(pod, slot, chain(10_000))
    assert judged(as_kind(pod, kind)) < 0.25


@pytest.mark.parametrize(
    ("peak", "message"),
    [
        (
            "1e99999999",
            'label gpu-admission.io/peak-memory="1e99999999" is not a Kubernetes memory '
            "quantity: write the peak GPU memory per device with a unit, e.g. 12Gi, 11G or "
            "12000Mi.",
        ),
        (
            chain(10_000),
            "label gpu-admission.io/peak-memory=\"[{'k': [...]}]\" is not a Kubernetes memory "
            "quantity: write the peak GPU memory per device with a unit, e.g. 12Gi, 11G or "
            "12000Mi.",
        ),
    ],
)
def test_an_absurd_peak_memory_is_invalid_not_computed(peak: Any, message: str) -> None:
    pod = full_pod()
    pod["metadata"]["labels"][PEAK] = peak
    started = time.thread_time()
    decision = evaluate(POLICIES, Subject(pod, "ml"), INVENTORY)
    assert time.thread_time() - started < 0.25
    assert [f.message for f in decision.findings if f.rule == "invalid-peak-memory"] == [message]


@pytest.mark.parametrize("count", ["1e99999999", "9223372036854775808", 10**4000, "1" * 100_000])
def test_an_absurd_count_is_a_non_integer_count(count: Any) -> None:
    pod = full_pod()
    pod["spec"]["containers"][0]["resources"] = {"limits": {GPU: count}}
    rules = {f.rule for f in evaluate(POLICIES, Subject(pod, "ml"), INVENTORY).findings}
    assert "non-integer-count" in rules


def test_more_templates_than_a_wildcard_may_match_is_an_input_error() -> None:
    template = {"template": {"spec": {"containers": [{"name": "c"}]}}}
    specs = {f"r{i}": template for i in range(MAX_FAN_OUT + 1)}
    obj = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "spec": {"pytorchReplicaSpecs": specs},
    }
    decision = evaluate(POLICIES, Subject(obj, "ml"), INVENTORY)
    assert decision.outcome == "invalid"
    assert decision.invalid is not None
    assert decision.invalid.startswith("spec.pytorchReplicaSpecs: more than 1000 entries")
    del specs["r0"]
    assert evaluate(POLICIES, Subject(obj, "ml"), INVENTORY).pod_specs == MAX_FAN_OUT
