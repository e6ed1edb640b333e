"""Audit memory does not grow with the size of a dump (it is streamed, never loaded whole).

Not a timed test: it compares the peak RSS of two audits in fresh processes, one of a
dump a hundred times larger than the other.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

from bench import audit_bench  # the generator of bench/audit_bench.py
from tests.support.paths import ROOT


def peak_rss_mib(*args: str) -> float:
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhook", "audit", "-o", "json", *args],
        stdout=subprocess.DEVNULL, cwd=ROOT,
    )  # fmt: skip
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) in (0, 1)
    return usage.ru_maxrss / 1024


def test_peak_memory_does_not_grow_with_the_dump(tmp_path: Path) -> None:
    small, big, nodes = tmp_path / "small.json", tmp_path / "big.json", tmp_path / "nodes.json"
    audit_bench.write_dump(small, 50)
    audit_bench.write_dump(big, 5000)
    nodes.write_bytes(orjson.dumps(audit_bench.nodes()))

    base = peak_rss_mib("--from", str(small), "--inventory", str(nodes))
    grown = peak_rss_mib("--from", str(big), "--inventory", str(nodes))

    size = big.stat().st_size / 2**20
    assert size > 30  # a whole parse would hold several times this
    assert grown - base < 20, f"{base:.0f} MiB -> {grown:.0f} MiB for a {size:.0f} MiB dump"
