"""`check` of a big JSON dump (`kubectl get pods -A -o json`): streamed, across CPUs.

A manifest file is parsed whole with its node tree (YAML, for file:line findings); a
70 MiB List that way takes a minute and more than a gigabyte. A JSON file of MIN_BYTES
or more in kubectl's layout (webhook.sources.dumpsplit) is read item by item instead,
in byte ranges across forked workers when there are several CPUs, and only an item
with a finding is walked again for its lines (webhook.sources.jsonlines), so findings,
their lines, counts and errors are what the whole parse gives. A file in any other
layout goes the whole-parse way, as before.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.commands.check import CheckRun, check_object, merged_in_order
from webhook.core.engine.policy import PolicySet
from webhook.core.kit.paths import Path
from webhook.core.supply.inventory import Inventory
from webhook.sources import dumpsplit
from webhook.sources.jsonlines import line_in

MIN_BYTES = 4 << 20  # smaller JSON files are parsed whole, as every manifest is

# What a forked worker judges with: set in the parent just before the pool forks.
_shared: tuple[PolicySet, Inventory] | None = None


@dataclass(frozen=True, slots=True)
class DumpItem:
    """One item of a dump, placed as a SourceObject places its fields."""

    source: str
    obj: Mapping[str, Any]
    line: int  # of the item's first line
    text: bytes
    document_line: int = 1  # the List's: the dump is one document

    def line_of(self, field: Path) -> int:
        return self.line + line_in(self.text, field) if field else self.line


def dump_parts(name: str, *, workers: int) -> list[dumpsplit.Part] | None:
    """The byte ranges of a big JSON List in kubectl's layout; None for anything else."""
    if name == "-" or name.endswith((".yaml", ".yml")):  # no stat per YAML manifest
        return None
    try:
        if os.path.getsize(name) < MIN_BYTES:
            return None
        parts = dumpsplit.parts(name, count=workers)
    except (dumpsplit.Unusual, OSError, ValueError):
        return None
    return parts if parts[0].kind.endswith("List") else None


def check_dump(
    parts: list[dumpsplit.Part], *, policy_set: PolicySet, inventory: Inventory
) -> CheckRun | None:
    """The CheckRun of the whole file; None when some range turned out Unusual."""
    import multiprocessing  # here: every `check` imports this module, few need a pool

    try:
        jobs = list(zip(parts, dumpsplit.line_bases(parts), strict=True))
    except (dumpsplit.Unusual, OSError):
        return None
    global _shared
    _shared = (policy_set, inventory)
    try:
        if len(parts) < 2 or "fork" not in multiprocessing.get_all_start_methods():
            runs = [_check_part(job) for job in jobs]
        else:
            with multiprocessing.get_context("fork").Pool(len(parts)) as pool:
                runs = pool.map(_check_part, jobs, chunksize=1)
    finally:
        _shared = None
    if any(r is None for r in runs):
        return None
    return merged_in_order([r for r in runs if r is not None])


def _check_part(job: tuple[dumpsplit.Part, int]) -> CheckRun | None:
    assert _shared is not None, "a worker forked without the policy set"
    policy_set, inventory = _shared
    part, base = job
    run = CheckRun()
    source = part.path
    try:
        for line, obj, text in dumpsplit.items(part, lines=[]):
            item = DumpItem(source, obj, base + line + 1, text)
            check_object(item, run, policy_set, inventory)
    except (dumpsplit.Unusual, OSError):
        return None
    return run


def file_holds(name: str, needle: bytes) -> bool:
    """Whether the file's bytes contain `needle`, read a chunk at a time."""
    carry = b""
    try:
        with open(name, "rb") as f:
            while chunk := f.read(dumpsplit.CHUNK):
                if needle in carry + chunk[: len(needle)] or needle in chunk:
                    return True
                carry = chunk[-len(needle) + 1 :]
    except OSError:
        return True  # the whole-file path reports it
    return False


def dump_objects(
    parts: Sequence[dumpsplit.Part], *, keep: Callable[[Any], bool]
) -> list[Any] | None:
    """The items of the ranges that `keep` takes, in order, one parsed at a time (the DRA
    pre-pass keeps a few); None when a range is Unusual."""
    try:
        return [o for part in parts for _, o, _ in dumpsplit.items(part, lines=[]) if keep(o)]
    except (dumpsplit.Unusual, OSError):
        return None
