"""An audit as PolicyReport / ClusterPolicyReport objects (`wgpolicyk8s.io/v1alpha2`).

One PolicyReport per namespace and one ClusterPolicyReport for cluster-scoped objects,
in a YAML stream that `kubectl apply -f` takes; Policy Reporter and the Kyverno UI read
them. Results are never dropped: a report that would pass `MAX_RESULTS` entries or
`MAX_BYTES` (etcd keeps objects under 1.5 MiB) continues in `gpu-admission-2`, ... All
carry the label `app.kubernetes.io/managed-by=gpu-admission`, so a later run can prune
the parts it no longer writes (`kubectl apply --prune -l ...`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson
import yaml

from webhook.commands.audit import AuditEntry, AuditReport
from webhook.core.kit.paths import format_path
from webhook.sources.kubeyaml import KubeResolver

API_VERSION = "wgpolicyk8s.io/v1alpha2"
SOURCE = "gpu-admission"
REPORT_NAME = "gpu-admission"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-admission"}
MAX_RESULTS = 1000
MAX_BYTES = 900_000  # serialized results per report, well under etcd's 1.5 MiB
RESULT = {"deny": "fail", "warn": "warn", "dryrun": "warn"}
SEVERITY = {"deny": "high", "warn": "medium", "dryrun": "low"}

_Base: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(KubeResolver, _Base):  # type: ignore[misc]
    """Quotes what kubectl would read as another type (`y` is true to go-yaml v2)."""


def policy_reports(report: AuditReport, *, timestamp: int) -> list[dict[str, Any]]:
    """The report objects: PolicyReports by namespace, then the ClusterPolicyReport."""
    by_namespace: defaultdict[str, list[AuditEntry]] = defaultdict(list)
    for entry in report.entries:
        by_namespace[entry.resource.namespace].append(entry)
    namespaces = sorted(set(by_namespace) | set(report.passed))
    out: list[dict[str, Any]] = []
    for ns in [n for n in namespaces if n] + [n for n in namespaces if not n]:
        results = [_result(e, timestamp) for e in by_namespace.get(ns, ())]
        out.extend(_reports(ns, results, passed=report.passed.get(ns, 0)))
    return out


def render_policyreport(report: AuditReport, *, timestamp: int) -> str:
    docs = policy_reports(report, timestamp=timestamp)
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, explicit_start=True)


def _result(e: AuditEntry, timestamp: int) -> dict[str, Any]:
    r, f = e.resource, e.finding
    resource = {"apiVersion": r.api_version, "kind": r.kind, "name": r.name}
    if r.namespace:
        resource["namespace"] = r.namespace
    if r.uid:
        resource["uid"] = r.uid
    properties = {"enforcementAction": f.action, "field": format_path(f.path)}
    if e.pods:
        properties["podsAffected"] = str(e.pods)
    return {
        "source": SOURCE,
        "policy": f.policy,
        "rule": f.rule,
        "category": "GPU",
        "severity": SEVERITY[f.action],
        "timestamp": {"seconds": timestamp, "nanos": 0},
        "result": RESULT[f.action],
        "scored": True,
        "message": f.message,
        "resources": [resource],
        "properties": properties,
    }


def _reports(
    namespace: str, results: Sequence[dict[str, Any]], *, passed: int
) -> Iterator[dict[str, Any]]:
    parts = list(_split(results)) or [[]]
    for index, part in enumerate(parts):
        name = REPORT_NAME if index == 0 else f"{REPORT_NAME}-{index + 1}"
        meta: dict[str, Any] = {"name": name}
        if namespace:
            meta["namespace"] = namespace
        meta["labels"] = dict(MANAGED_BY)
        yield {
            "apiVersion": API_VERSION,
            "kind": "PolicyReport" if namespace else "ClusterPolicyReport",
            "metadata": meta,
            # passes count once, in the first part: resources, not results
            "summary": _summary(part, passed=passed if index == 0 else 0),
            "results": part,
        }


def _split(results: Sequence[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    part: list[dict[str, Any]] = []
    size = 0
    for result in results:
        cost = len(orjson.dumps(result))
        if part and (len(part) >= MAX_RESULTS or size + cost > MAX_BYTES):
            yield part
            part, size = [], 0
        part.append(result)
        size += cost
    if part:
        yield part


def _summary(results: Sequence[Mapping[str, Any]], *, passed: int) -> dict[str, int]:
    counts = {"pass": passed, "fail": 0, "warn": 0, "error": 0, "skip": 0}
    for result in results:
        counts[result["result"]] += 1
    return counts
