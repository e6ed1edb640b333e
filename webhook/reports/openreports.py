"""An audit as OpenReports: `openreports.io/v1alpha1` Report and ClusterReport objects.

OpenReports (https://github.com/openreports/reports-api) is where the Policy Report
API went when it left the Kubernetes policy working group; Kyverno writes it, and Policy
Reporter reads it. Its v1alpha1 Report keeps the `wgpolicyk8s.io/v1alpha2`
PolicyReport's fields (results, summary, scope) under a new group and kind names, and
adds a report-level `source`. So these are the PolicyReports of
`webhook.reports.policyreport` (one Report per namespace, a ClusterReport for
cluster-scoped objects, the same results, the same splitting into `gpu-admission-2`,
... and the same `app.kubernetes.io/managed-by` label), renamed.

The CRDs (vendored under tests/fixtures/openreports/ for the tests) come from the
OpenReports project: its Helm chart, its install.yaml, or Kyverno's chart.
"""

from __future__ import annotations

from typing import Any

import yaml

from webhook.commands.audit import AuditReport
from webhook.reports.policyreport import MANAGED_BY, REPORT_NAME, SOURCE, policy_reports
from webhook.reports.usage import usage_results
from webhook.sources.kubeyaml import KubeResolver

API_VERSION = "openreports.io/v1alpha1"
KINDS = {"PolicyReport": "Report", "ClusterPolicyReport": "ClusterReport"}

_Base: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(KubeResolver, _Base):  # type: ignore[misc]
    """Quotes what kubectl would read as another type (`y` is true to go-yaml v2)."""


def open_reports(report: AuditReport, *, timestamp: int) -> list[dict[str, Any]]:
    """Reports by namespace, then the ClusterReport (when there are cluster-scoped objects);
    the GPU use of each namespace and ClusterQueue joins its report as a result
    (webhook.reports.usage)."""
    out = []
    for policy_report in policy_reports(report, timestamp=timestamp):
        out.append(
            {
                "apiVersion": API_VERSION,
                "kind": KINDS[policy_report["kind"]],
                "metadata": policy_report["metadata"],
                "source": SOURCE,
                "summary": policy_report["summary"],
                "results": policy_report["results"],
            }
        )
    for namespace, result in usage_results(report.usage, timestamp=timestamp):
        _report_of(out, namespace)["results"].append(result)
        _report_of(out, namespace)["summary"][result["result"]] += 1
    return out


def _report_of(reports: list[dict[str, Any]], namespace: str) -> dict[str, Any]:
    """The first report of the namespace ("": the ClusterReport), made when absent."""
    for r in reports:
        if r["metadata"].get("namespace", "") == namespace:
            return r
    meta: dict[str, Any] = {"name": REPORT_NAME}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(MANAGED_BY)
    made: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "Report" if namespace else "ClusterReport",
        "metadata": meta,
        "source": SOURCE,
        "summary": {"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 0},
        "results": [],
    }
    reports.append(made)
    return made


def render_openreports(report: AuditReport, *, timestamp: int) -> str:
    docs = open_reports(report, timestamp=timestamp)
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, explicit_start=True)
