"""Progress on stderr: drawn on a terminal, silent when piped."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.auditobjects import as_list, pod
from tests.support.paths import ROOT
from webhook.cli.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_draws_at_most_every_interval() -> None:
    out, clock = io.StringIO(), Clock()
    progress = Progress(stream=out, enabled=True, clock=clock)

    progress.stage("dump.json")
    for _ in range(512):
        progress.tick()
    clock.now += 1.0
    for _ in range(256):
        progress.tick()
    progress.close()

    frames = out.getvalue().split("\r\x1b[K")
    assert frames[1:] == [
        "audit: 0 objects (0/s)  dump.json",
        "audit: 768 objects (768/s)  dump.json",
        "",
    ]


def test_progress_is_silent_when_disabled() -> None:
    out = io.StringIO()
    progress = Progress(stream=out, enabled=False)
    progress.stage("x")
    for _ in range(1000):
        progress.tick()
    progress.close()

    assert out.getvalue() == ""


def test_audit_draws_progress_on_a_terminal_stderr(tmp_path: Path) -> None:
    dump = tmp_path / "d.json"
    dump.write_text(json.dumps(as_list([pod(f"p{i}") for i in range(5)])))
    primary, secondary = os.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "webhook", "audit", "--from", str(dump)],
            stdout=subprocess.PIPE, stderr=secondary, cwd=ROOT, timeout=60, check=False,
        )  # fmt: skip
        os.close(secondary)
        drawn = os.read(primary, 65536).decode()
    finally:
        os.close(primary)

    assert proc.returncode == 0
    assert f"audit: 0 objects (0/s)  {dump}" in drawn
    assert drawn.endswith("\r\x1b[K")  # the line is cleared before the report
    assert b"audit:" not in proc.stdout
