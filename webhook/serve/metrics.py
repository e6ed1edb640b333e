"""Prometheus metrics of the webhook, in one registry the server exposes on /metrics.

Every label value comes from a closed set, so the series cannot grow with what
callers send: decisions and operations are fixed words, policies and rules come from
the policy set, and a kind is a core workload kind, a configured custom kind or
"other" (the apiserver sends only the kinds the webhook configuration names, but any
client that reaches the port can send any string).

What every request counts (requests, findings, latency) is kept as plain ints in a
`Tally` per thread and turned into metric families when /metrics is scraped. Each
`--workers` process has its own registry: a scrape sees the worker it reached.
"""

from __future__ import annotations

import bisect
import itertools
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from webhook.core.engine.policy import PolicySet
from webhook.core.workloads.kinds import BUILTIN_TEMPLATES

REGISTRY = CollectorRegistry(auto_describe=True)
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1.0)

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


_CORE_KINDS = frozenset({"Pod", *(kind for _, kind in BUILTIN_TEMPLATES)})
_kinds_of: list[tuple[PolicySet, frozenset[str]]] = []  # the last policy set's kinds


def kind_label(kind: str, policy_set: PolicySet) -> str:
    """The kind as a label value: a known workload kind, else "other"."""
    if kind in _CORE_KINDS:
        return kind
    if not _kinds_of or _kinds_of[0][0] is not policy_set:
        _kinds_of[:] = [(policy_set, frozenset(rule.kind for rule in policy_set.custom_kinds))]
    return kind if kind in _kinds_of[0][1] else "other"


class Tally:
    """The per-request counts of one thread, as plain ints: no lock and no metric child
    on the admission path (a prometheus_client child takes a lock per increment, its
    histogram walks its buckets in Python). Only its own thread writes a Tally; the
    scrape adds them up."""

    __slots__ = ("buckets", "created", "findings", "latency_sum", "requests")

    def __init__(self) -> None:
        self.requests: dict[tuple[str, str, str], int] = {}  # (decision, kind, operation)
        self.findings: dict[tuple[str, str, str], int] = {}  # (policy, rule, action)
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # the last one: over all bounds
        self.latency_sum = 0.0
        self.created: dict[tuple[str, ...], float] = {}  # when a series was first counted

    def request(self, decision: str, kind: str, operation: str) -> None:
        key = (decision, kind, operation)
        n = self.requests.get(key)
        if n is None:
            self.created[("r", *key)] = time.time()
            n = 0
        self.requests[key] = n + 1

    def finding(self, policy: str, rule: str, action: str, n: int = 1) -> None:
        key = (policy, rule, action)
        seen = self.findings.get(key)
        if seen is None:
            self.created[("f", *key)] = time.time()
            seen = 0
        self.findings[key] = seen + n

    def observe(self, seconds: float) -> None:
        self.buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1  # le: upper bound
        self.latency_sum += seconds


LOOP = Tally()  # the event loop's requests
LARGE = Tally()  # those of the thread that judges large bodies
DRA = Tally()  # those of the thread that judges claims whose device matches are not cached
_STARTED = time.time()


class _Tallies(Collector):
    """The Tallies as the metric families prometheus_client's own would expose."""

    def collect(self) -> Iterator[Metric]:
        tallies = (LOOP, LARGE, DRA)
        created: dict[tuple[str, ...], float] = {}
        for t in tallies:
            for key, at in dict(t.created).items():  # a copy: the other thread may add
                created[key] = min(at, created.get(key, at))
        requests = CounterMetricFamily(
            "gpu_admission_requests",
            "Admission requests by decision (allow, warn, deny, skip, invalid, error; mutate: "
            "a /mutate call that patched the Pod) and kind.",
            labels=("decision", "kind", "operation"),
        )
        for key, n in _summed([t.requests for t in tallies]).items():
            requests.add_metric(key, n, created=created.get(("r", *key), _STARTED))
        latency = HistogramMetricFamily(
            "gpu_admission_request_duration_seconds",
            "Time from request body read to response serialised.",
        )
        counts = [sum(column) for column in zip(*(list(t.buckets) for t in tallies), strict=True)]
        cumulative = list(itertools.accumulate(counts))
        bounds = [*(floatToGoString(b) for b in LATENCY_BUCKETS), "+Inf"]  # type: ignore[no-untyped-call]
        latency.add_metric(
            [], list(zip(bounds, cumulative, strict=True)), sum(t.latency_sum for t in tallies)
        )
        latency.samples.append(Sample(latency.name + "_created", {}, _STARTED))
        findings = CounterMetricFamily(
            "gpu_admission_findings",
            "Policy findings by policy, rule and action.",
            labels=("policy", "rule", "action"),
        )
        for key, n in _summed([t.findings for t in tallies]).items():
            findings.add_metric(key, n, created=created.get(("f", *key), _STARTED))
        return iter((requests, latency, findings))


def _summed(counts: list[dict[tuple[str, str, str], int]]) -> dict[tuple[str, str, str], int]:
    out: dict[tuple[str, str, str], int] = {}
    for c in counts:
        for key, n in dict(c).items():
            out[key] = out.get(key, 0) + n
    return out


REGISTRY.register(_Tallies())
