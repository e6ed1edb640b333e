"""An audit for people (text: summary by policy, rule and namespace, then the findings)
and for machines (JSON)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

import orjson

from webhook.commands.audit import AuditEntry, AuditReport, ObjectRef
from webhook.commands.usage import Usage
from webhook.core.kit.paths import format_path
from webhook.core.kit.quantity import format_mib
from webhook.core.kit.text import plural
from webhook.core.supply.gpu_use import GpuUse
from webhook.reports.style import Style

_COLOURS = {"deny": "red", "warn": "yellow", "dryrun": "cyan"}
_ACTIONS = ("deny", "warn", "dryrun")


def entry_json(e: AuditEntry) -> dict[str, Any]:
    r, f = e.resource, e.finding
    out: dict[str, Any] = {
        "apiVersion": r.api_version,
        "kind": r.kind,
        "namespace": r.namespace,
        "name": r.name,
        "uid": r.uid,
        "policy": f.policy,
        "rule": f.rule,
        "action": f.action,
        "message": f.message,
        "field": format_path(f.path),
        "pods": e.pods,
    }
    if e.location:
        out["location"] = e.location
    return out


def summary_json(report: AuditReport) -> dict[str, Any]:
    return {
        "objects": report.objects,
        "evaluated": report.evaluated,
        "skipped": sum(report.skipped.values()),
        "skippedReasons": dict(report.skipped),
        "kinds": dict(sorted(report.kinds.items())),
        "resourcesWithFindings": len({e.resource for e in report.entries}),
        "podsAffected": sum(report.pods_affected.values()),
        "passed": sum(report.passed.values()),
        **{action: report.count(action) for action in _ACTIONS},
        "errors": len(report.errors),
    }


def usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "namespaces": [
            {
                "namespace": n.namespace,
                "pods": n.pods,
                "gpus": n.use.gpus,
                "gpuMemoryMiB": n.use.memory_mib,
                "gpusOfUnknownMemory": n.use.unknown,
            }
            for n in usage.namespaces
        ],
        "clusterQueues": [
            {
                "clusterQueue": q.queue,
                "flavor": q.flavor,
                "resource": q.resource,
                "nominal": q.nominal,
                "most": q.most,
                "used": q.used,
                "borrowed": q.borrowed,
                "pendingWorkloads": q.pending,
                "state": q.state,
            }
            for q in usage.queues
        ],
    }


def render_json(report: AuditReport) -> str:
    body = {
        "results": [entry_json(e) for e in report.entries],
        "summary": summary_json(report),
        "usage": usage_json(report.usage),
        "errors": list(report.errors),
        "notes": list(report.notes),
    }
    return orjson.dumps(body, option=orjson.OPT_INDENT_2).decode()


def render_text(report: AuditReport, *, colour: bool) -> str:
    style = _Style(colour)
    lines = [style.bold(_headline(report)), ""]
    if report.entries:
        lines += [*_by_rule(report.entries, style), ""]
        lines += [*_by_namespace(report.entries, style), ""]
        lines += _findings(report, style)
    if report.usage:
        lines += [*usage_lines(report.usage, style), ""]
    for note in report.notes:
        lines.append(f"note: {note}")
    for error in report.errors:
        lines.append(f"{style.colour('error:', 'red')} {error}")
    return "\n".join(lines).rstrip() + "\n"


def _headline(report: AuditReport) -> str:
    s = summary_json(report)
    kinds = ", ".join(plural(n, kind) for kind, n in sorted(report.kinds.items()))
    text = f"Audited {plural(s['objects'], 'object')}"
    text += f" ({kinds})" if kinds else ""
    text += f": {s['evaluated']} evaluated, {s['skipped']} skipped"
    reasons = ", ".join(f"{n} {why}" for why, n in sorted(report.skipped.items()))
    text += f" ({reasons})" if reasons else ""
    text += (
        f".\nFindings: {s['deny']} deny, {s['warn']} warn, {s['dryrun']} dryrun on "
        f"{plural(s['resourcesWithFindings'], 'resource')}"
    )
    if s["podsAffected"]:
        text += f" (with {plural(s['podsAffected'], 'Pod')} folded under their owners)"
    return text + f"; {s['passed']} passed."


def _by_rule(entries: Iterable[AuditEntry], style: _Style) -> list[str]:
    counts: Counter[tuple[str, str, str]] = Counter()
    resources: defaultdict[tuple[str, str, str], set[ObjectRef]] = defaultdict(set)
    pods: Counter[tuple[str, str, str]] = Counter()
    for e in entries:
        key: tuple[str, str, str] = (e.finding.policy, e.finding.rule, e.finding.action)
        counts[key] += 1
        resources[key].add(e.resource)
        pods[key] += e.pods
    width = max(len(f"{p}/{r}") for p, r, _ in counts)
    lines = [style.bold("By policy and rule:")]
    for policy, rule, action in sorted(counts):
        key = (policy, rule, action)
        text = f"  {f'{policy}/{rule}'.ljust(width)}  {style.action(action)} "
        text += plural(len(resources[key]), "resource")
        if pods[key]:
            text += f" ({plural(pods[key], 'Pod')})"
        lines.append(text)
    return lines


def _by_namespace(entries: Iterable[AuditEntry], style: _Style) -> list[str]:
    counts: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for e in entries:
        counts[e.resource.namespace or "(cluster-scoped)"][e.finding.action] += 1
    width = max(len(ns) for ns in counts)
    lines = [style.bold("By namespace:")]
    for ns in sorted(counts):
        c = counts[ns]
        lines.append(f"  {ns.ljust(width)}  " + ", ".join(f"{c[a]} {a}" for a in _ACTIONS))
    return lines


def _findings(report: AuditReport, style: _Style) -> list[str]:
    lines = [style.bold("Findings:")]
    current: ObjectRef | None = None
    for e in report.entries:
        if e.resource != current:
            current = e.resource
            head = f"  {current}"
            if report.pods_affected.get(current):
                head += f" ({plural(report.pods_affected[current], 'Pod')} affected)"
            if e.location:
                head += f"  [{e.location}]"
            lines.append(style.bold(head))
        f = e.finding
        pods = f" [{plural(e.pods, 'Pod')}]" if e.pods else ""
        lines.append(f"    {style.action(f.action)} {f.policy}/{f.rule}{pods}")
        lines.append(f"           {f.message}")
    return [*lines, ""]


def usage_lines(usage: Usage, style: Style) -> list[str]:
    """GPU use in GPU units: per namespace, then per ClusterQueue against its quota."""
    lines = [style.bold("GPU use:")]
    if usage.namespaces:
        width = max(len(n.namespace) for n in usage.namespaces)
        for n in usage.namespaces:
            lines.append(
                f"  {n.namespace.ljust(width)}  {use_text(n.use)} ({plural(n.pods, 'Pod')})"
            )
    for q in usage.queues:
        lines.append(
            f"  ClusterQueue {q.queue} {q.resource} in flavor {q.flavor}: {q.used} used of "
            f"{q.nominal} nominal, {q.most} at most with the cohort; {q.state}"
        )
    return lines


def use_text(use: GpuUse) -> str:
    """`6 GPUs, 339.25 GiB (347392 MiB) of GPU memory`, saying what is not known."""
    text = plural(use.gpus, "GPU")
    if use.unknown == use.gpus:
        return text + ", their memory unknown (no inventory of their nodes)"
    text += f", {format_mib(use.memory_mib)} of GPU memory"
    return text + (f" (and {use.unknown} of unknown memory)" if use.unknown else "")


class _Style(Style):
    def action(self, action: str) -> str:
        return self.colour(action.upper().ljust(6), _COLOURS[action])
