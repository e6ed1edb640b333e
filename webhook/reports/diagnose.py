"""A diagnosis for people (text: the jobs Kueue holds, the jobs with waiting ranks, then
the Pods grouped by domain, most Pods first), for a ticket (Markdown) and for machines (a
JSON array of records: a `pod` record per Pending GPU Pod, a `job` record per job, then
a `queued` record per job Kueue holds)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import orjson

from webhook.commands.diagnose import DiagnoseReport
from webhook.core.diagnosis.evidence import Domain, Evidence, Fact
from webhook.core.diagnosis.jobs import JobRecord, RankRow
from webhook.core.diagnosis.queued import Condition, QueuedRecord
from webhook.core.kit.text import listing, plural
from webhook.core.workloads.units import shown
from webhook.reports.style import Style

_FOLDED_NAMES = 3


def record_json(r: Evidence) -> dict[str, Any]:
    return {
        "type": "pod",
        "time": _time(r.time),
        "pod": r.pod,
        "owner": r.owner or None,
        "domain": r.domain,
        "verdict": r.verdict,
        "facts": _facts_json(r.facts),
        "candidates": {"count": r.candidates, "nodes": list(r.candidate_nodes)},
        "requests": dict(r.requests),
        "scheduler_message": r.scheduler_message,
        "scheduler_time": _time(r.scheduler_time),
        "agreement": r.agreement,
        "disagreement": r.disagreement or None,
        "next_action": r.next_action,
        "also": list(r.also),
        "job": r.job or None,
        "commands": list(r.commands),
    }


def job_json(j: JobRecord) -> dict[str, Any]:
    return {
        "type": "job",
        "time": _time(j.time),
        "job": j.job,
        "namespace": j.namespace,
        "selector": j.selector or None,
        "gang": j.gang or None,
        "fit": j.fit,
        "verdict": j.verdict,
        "ranks": [
            {
                "rank": r.rank,
                "pod": r.pod,
                "node": r.node or None,
                "product": r.product or None,
                "gpus": r.gpus,
                "nics": list(r.nics),
                "state": r.state,
                "domain": r.domain or None,
            }
            for r in j.ranks
        ],
        "placed": j.placed,
        "waiting": j.waiting,
        "held": dict(j.held),
        "facts": _facts_json(j.facts),
        "next_action": j.next_action,
        "commands": list(j.commands),
    }


def queued_json(q: QueuedRecord) -> dict[str, Any]:
    return {
        "type": "queued",
        "time": _time(q.time),
        "workload": q.workload,
        "job": q.job or None,
        "namespace": q.namespace,
        "local_queue": q.local_queue or None,
        "cluster_queue": q.cluster_queue or None,
        "cohort": q.cohort or None,
        "state": q.state,
        "condition": _condition_json(q.condition) if q.condition else None,
        "conditions": [_condition_json(c) for c in q.conditions],
        "requests": dict(q.requests),
        "lacking": [
            {
                "pod_set": lack.pod_set,
                "reason": lack.kind,
                "resource": lack.resource or None,
                "flavor": lack.flavor or None,
                "needed": shown(lack.resource, lack.needed) if lack.needed is not None else None,
                "kueue": lack.words,
            }
            for lack in q.lacking
        ],
        "held_by": [
            {
                "workload": h.workload,
                "job": h.job or None,
                "cluster_queue": h.cluster_queue,
                "priority": h.priority,
                "usage": [
                    {"flavor": f, "resource": r, "amount": shown(r, n)}
                    for (f, r), n in h.usage.items()
                ],
            }
            for h in q.held_by
        ],
        "quota": [
            {
                "cluster_queue": u.queue,
                "flavor": u.flavor,
                "resource": u.resource,
                "nominal": shown(u.resource, u.nominal),
                "most": shown(u.resource, u.most),
                "used": shown(u.resource, u.used),
                "borrowed": shown(u.resource, u.borrowed),
                "state": u.state,
            }
            for u in q.quota
        ],
        "preemption": q.preemption or None,
        "verdict": q.verdict,
        "next_action": q.next_action,
        "facts": _facts_json(q.facts),
        "pods": list(q.pods),
        "commands": list(q.commands),
    }


def _condition_json(c: Condition) -> dict[str, Any]:
    return {
        "type": c.type,
        "status": c.status,
        "reason": c.reason,
        "message": c.message,
        "since": _time(c.since),
    }


def _facts_json(facts: tuple[Fact, ...]) -> list[dict[str, str]]:
    return [{"about": f.about, "name": f.name, "value": f.value} for f in facts]


def render_json(report: DiagnoseReport) -> str:
    body = [record_json(r) for r in report.records] + [job_json(j) for j in report.jobs]
    body += [queued_json(q) for q in report.queued]
    return orjson.dumps(body, option=orjson.OPT_INDENT_2).decode() + "\n"


def _time(t: datetime | None) -> str | None:
    return t.isoformat().replace("+00:00", "Z") if t is not None else None


def headline(report: DiagnoseReport) -> str:
    diagnosed = len(report.records)
    text = (
        f"{_count(diagnosed, 'Pending GPU Pod')} diagnosed, {report.stuck:,} stuck "
        f"({_count(report.pending, 'Pending Pod')} in all; {_count(report.pods, 'Pod')} and "
        f"{_count(report.nodes, 'node')} read"
    )
    text += f"; as of {_time(report.time)})." if report.time else ")."
    if report.queued:
        never = sum(1 for q in report.queued if q.state == "never")
        text += f" {_count(len(report.queued), 'job')} held by Kueue"
        text += f" ({never:,} can never be admitted)." if never else "."
    return text


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


class _Group:
    """Records of one owner with the same verdict and next action: shown once."""

    def __init__(self, first: Evidence) -> None:
        self.first = first
        self.pods = [first.pod]


def _groups(records: list[Evidence]) -> list[_Group]:
    groups: dict[tuple[str, ...], _Group] = {}
    out: list[_Group] = []
    for r in records:
        key = (r.owner, r.verdict, r.next_action) if r.owner else (r.pod,)
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group(r)
            out.append(group)
        else:
            group.pods.append(r.pod)
    return out


def _title(group: _Group) -> str:
    r = group.first
    if len(group.pods) == 1:
        return r.pod + (f" ({r.owner})" if r.owner else "")
    namespace = r.pod.split("/", 1)[0]
    names = listing(sorted(p.split("/", 1)[1] for p in group.pods), _FOLDED_NAMES)
    return f"{plural(len(group.pods), 'Pod')} of {r.owner} in {namespace}: {names}"


def _scheduler(r: Evidence) -> str:
    if r.scheduler_message is None:
        return "no FailedScheduling event (none yet, or expired: events live 1 hour by default)"
    when = f" at {_time(r.scheduler_time)}" if r.scheduler_time else ""
    text = f'"{r.scheduler_message}"{when}: {r.agreement}'
    return text + (f" ({r.disagreement})" if r.disagreement else "")


def render_text(report: DiagnoseReport, *, colour: bool) -> str:
    style = _Style(colour)
    lines = [style.bold(headline(report)), ""]
    if report.queued:
        lines.append(style.bold(f"queued: {plural(len(report.queued), 'job')} held by Kueue"))
        for q in report.queued:
            lines += [f"  {style.bold(f'{_queued_title(q)} ({q.state})')}", *_text_queued(q), ""]
    if report.jobs:
        lines.append(style.bold(f"jobs: {plural(len(report.jobs), 'job')} with waiting ranks"))
        for job in report.jobs:
            lines += [f"  {style.bold(f'{job.job} ({job.fit})')}", *_text_job(job), ""]
    for domain, records in report.by_domain():
        lines.append(style.domain(domain, f"{domain}: {plural(len(records), 'Pod')}"))
        for group in _groups(records):
            lines += [f"  {style.bold(_title(group))}", *_text_record(group.first), ""]
    for note in report.notes:
        lines.append(f"note: {note}")
    for error in report.errors:
        lines.append(f"{style.colour('error:', 'red')} {error}")
    return "\n".join(lines).rstrip() + "\n"


def _text_record(r: Evidence) -> Iterator[str]:
    yield f"    verdict:   {r.verdict}"
    facts = [f for f in r.facts if f.about != "scheduler"]
    for i, f in enumerate(facts):
        yield f"    {'facts:' if i == 0 else '':<10} {f}"
    if r.candidates:
        nodes = listing(list(r.candidate_nodes), 3)
        more = r.candidates - len(r.candidate_nodes)
        yield f"    nodes:     {plural(r.candidates, 'candidate')}: {nodes}" + (
            f" and {more} more" if more > 0 else ""
        )
    for also in r.also:
        yield f"    also:      {also}"
    yield f"    scheduler: {_scheduler(r)}"
    yield f"    next:      {r.next_action}"


def _text_job(j: JobRecord) -> Iterator[str]:
    yield f"    verdict:   {j.verdict}"
    for i, row in enumerate(j.ranks):
        yield f"    {'ranks:' if i == 0 else '':<10} {_row(row)}"
    more = j.placed + j.waiting - len(j.ranks)
    if more > 0:
        yield f"               and {plural(more, 'more rank')}"
    for i, f in enumerate(j.facts):
        yield f"    {'facts:' if i == 0 else '':<10} {f}"
    yield f"    next:      {j.next_action}"
    for i, c in enumerate(j.commands):
        yield f"    {'kubectl:' if i == 0 else '':<10} {c}"


def _queued_title(q: QueuedRecord) -> str:
    return q.job or f"Workload {q.workload}"


def _queue_line(q: QueuedRecord) -> str:
    line = f"{q.workload} in LocalQueue {q.namespace}/{q.local_queue or '(none)'}"
    if q.cluster_queue:
        line += f" -> ClusterQueue {q.cluster_queue}"
    return line + (f" (cohort {q.cohort})" if q.cohort else "")


def _condition_text(c: Condition | None) -> str:
    if c is None:
        return "no condition yet (Kueue has not tried the Workload)"
    when = f" since {_time(c.since)}" if c.since else ""
    return f'{c.type}={c.status} {c.reason}{when}: "{c.message}"'


def _text_queued(q: QueuedRecord) -> Iterator[str]:
    yield f"    workload:  {_queue_line(q)}"
    yield f"    kueue:     {_condition_text(q.condition)}"
    yield f"    verdict:   {q.verdict}"
    shown_above = f"condition {q.condition.type}" if q.condition else ""
    facts = [f for f in q.facts if f.about != f"Workload {q.workload}" or f.name != shown_above]
    for i, f in enumerate(facts):
        yield f"    {'facts:' if i == 0 else '':<10} {f}"
    if q.pods:
        yield f"    pods:      {listing(list(q.pods), 3)}"
    yield f"    next:      {q.next_action}"
    for i, c in enumerate(q.commands):
        yield f"    {'kubectl:' if i == 0 else '':<10} {c}"


def _row(r: RankRow) -> str:
    where = f"on {r.node}" + (f" ({r.product})" if r.product else "") if r.node else "waiting"
    nics = f", {', '.join(r.nics)}" if r.nics else ""
    why = f": {r.domain}" if r.domain else ""
    return f"{r.rank or '-'}  {r.pod}  {r.gpus}{nics}  {where}{why}"


def render_markdown(report: DiagnoseReport) -> str:
    lines = ["# Pending GPU Pods", "", f"_{headline(report)}_", ""]
    if not report.records and not report.queued:
        lines += ["Nothing to diagnose: no Pending Pod asks for GPUs.", ""]
    for q in report.queued:
        lines += _md_queued(q)
    for job in report.jobs:
        lines += _md_job(job)
    for domain, records in report.by_domain():
        lines += [f"## `{domain}`: {plural(len(records), 'Pod')}", ""]
        for group in _groups(records):
            r = group.first
            lines += [f"### {_md(_title(group))}", ""]
            lines += [
                f"- **Verdict:** {_md(r.verdict)}",
                f"- **Next action:** {_md(r.next_action)}",
            ]
            if r.scheduler_message is not None:
                lines.append(f"- **Scheduler** ({r.agreement}): `{r.scheduler_message}`")
                if r.disagreement:
                    lines.append(f"  - {_md(r.disagreement)}")
            else:
                lines.append("- **Scheduler:** no FailedScheduling event")
            lines += [f"- **Also:** {_md(a)}" for a in r.also]
            facts = [f for f in r.facts if f.about != "scheduler"]
            if facts:
                lines.append("- **Facts:**")
                lines += [f"  - {_md(str(f))}" for f in facts]
            lines.append("")
    lines += [f"> note: {_md(n)}" for n in report.notes]
    lines += [f"> **error:** {_md(e)}" for e in report.errors]
    return "\n".join(lines).rstrip() + "\n"


def _md_job(j: JobRecord) -> list[str]:
    lines = [f"## Job {_md(j.job)} (`{j.fit}`)", "", f"- **Verdict:** {_md(j.verdict)}"]
    lines += [f"- **Next action:** {_md(j.next_action)}", ""]
    lines += [
        "| rank | Pod | node | GPU product | GPUs | NICs | state |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in j.ranks:
        state = r.state + (f" ({r.domain})" if r.domain else "")
        cells = (r.rank, r.pod, r.node or "-", r.product or "-", r.gpus, ", ".join(r.nics) or "-")
        lines.append("| " + " | ".join(_md(c) for c in (*cells, state)) + " |")
    lines.append("")
    if j.facts:
        lines += ["- **Facts:**", *[f"  - {_md(str(f))}" for f in j.facts]]
    if j.commands:
        lines += ["- **Commands:**", *[f"  - `{c}`" for c in j.commands]]
    return [*lines, ""]


def _md_queued(q: QueuedRecord) -> list[str]:
    lines = [f"## Held by Kueue: {_md(_queued_title(q))} (`{q.state}`)", ""]
    lines += [
        f"- **Workload:** {_md(_queue_line(q))}",
        f"- **Kueue:** {_md(_condition_text(q.condition))}",
        f"- **Verdict:** {_md(q.verdict)}",
        f"- **Next action:** {_md(q.next_action)}",
    ]
    if q.pods:
        lines.append(f"- **Pods:** {_md(listing(list(q.pods), 8))}")
    if q.facts:
        lines += ["- **Facts:**", *[f"  - {_md(str(f))}" for f in q.facts]]
    if q.commands:
        lines += ["- **Commands:**", *[f"  - `{c}`" for c in q.commands]]
    return [*lines, ""]


def _md(text: str) -> str:
    """Text safe in a Markdown list item: no stray emphasis, HTML or table pipes."""
    for ch in ("\\", "*", "_", "`", "<", ">", "|", "[", "]"):
        text = text.replace(ch, "\\" + ch)
    return text


_DOMAIN_COLOURS: dict[str, str] = {"not-stuck": "green", "gated": "cyan"}


class _Style(Style):
    def domain(self, domain: Domain, text: str) -> str:
        return self.colour(text, _DOMAIN_COLOURS.get(domain, "red"))
