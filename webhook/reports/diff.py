"""`diff` for people and machines: what a policy change does, as text or JSON."""

from __future__ import annotations

from collections.abc import Iterable

import click
import orjson

from webhook.commands.diff import HEADINGS, DiffReport
from webhook.core.engine.evaluation import Finding


def render_json(report: DiffReport) -> str:
    body = {
        "becameDenied": [d.as_json() for d in report.of("became-denied")],
        "becameAllowed": [d.as_json() for d in report.of("became-allowed")],
        "changed": [d.as_json() for d in report.of("changed")],
        "summary": report.summary(),
        "errors": report.errors,
    }
    return orjson.dumps(body, option=orjson.OPT_INDENT_2).decode()


def render_text(report: DiffReport, *, colour: bool) -> str:
    lines: list[str] = []
    for change, heading in HEADINGS.items():
        diffs = report.of(change)
        if not diffs:
            continue
        lines.append(_bold(f"{heading} ({len(diffs)}):", colour))
        for d in diffs:
            ns = f"{d.namespace}/" if d.namespace else ""
            lines.append(f"  {d.location}  {d.kind} {ns}{d.name}  ({d.before} -> {d.after})")
            lines += _finding_lines("-", d.removed, "red", colour)
            lines += _finding_lines("+", d.added, "green", colour)
        lines.append("")
    lines += [f"error: {e}" for e in report.errors]
    s = report.summary()
    lines.append(
        f"{s['objects']} objects, {s['evaluated']} judged: {s['becameDenied']} became denied, "
        f"{s['becameAllowed']} became allowed, {s['changed']} changed, "
        f"{s['unchanged']} unchanged" + (f"; {s['errors']} errors" if s["errors"] else "")
    )
    return "\n".join(lines)


def _finding_lines(sign: str, findings: Iterable[Finding], fg: str, colour: bool) -> list[str]:
    out = []
    for f in findings:
        head = f"    {sign} {f.action.upper():6} {f.policy}/{f.rule}"
        out.append(click.style(head, fg=fg) if colour else head)
        out.append(f"             {f.message}")
    return out


def _bold(text: str, colour: bool) -> str:
    return click.style(text, bold=True) if colour else text
