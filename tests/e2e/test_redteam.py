"""The red-team table (tests/data/redteam/cases.yaml, docs/redteam.md): every way in,
and every legitimate control, through `check` and end to end through the apiserver.

Each case is a manifest as a user would write it (YAML text, read by `check` as kubectl
reads it) and the rules that must refuse it, or none for a control that must pass.

- `check`: one run of the real CLI over a directory holding every case, with the example
  inventory; findings are matched to cases by object name.
- The apiserver: the same objects (as JSON, what kubectl sends) through `apiserverhook`,
  the kube-apiserver's own validating-webhook plugin, loaded with the shipped
  ValidatingWebhookConfiguration (its generated matchConditions decide what is sent),
  into a live `gpu-admission serve` with the shipped policies over TLS. A case that the
  matchConditions do not send is allowed there, and fails here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.apiserverhook import APISERVERHOOK, Obj, run_cases, write_webhook_config
from tests.support.paths import ROOT
from webhook.sources.yamlsource import iter_documents

CASES_FILE = ROOT / "tests/data/redteam/cases.yaml"
NAMESPACE = "ml"
DENIED = "denied the request:"

pytestmark = [
    pytest.mark.skipif(not APISERVERHOOK.exists(), reason=f"{APISERVERHOOK} not found"),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed"),
]


def load_cases() -> list[Obj]:
    cases: list[Obj] = yaml.safe_load(CASES_FILE.read_text())
    for case in cases:
        # The manifest as kubectl reads it (YAML 1.1 as go-yaml v2: `privileged: y`).
        [doc] = [d.data for d in iter_documents(case["manifest"], source=case["id"])]
        assert doc["metadata"]["name"] == case["id"], "a case's object is named as the case"
        case["object"] = doc
    return cases


CASES = load_cases()
IDS = [c["id"] for c in CASES]


def test_the_table_is_well_formed() -> None:
    assert len(IDS) == len(set(IDS))
    for case in CASES:
        fields = {"id", "mechanism", "why", "manifest", "expect", "warn", "object", "old",
                  "operation", "subResource", "checkOnly", "admissionOnly",
                  "inputError"}  # fmt: skip
        assert set(case) <= fields, case["id"]
        assert isinstance(case["expect"], list), case["id"]
    assert sum(1 for c in CASES if c["expect"] or c.get("warn")) >= 40  # ways in
    assert sum(1 for c in CASES if not c["expect"] and not c.get("warn")) >= 15  # controls


# --- check ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, set[str]]]:
    """Rules by action and object name, from one `check` run over every case."""
    directory = tmp_path_factory.mktemp("redteam")
    for case in CASES:
        if not case.get("admissionOnly"):
            (directory / f"{case['id']}.yaml").write_text(case["manifest"])
    run = subprocess.run(
        [sys.executable, "-m", "webhook", "check", "-o", "json",
         "--inventory", str(ROOT / "examples/cluster/nodes.json"), str(directory)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    out = json.loads(run.stdout)
    # `inputError`: a file check reports as an input error (exit 2) and still judges,
    # as kubectl reads it; every other case reads cleanly.
    wanted = {c["id"]: c["inputError"] for c in CASES if c.get("inputError")}
    assert run.returncode == (2 if wanted else 1), run.stderr
    for error in out["errors"]:
        case = error.split(":", 1)[0].rsplit("/", 1)[-1].removesuffix(".yaml")
        assert wanted.get(case, "\0") in error, error
    assert len(out["errors"]) == len(wanted), out["errors"]
    found: dict[str, dict[str, set[str]]] = {"deny": {}, "warn": {}}
    for result in out["results"]:
        rules = found[result["action"]].setdefault(result["name"], set())
        rules.add(f"{result['policy']}/{result['rule']}")
    return found


@pytest.mark.parametrize(
    "case", [c for c in CASES if not c.get("admissionOnly")], ids=lambda c: c["id"]
)
def test_check(checked: dict[str, dict[str, set[str]]], case: Obj) -> None:
    denied = checked["deny"].get(case["id"], set())
    warned = checked["warn"].get(case["id"], set())
    if case["expect"]:
        assert set(case["expect"]) <= denied, f"{case['id']}: denied {sorted(denied)}"
    else:
        assert not denied, f"{case['id']}: a control was denied: {sorted(denied)}"
    if case.get("warn"):
        assert set(case["warn"]) <= warned, f"{case['id']}: warned {sorted(warned)}"
    elif not case["expect"]:
        assert not warned, f"{case['id']}: a control was warned about: {sorted(warned)}"


# --- the apiserver ----------------------------------------------------------------------


def hook_case(case: Obj) -> Obj:
    obj = case["object"]
    out: Obj = {
        "id": case["id"],
        "namespace": NAMESPACE,
        "operation": case.get("operation", "CREATE"),
        "subResource": case.get("subResource", ""),
        "resource": obj["kind"].lower() + "s",
        "object": obj,
        "oldObject": None,
    }
    if "old" in case:
        [old] = [d.data for d in iter_documents(case["old"], source=case["id"])]
        out["oldObject"] = old
    return out


@pytest.fixture(scope="module")
def admitted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Obj]]:
    base = tmp_path_factory.mktemp("redteam-hook")
    tls = base / "tls"
    run = subprocess.run(
        [sys.executable, "-m", "webhook", "certs", "--service", "gpu-admission",
         "--namespace", "gpu-admission-system", "--out", str(tls)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    vwc = write_webhook_config(run.stdout.strip(), base / "vwc.yaml")
    server = _serve(base, tls)
    try:
        cases = [hook_case(c) for c in CASES if not c.get("checkOnly")]
        yield run_cases(vwc, target=f"127.0.0.1:{server.port}", cases=cases,
                        extra=("--namespaces", NAMESPACE))  # fmt: skip
    finally:
        server.stop()


def _serve(base: Path, tls: Path) -> Any:
    from tests.e2e.test_apiserverhook_e2e import Serve

    (base / "serve").mkdir()
    server = Serve(base / "serve", tls)
    server.wait_ready(tls / "ca.crt")
    return server


@pytest.mark.parametrize(
    "case", [c for c in CASES if not c.get("checkOnly")], ids=lambda c: c["id"]
)
def test_the_apiserver(admitted: dict[str, Obj], case: Obj) -> None:
    answer = admitted[case["id"]]
    if case["expect"]:
        assert answer["allowed"] is False, f"{case['id']}: admitted: {answer}"
        assert DENIED in answer["message"], answer["message"]
        for rule in case["expect"]:
            assert f"[{rule}]" in answer["message"], answer["message"]
    else:
        assert answer["allowed"] is True, f"{case['id']}: a control was refused: {answer}"
    warnings = "\n".join(answer.get("warnings") or [])
    for rule in case.get("warn", []):
        assert f"[{rule}]" in warnings, f"{case['id']}: no warning for {rule}: {answer}"
    if not case["expect"] and not case.get("warn"):
        assert not warnings, f"{case['id']}: a control was warned about: {warnings}"
