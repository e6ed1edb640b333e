"""Prometheus metrics of the webhook, in one registry the server exposes on /metrics."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

REQUESTS = Counter(
    "gpu_admission_requests_total",
    "Admission requests by decision (allow, warn, deny, skip, error) and kind.",
    ["decision", "kind", "operation"],
    registry=REGISTRY,
)
LATENCY = Histogram(
    "gpu_admission_request_duration_seconds",
    "Time from request body read to response serialised.",
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1.0),
    registry=REGISTRY,
)
FINDINGS = Counter(
    "gpu_admission_findings_total",
    "Policy findings by policy, rule and action.",
    ["policy", "rule", "action"],
    registry=REGISTRY,
)
RELOADS = Counter(
    "gpu_admission_policy_reloads_total",
    "Policy reloads by result (success, error).",
    ["result"],
    registry=REGISTRY,
)
RELOAD_ERROR = Gauge(
    "gpu_admission_policy_reload_error",
    "1 while the last policy reload failed and the previous set is still serving.",
    registry=REGISTRY,
)
INVENTORY_AGE = Gauge(
    "gpu_admission_inventory_age_seconds",
    "Seconds since the node inventory was last synced.",
    registry=REGISTRY,
)
INVENTORY_NODES = Gauge(
    "gpu_admission_inventory_nodes",
    "Nodes in the current inventory.",
    registry=REGISTRY,
)
EVAL_CACHE = Gauge(
    "gpu_admission_eval_cache_lookups",
    "Evaluation cache lookups since start by result (hit, miss).",
    ["result"],
    registry=REGISTRY,
)


# `.labels()` takes a lock and builds a key on every call; the label sets seen are few,
# so the hot path keeps the children it has already asked for.
_children: dict[tuple[Any, ...], Any] = {}


def request_counter(decision: str, kind: str, operation: str) -> Any:
    return _child(REQUESTS, decision, kind, operation)


def finding_counter(policy: str, rule: str, action: str) -> Any:
    return _child(FINDINGS, policy, rule, action)


def _child(metric: Any, *labels: str) -> Any:
    key = (metric, *labels)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*labels)
    return child
