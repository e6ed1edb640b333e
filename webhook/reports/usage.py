"""GPU use as report results: one per namespace that runs GPU Pods, one per GPU quota of
each ClusterQueue, for OpenReports (webhook.reports.openreports).

A use is no finding: its result is `pass`, or `warn` where a queue is full and has
Workloads waiting (they fit only once others finish, or by preemption).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from webhook.commands.usage import Usage
from webhook.reports.audit import use_text
from webhook.reports.policyreport import SOURCE


def usage_results(usage: Usage, *, timestamp: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """(namespace, result): "" for the cluster-scoped ClusterQueues."""
    for n in usage.namespaces:
        resource = {"apiVersion": "v1", "kind": "Namespace", "name": n.namespace}
        properties = {
            "gpus": str(n.use.gpus),
            "gpuMemoryMiB": str(n.use.memory_mib),
            "gpusOfUnknownMemory": str(n.use.unknown),
            "pods": str(n.pods),
        }
        message = f"namespace {n.namespace} holds {use_text(n.use)} in {n.pods} running Pods"
        yield n.namespace, _result("gpu-use", "pass", message, resource, properties, timestamp)
    for q in usage.queues:
        resource = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "name": q.queue}
        properties = {
            "flavor": q.flavor,
            "resource": q.resource,
            "nominal": str(q.nominal),
            "most": str(q.most),
            "used": str(q.used),
            "borrowed": str(q.borrowed),
            "pendingWorkloads": str(q.pending),
        }
        message = (
            f"ClusterQueue {q.queue} {q.resource} in flavor {q.flavor}: {q.used} used of "
            f"{q.nominal} nominal, {q.most} at most with the cohort; {q.state}"
        )
        result = "warn" if q.pending and q.used >= q.most else "pass"
        yield "", _result("quota-use", result, message, resource, properties, timestamp)


def _result(
    rule: str,
    result: str,
    message: str,
    resource: dict[str, str],
    properties: dict[str, str],
    timestamp: int,
) -> dict[str, Any]:
    return {
        "source": SOURCE,
        "policy": "gpu-queues",
        "rule": rule,
        "category": "GPU",
        "severity": "info",
        "timestamp": {"seconds": timestamp, "nanos": 0},
        "result": result,
        "scored": False,
        "message": message,
        "resources": [resource],
        "properties": properties,
    }
