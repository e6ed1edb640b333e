"""Prometheus metrics of the webhook, in one registry the server exposes on /metrics.

Every label value comes from a closed set, so the series cannot grow with what
callers send: decisions and operations are fixed words, policies and rules come from
the policy set, and a kind is a core workload kind, a configured custom kind or
"other" (the apiserver sends only the kinds the webhook configuration names, but any
client that reaches the port can send any string).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from webhook.core.policy import PolicySet
from webhook.core.workloads import BUILTIN_TEMPLATES

REGISTRY = CollectorRegistry(auto_describe=True)

REQUESTS = Counter(
    "gpu_admission_requests_total",
    "Admission requests by decision (allow, warn, deny, skip, invalid, error) and kind.",
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


_CORE_KINDS = frozenset({"Pod", *(kind for _, kind in BUILTIN_TEMPLATES)})
_kinds_of: list[tuple[PolicySet, frozenset[str]]] = []  # the last policy set's kinds


def kind_label(kind: str, policy_set: PolicySet) -> str:
    """The kind as a label value: a known workload kind, else "other"."""
    if kind in _CORE_KINDS:
        return kind
    if not _kinds_of or _kinds_of[0][0] is not policy_set:
        _kinds_of[:] = [(policy_set, frozenset(rule.kind for rule in policy_set.custom_kinds))]
    return kind if kind in _kinds_of[0][1] else "other"


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
