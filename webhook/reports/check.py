"""Findings for people and machines: text (grouped by file) and JSON (the DESIGN contract)."""

from __future__ import annotations

from typing import Any

import click
import orjson

from webhook.commands.check import CheckRun, Result

_COLOURS = {"deny": "red", "warn": "yellow", "dryrun": "cyan"}


def render_json(run: CheckRun) -> str:
    body = {
        "results": [r.as_json() for r in run.results],
        "summary": run.summary(),
        "errors": run.errors,
    }
    return orjson.dumps(body, option=orjson.OPT_INDENT_2).decode()


def render_text(run: CheckRun, *, colour: bool) -> str:
    lines: list[str] = []
    by_file: dict[str, list[Result]] = {}
    for r in run.results:
        by_file.setdefault(r.file, []).append(r)
    for file, results in by_file.items():
        lines.append(click.style(file, bold=True) if colour else file)
        for r in sorted(results, key=lambda r: r.line):
            f = r.finding
            action = f.action.upper().ljust(6)
            if colour:
                action = click.style(action, fg=_COLOURS[f.action], bold=True)
            lines.append(
                f"  {r.line:>4}  {action} {f.policy}/{f.rule}  {r.kind} {r.namespace}/{r.name}"
            )
            lines.append(f"        {f.message}")
        lines.append("")
    for error in run.errors:
        head = click.style("error:", fg="red", bold=True) if colour else "error:"
        lines.append(f"{head} {error}")
    if run.errors:
        lines.append("")
    lines.append(_summary_line(run.summary()))
    return "\n".join(lines)


def _summary_line(s: dict[str, Any]) -> str:
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(s["skippedReasons"].items()))
    text = (
        f"{_count(s['files'], 'file')}, {_count(s['objects'], 'object')}: "
        f"{s['evaluated']} checked, {s['skipped']} skipped"
    )
    if skipped:
        text += f" ({skipped})"
    text += f"; findings: {s['deny']} deny, {s['warn']} warn, {s['dryrun']} dryrun"
    if s["errors"]:
        text += f"; {_count(s['errors'], 'error')}"
    return text


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
