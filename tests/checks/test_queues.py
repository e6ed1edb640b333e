"""gpu-queues through the real CLI on examples/queues: each file yields what it says."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.clirun import gpu_admission
from tests.support.paths import ROOT

QUEUES = ROOT / "examples" / "queues"
EXAMPLES = sorted((QUEUES / "bad").glob("*.yaml")) + sorted((QUEUES / "good").glob("*.yaml"))


def _expected(path: Path) -> list[tuple[str, str]]:
    found = re.findall(r"^# expect: (\S+)(?: \((warn)\))?$", path.read_text(), flags=re.MULTILINE)
    return sorted((rule, action or "deny") for rule, action in found)


@pytest.fixture(scope="module")
def examples_run() -> dict[str, list[tuple[str, str]]]:
    inventory = str(QUEUES / "cluster.yaml")
    done = gpu_admission(
        "check", "-o", "json", "--inventory", inventory, str(QUEUES / "bad"), str(QUEUES / "good")
    )
    assert done.returncode == 1, done.stderr
    out: dict[str, list[tuple[str, str]]] = {str(p): [] for p in EXAMPLES}
    for r in json.loads(done.stdout)["results"]:
        out.setdefault(str(ROOT / r["file"]), []).append(
            (f"{r['policy']}/{r['rule']}", r["action"])
        )
    return out


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_queue_example_yields_what_it_says(examples_run: dict, path: Path) -> None:
    assert sorted(examples_run[str(path)]) == _expected(path)
