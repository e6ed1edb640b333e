"""`check` of a big JSON dump streams it, with the findings a whole parse gives.

The same kubectl-layout List goes to the real command twice: as a file (over
checkdump.MIN_BYTES: read item by item across two workers, lines found in each item's
text) and on stdin (never streamed: parsed whole, lines from the YAML node tree). The
JSON outputs must be equal but for the file name, and so must the exit codes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench import audit_bench  # the generator of bench/audit_bench.py
from tests.support.auditobjects import GPU_LABELS, as_list, deployment_family, pod
from tests.support.paths import ROOT
from webhook.commands.checkdump import MIN_BYTES

INVENTORY = ROOT / "examples" / "cluster" / "nodes.json"


def supply_objects() -> list[dict[str, Any]]:
    """A claim template, a Pod that uses it and one that names a missing one."""
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "team-a"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com"}}]}}},
    }  # fmt: skip
    users = []
    for name, source in (("uses", "one-gpu"), ("missing", "one-gpux")):
        p = pod(name, labels=GPU_LABELS)
        p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": source}]
        p["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
        users.append(p)
    return [*users, template]


def dump_items() -> list[dict[str, Any]]:
    typo = pod("typo", gpus=1, labels=GPU_LABELS)
    typo["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpux": "1"}}
    items = [audit_bench.pod(i) for i in range(560)]
    items[300:300] = [*deployment_family("t", pods=2, privileged=True), typo, *supply_objects()]
    return items


def check(*args: str, stdin: Any = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webhook", "check", "-o", "json", "--inventory", str(INVENTORY),
         *args], stdin=stdin, capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip


def test_a_streamed_dump_gives_the_whole_parse_findings(tmp_path: Path) -> None:
    dump = tmp_path / "pods.json"
    dump.write_text(json.dumps(as_list(dump_items()), indent=4) + "\n")
    assert dump.stat().st_size >= MIN_BYTES
    streamed = check(str(dump))
    with dump.open("rb") as stdin:
        whole = check("-", stdin=stdin)
    assert streamed.returncode == whole.returncode == 1, streamed.stderr + whole.stderr
    assert streamed.stdout.replace(str(dump), "<stdin>") == whole.stdout
    body = json.loads(streamed.stdout)
    rules = {r["rule"] for r in body["results"]}
    assert {"privileged", "unknown-resource", "missing-claim-source"} <= rules, rules
    assert "exceeds-device-memory" in rules
    assert body["summary"]["objects"] == len(dump_items())
