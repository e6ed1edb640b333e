"""`gpu-admission diff` through the real CLI: before/after a policy change."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.auditobjects import GPU_LABELS, as_list, deployment_family, pod
from tests.support.clirun import gpu_admission
from tests.support.paths import ROOT

INVENTORY = str(ROOT / "examples" / "cluster" / "nodes.json")


def policies(tmp_path: Path, name: str, **replace: str) -> Path:
    """A copy of the shipped policies with text replaced in one file (or it removed)."""
    target = tmp_path / name
    shutil.copytree(ROOT / "policies", target, ignore=shutil.ignore_patterns("tests"))
    for file, change in replace.items():
        path = target / f"{file}.yaml"
        if change == "remove":
            path.unlink()
        else:
            old, new = change.split("=>")
            path.write_text(path.read_text().replace(old, new))
    return target


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "debug.yaml").write_text(yaml.safe_dump(pod("debug", privileged=True)))
    big = pod("big", gpus=1, labels={**GPU_LABELS, "gpu-admission.io/peak-memory": "90Gi"})
    (tmp_path / "k8s" / "big.yaml").write_text(yaml.safe_dump(big))
    dump = as_list(deployment_family("web", pods=2))
    (tmp_path / "dump.json").write_text(json.dumps(dump, indent=4))
    return tmp_path


def diff(base: Path, head: Path, *paths: Path, output: str = "json") -> tuple[int, str]:
    proc = gpu_admission(
        "diff", "--base-policies", str(base), "--policies", str(head),
        "--inventory", INVENTORY, "-o", output, *map(str, paths),
    )  # fmt: skip
    assert "Traceback" not in proc.stderr
    return proc.returncode, proc.stdout or proc.stderr


def test_warn_to_deny_makes_objects_become_denied(tmp_path: Path, corpus: Path) -> None:
    action = "enforcementAction: deny=>enforcementAction: warn"
    base = policies(tmp_path, "base", **{"gpu-device-injection": action})
    head = policies(tmp_path, "head")

    code, out = diff(base, head, corpus / "k8s", corpus / "dump.json")

    assert code == 1
    body = json.loads(out)
    (entry,) = body["becameDenied"]
    assert (entry["kind"], entry["name"], entry["before"], entry["after"]) == (
        "Pod", "debug", "warn", "deny",
    )  # fmt: skip
    assert entry["location"] == f"{corpus / 'k8s' / 'debug.yaml'}:1"
    assert [f["action"] for f in entry["removed"]] == ["warn"]
    assert [f["action"] for f in entry["added"]] == ["deny"]
    assert body["summary"] == {
        "objects": 6, "evaluated": 6, "becameDenied": 1, "becameAllowed": 0,
        "changed": 0, "unchanged": 5, "errors": 0,
    }  # fmt: skip


def test_removing_a_policy_makes_objects_become_allowed(tmp_path: Path, corpus: Path) -> None:
    base = policies(tmp_path, "base")
    head = policies(tmp_path, "head", **{"gpu-memory-fit": "remove"})

    code, out = diff(base, head, corpus / "k8s")

    assert code == 0
    body = json.loads(out)
    assert [(d["name"], d["before"], d["after"]) for d in body["becameAllowed"]] == [
        ("big", "deny", "allow")
    ]
    assert body["becameAllowed"][0]["removed"][0]["rule"] == "exceeds-device-memory"
    assert body["becameDenied"] == []


def test_a_new_message_is_a_change(tmp_path: Path, corpus: Path) -> None:
    prefix = (
        "  check: device-injection=>  messagePrefix: 'Platform rule: '\n  check: device-injection"
    )
    base = policies(tmp_path, "base")
    head = policies(tmp_path, "head", **{"gpu-device-injection": prefix})

    code, out = diff(base, head, corpus / "k8s", output="text")

    assert code == 0
    assert out.startswith("Findings changed (1):\n")
    assert "k8s/debug.yaml:1  Pod team-a/debug  (deny -> deny)" in out
    assert "    - DENY   gpu-device-injection/privileged\n" in out
    assert '             Platform rule: container "main" is privileged' in out
    assert out.rstrip().endswith(
        "2 objects, 2 judged: 0 became denied, 0 became allowed, 1 changed, 1 unchanged"
    )


def test_same_policies_no_differences(tmp_path: Path, corpus: Path) -> None:
    code, out = diff(ROOT / "policies", ROOT / "policies", corpus)

    assert code == 0
    assert json.loads(out)["summary"]["unchanged"] == 6


def test_input_errors_exit_2(tmp_path: Path, corpus: Path) -> None:
    (corpus / "broken.yaml").write_text("a: [1,\n")

    code, out = diff(ROOT / "policies", ROOT / "policies", corpus / "broken.yaml", corpus / "k8s")

    assert code == 2
    body = json.loads(out)
    (error,) = body["errors"]
    assert error.startswith(f"{corpus / 'broken.yaml'}:2: invalid YAML: ")
    assert body["summary"]["objects"] == 2


def test_broken_base_policies_exit_2(tmp_path: Path, corpus: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    (base / "p.yaml").write_text("kind: Nope\n")

    code, out = diff(base, ROOT / "policies", corpus)

    assert code == 2
    assert "policies did not load" in out
