"""The decision log of a real `serve` process: a line per decision, on stdout, written
within the loop turn that answered (webhook/serve/decisionlog.py)."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from tests.support.reviews import GOOD_LABELS, pod, review
from tests.support.servers import Server


@pytest.mark.parametrize("unbuffered", ["1", ""], ids=["PYTHONUNBUFFERED=1", "buffered"])
def test_each_decision_is_on_stdout_while_the_server_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unbuffered: str
) -> None:
    # The image sets PYTHONUNBUFFERED=1: stdout is then a bare FileIO, which the log
    # buffers itself (one write a loop turn); a line must not wait for the exit either way.
    monkeypatch.setenv("PYTHONUNBUFFERED", unbuffered)
    server = Server(tmp_path)
    try:
        uids = []
        for _ in range(3):
            r = review(pod(labels=GOOD_LABELS))
            assert server.validate(r).status_code == 200
            uids.append(r["request"]["uid"])
        deadline = time.monotonic() + 5
        logged: list[str] = []
        while time.monotonic() < deadline:
            lines = (tmp_path / "decisions.log").read_bytes().splitlines()
            logged = [orjson.loads(line)["uid"] for line in lines]
            if logged == uids:
                break
            time.sleep(0.05)
        assert logged == uids
        assert server.proc.poll() is None
    finally:
        server.stop()
