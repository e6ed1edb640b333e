"""`audit --from`: dump files into an Auditor, a big JSON List across all CPUs.

A dump of MIN_BYTES or more in kubectl's layout (webhook.sources.dumpsplit) is cut into
RANGES_PER_WORKER byte ranges per CPU; each range is audited in one of a pool of forked
workers, one per CPU (the policy set and the inventory are inherited, never pickled),
and the ranges' findings, counts, owners and errors are put back in file order, with
their lines, so the report is the one a single process would write. Anything else
(YAML, stdin, small files, another layout) is read here by `webhook.sources.dumps`, as
before.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from webhook.commands.audit import Auditor, AuditState
from webhook.commands.parallel import workers_available
from webhook.core.engine.policy import PolicySet
from webhook.core.supply.inventory import Inventory
from webhook.errors import ManifestError
from webhook.sources import dumpsplit
from webhook.sources.dumps import display_name, read_dump
from webhook.sources.files import expand_paths

# Below this a dump is audited in this process: forking and merging cost ~50 ms, and a
# 16 MiB dump (2,000 kubectl Pods) takes about 0.1 s in one.
MIN_BYTES = 16 << 20

# Ranges per worker: a worker that finishes early takes the next range, so one slow
# core (another process on it) delays the audit by a quarter range, not by half of it.
RANGES_PER_WORKER = 4

# What a forked worker audits with: set in the parent just before the pool forks.
_shared: tuple[PolicySet, Inventory, str | None] | None = None


def audit_dumps(
    paths: Sequence[str],
    *,
    auditor: Auditor,
    namespace: str | None,
    stage: Callable[[str], None],
    tick: Callable[[int], None],
    workers: int | None = None,
    min_bytes: int = MIN_BYTES,
) -> None:
    """Every object of every dump file into `auditor` (errors into auditor.errors)."""
    workers = workers_available() if workers is None else workers
    for raw in paths:
        found = False
        for name in expand_paths([raw]):
            stage(display_name(name))
            if _parallel(name, workers=workers, min_bytes=min_bytes):
                seen = _in_parts(name, auditor=auditor, namespace=namespace, workers=workers)
                if seen is not None:
                    found = found or seen > 0
                    tick(seen)
                    continue
            found = _in_process(name, auditor=auditor, namespace=namespace, tick=tick) or found
        if not found:  # an empty file, dump (`"items": []`), directory or pipe
            auditor.errors.append(f"no Kubernetes objects found in {display_name(raw)}")


def _parallel(name: str, *, workers: int, min_bytes: int) -> bool:
    if workers < 2 or name == "-" or "fork" not in multiprocessing.get_all_start_methods():
        return False
    try:
        return os.path.getsize(name) >= min_bytes
    except OSError:
        return False  # read_dump names the problem


def _in_process(
    name: str, *, auditor: Auditor, namespace: str | None, tick: Callable[[int], None]
) -> bool:
    source = display_name(name)
    found = False
    try:
        for item in read_dump(name):
            found = True
            if namespace is None or _namespace(item.value) == namespace:
                auditor.add(item.value, location=f"{source}:{item.line}")
                tick(1)
    except ManifestError as exc:
        found = True  # the error names the file
        auditor.errors.append(str(exc))
    return found


def _in_parts(name: str, *, auditor: Auditor, namespace: str | None, workers: int) -> int | None:
    """The objects seen in `name`, audited across `workers` processes; None (nothing
    audited) when the file is not in the layout that can be cut."""
    try:
        parts = dumpsplit.parts(name, count=workers * RANGES_PER_WORKER)
        head_lines = _newlines(name, parts[0].start)
    except (dumpsplit.Unusual, OSError):
        return None
    if len(parts) < 2:
        return None
    global _shared
    _shared = (auditor.policy_set, auditor.inventory, namespace)
    try:
        with multiprocessing.get_context("fork").Pool(min(workers, len(parts))) as pool:
            done = pool.map(_audit_part, parts, chunksize=1)
    finally:
        _shared = None
    if any(d is None for d in done):
        return None
    source, base, seen = display_name(name), head_lines, 0
    for result in done:
        assert result is not None
        state, lines, count = result
        auditor.absorb(state, moved=_mover(source, base))
        base += lines
        seen += count
    return seen


def _audit_part(part: dumpsplit.Part) -> tuple[AuditState, int, int] | None:
    assert _shared is not None, "a worker forked without the policy set"
    policy_set, inventory, namespace = _shared
    auditor = Auditor(policy_set, inventory)
    source = display_name(part.path)
    lines: list[int] = []
    seen = 0
    try:
        for line, obj, _ in dumpsplit.items(part, lines=lines):
            seen += 1
            if namespace is None or _namespace(obj) == namespace:
                auditor.add(obj, location=f"{source}:{line + 1}")
    except (dumpsplit.Unusual, OSError):
        return None
    return auditor.state(), lines[0], seen


def _mover(source: str, base: int) -> Callable[[str], str]:
    """`source:N...` -> `source:N+base...`: a worker counts lines from its range."""
    head = source + ":"

    def moved(text: str) -> str:
        if not text.startswith(head):
            return text
        rest = text[len(head) :]
        digits = len(rest) - len(rest.lstrip("0123456789"))
        if not digits:
            return text
        return f"{head}{int(rest[:digits]) + base}{rest[digits:]}"

    return moved


def _newlines(name: str, end: int) -> int:
    with open(name, "rb") as f:
        return f.read(end).count(b"\n")


def _namespace(obj: Any) -> str | None:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return str(meta.get("namespace") or "") if isinstance(meta, Mapping) else None
