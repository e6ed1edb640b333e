"""Real manifests from public repositories go through `check` without a traceback.

The corpus (../shared/corpus/public, with its PROVENANCE.md) is not part of this
repository; the module is skipped where it is absent. The whole directory goes through
the real command once as a subprocess; each file then goes through the same command
in-process (click's runner), because a subprocess per file would cost a second each.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support.builders import EXAMPLES, ROOT
from tests.support.paths import SHARED
from webhook.cli import main

CORPUS = SHARED / "corpus" / "public"
FILES = sorted(CORPUS.rglob("*.yaml")) if CORPUS.is_dir() else []
NODES = str(EXAMPLES / "cluster" / "nodes.json")

pytestmark = pytest.mark.skipif(not FILES, reason=f"no corpus at {CORPUS}")


@cache
def whole_directory(*extra: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "webhook", "check", "--output", "json", *extra, str(CORPUS)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    return proc, json.loads(proc.stdout)


@pytest.mark.parametrize("extra", [(), ("--inventory", NODES)], ids=["no-inventory", "inventory"])
def test_whole_corpus_through_the_command(extra: tuple[str, ...]) -> None:
    proc, body = whole_directory(*extra)
    assert proc.stderr == ""  # no traceback, no warning
    assert proc.returncode in (0, 1, 2)
    assert body["summary"]["files"] == len(FILES)
    assert (proc.returncode == 2) is bool(body["errors"])
    # A file that really is broken is named with its line; nothing is an internal error.
    for error in body["errors"]:
        assert re.match(rf"^{re.escape(str(CORPUS))}/\S+:\d+: ", error), error
        assert "internal error" not in error
    assert all(r["line"] >= 1 for r in body["results"])


def test_what_the_corpus_readme_promises() -> None:
    _, body = whole_directory("--inventory", NODES)
    rules = Counter(
        (Path(r["file"]).relative_to(CORPUS).as_posix(), r["rule"]) for r in body["results"]
    )
    # An application Deployment mounting /dev/kfd and /dev/dri from the host is denied.
    vllm = "ROCm__k8s-device-plugin/example__vllm-serve__deployment.yaml"
    assert rules[(vllm, "hostpath-device")] == 2
    # GPU system components in their own namespaces are exempt.
    skipped = body["summary"]["skippedReasons"]
    assert skipped["no policy matches DaemonSet in namespace kube-system"] >= 1
    # None of the files carries the labels: GPU workloads are asked for both.
    counts = Counter(r["rule"] for r in body["results"])
    assert counts["missing-peak-memory"] == counts["missing-slo-class"] > 0


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(CORPUS).as_posix())
def test_each_file_alone(path: Path) -> None:
    result = CliRunner().invoke(main, ["check", "--inventory", NODES, str(path)])
    # click turns sys.exit into exit_code; any other exception would be a traceback.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code in (0, 1, 2)
    assert "internal error" not in result.output
    if result.exit_code == 2:
        assert re.search(rf"^error: {re.escape(str(path))}:\d+: ", result.output, re.MULTILINE)
    assert re.search(r"^1 file, \d+ objects?: ", result.output, re.MULTILINE)
