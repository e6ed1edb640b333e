"""The pre-commit hook and the composite GitHub Action: their shell steps run for real."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import ROOT

BIN = str(Path(sys.executable).parent)
PRIVILEGED = (
    "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team-a}\n"
    "spec:\n  containers:\n    - name: c\n      securityContext: {privileged: true}\n"
)
CLEAN = "apiVersion: v1\nkind: Pod\nmetadata: {name: q}\nspec:\n  containers: [{name: c}]\n"


def action() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "action.yml").read_text())  # type: ignore[no-any-return]


def step(name: str) -> dict[str, Any]:
    return next(s for s in action()["runs"]["steps"] if s.get("name") == name)


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}  # fmt: skip
    out = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def run_step(name: str, repo: Path, env: dict[str, str]) -> dict[str, str]:
    """Run a `run:` step with bash as the runner does; returns what it wrote to GITHUB_OUTPUT."""
    output = repo.parent / "github-output"
    output.write_text("")
    full = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "GITHUB_OUTPUT": str(output),
            "ACTION_PATH": str(ROOT), **env}  # fmt: skip
    script = step(name)["run"]
    proc = subprocess.run(["bash", "-e", "-c", script], cwd=repo, env=full, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return dict(line.split("=", 1) for line in output.read_text().splitlines())


def pull_request(tmp_path: Path) -> tuple[Path, str]:
    """A clone whose HEAD changes two manifests and a README against the base commit."""
    origin, repo = tmp_path / "origin", tmp_path / "repo"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    (origin / "old.yaml").write_text(CLEAN)
    git(origin, "add", ".")
    git(origin, "commit", "-q", "-m", "base")
    base = git(origin, "rev-parse", "HEAD")
    git(tmp_path, "clone", "-q", str(origin), str(repo))
    (repo / "k8s").mkdir()
    (repo / "k8s" / "bad.yaml").write_text(PRIVILEGED)
    (repo / "k8s" / "ok.json").write_text(json.dumps(yaml.safe_load(CLEAN)))
    (repo / "README.md").write_text("docs\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "change")
    return repo, base


def test_action_checks_the_changed_manifests_and_writes_sarif(tmp_path: Path) -> None:
    repo, base = pull_request(tmp_path)
    files = tmp_path / "files"

    out = run_step("Manifests to check", repo, {"BASE_SHA": base, "PATHS": ".", "LIST": str(files)})
    assert out == {"count": "2"}
    assert files.read_text().split() == ["k8s/bad.yaml", "k8s/ok.json"]

    env = {"LIST": str(files), "POLICIES": "", "INVENTORY": "", "SARIF": "out.sarif"}
    out = run_step("gpu-admission check", repo, env)
    assert out == {"exit-code": "1"}
    sarif = json.loads((repo / "out.sarif").read_text())
    (result,) = sarif["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "k8s/bad.yaml"
    assert location["region"]["startLine"] == 7


def test_action_outside_a_pull_request_checks_the_given_paths(tmp_path: Path) -> None:
    repo, _ = pull_request(tmp_path)
    files = tmp_path / "files"

    out = run_step("Manifests to check", repo, {"BASE_SHA": "", "PATHS": "k8s old.yaml",
                                                 "LIST": str(files)})  # fmt: skip

    assert out == {"count": "2"}
    assert files.read_text().split() == ["k8s", "old.yaml"]


def test_action_shape() -> None:
    spec = action()
    assert set(spec["inputs"]) >= {"paths", "policies", "inventory", "python-version"}
    assert spec["runs"]["using"] == "composite"
    uses = [s.get("uses", "") for s in spec["runs"]["steps"]]
    assert any(u.startswith("github/codeql-action/upload-sarif@") for u in uses)
    assert any(u.startswith("actions/setup-python@") for u in uses)
    for s in spec["runs"]["steps"]:  # inputs reach scripts through env, never spliced in
        assert "${{" not in s.get("run", "")


def test_pre_commit_hook() -> None:
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "gpu-admission-check"
    assert hook["entry"] == "gpu-admission check"
    assert hook["language"] == "python"
    pattern = re.compile(hook["files"])
    matched = [f for f in ("a.yaml", "b.yml", "c.json", "d.txt", "yaml.md") if pattern.search(f)]
    assert matched == ["a.yaml", "b.yml", "c.json"]
