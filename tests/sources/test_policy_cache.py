"""The policy cache (webhook.sources.policy_cache): the same policy set, or a miss.

In process, against the uncached loader: the shipped policies and the examples' cluster
judged alike from a fresh load and from the entry it left; an edited policy, a changed
flag, a broken, foreign or loosely permitted entry is a miss (validated again), never
a stale or planted set; a failed load is never kept. One CLI run shows the user's view:
an edit to a policy file changes the next `check` at once.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.builders import EXAMPLES, ROOT
from webhook.core.engine.evaluation import evaluate
from webhook.core.engine.policy import PolicySet
from webhook.core.engine.subject import subject_of
from webhook.errors import PolicyError
from webhook.sources import policy_cache
from webhook.sources.files import SourceObject, expand_paths, iter_objects, read_inventory
from webhook.sources.policy_files import files_digest, load_policy_dir, policy_files, read_files

MANIFESTS = EXAMPLES / "manifests"
NODES = EXAMPLES / "cluster" / "nodes.json"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv(policy_cache.ENV, str(where))
    return where


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    copy = tmp_path / "policies"
    shutil.copytree(ROOT / "policies", copy)
    return copy


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.pickle"))


def decisions(policy_set: PolicySet) -> list[tuple[object, ...]]:
    inventory = read_inventory(str(NODES))
    out = []
    for name in expand_paths([str(MANIFESTS)]):
        for item in iter_objects(name, Path(name).read_bytes()):
            if isinstance(item, SourceObject):
                d = evaluate(policy_set, subject_of(item.obj), inventory)
                out.append((name, item.path, d.findings, d.skipped, d.error))
    return out


def entry_of(directory: Path, cluster_profile: str | None = None) -> Path:
    digest = files_digest(read_files(policy_files(directory), directory))
    return Path(os.environ[policy_cache.ENV]) / (
        policy_cache.entry_key(digest, cluster_profile) + ".pickle"
    )


def test_a_cached_set_judges_as_a_fresh_one(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = load_policy_dir(ROOT / "policies")
    policy_cache.load_policy_dir_cached(ROOT / "policies")
    assert len(entries(cache)) == 1

    def validated(*args: object, **kwargs: object) -> PolicySet:
        raise AssertionError("validated again: the entry was not read")

    monkeypatch.setattr(policy_cache, "load_policy_files", validated)
    again = policy_cache.load_policy_dir_cached(ROOT / "policies")  # read from the entry
    assert again.digest == fresh.digest
    assert [(p.name, p.action, p.match, p.params) for p in again.policies] == [
        (p.name, p.action, p.match, p.params) for p in fresh.policies
    ]
    expected = decisions(fresh)
    assert any(f for _, _, f, _, _ in expected)  # the examples find something
    assert decisions(again) == expected


def test_the_entry_is_private(cache: Path) -> None:
    policy_cache.load_policy_dir_cached(ROOT / "policies")
    (entry,) = entries(cache)
    assert entry.stat().st_mode & 0o777 == 0o600
    assert cache.stat().st_mode & 0o777 == 0o700


def test_an_edited_policy_or_another_flag_is_a_miss(cache: Path, policies: Path) -> None:
    before = policy_cache.load_policy_dir_cached(policies)
    target = policies / "gpu-device-injection.yaml"
    assert target.exists(), sorted(p.name for p in policies.iterdir())
    text = target.read_text()
    assert "enforcementAction: deny" in text
    target.write_text(text.replace("enforcementAction: deny", "enforcementAction: warn", 1))
    after = policy_cache.load_policy_dir_cached(policies)
    assert after.digest != before.digest
    assert {p.name: p.action for p in after.policies}["gpu-device-injection"] == "warn"
    eks = policy_cache.load_policy_dir_cached(policies, cluster_profile="eks")
    assert eks.profile.name == "eks" and len(entries(cache)) == 3


def test_a_planted_entry_is_read_only_when_private(cache: Path, policies: Path) -> None:
    """An entry written by someone else (group-writable here) is not unpickled: the
    set is validated from the files again. The same entry, private, is read: what kept
    it out was the permission check."""
    real = policy_cache.load_policy_dir_cached(policies)
    planted = tmp_set(policies.parent / "other")
    entry = entry_of(policies)
    entry.write_bytes(pickle.dumps(planted))
    entry.chmod(0o664)
    assert policy_cache.load_policy_dir_cached(policies).digest == real.digest
    entry.write_bytes(pickle.dumps(planted))  # the miss above wrote the real set back
    entry.chmod(0o600)
    assert policy_cache.load_policy_dir_cached(policies).digest == planted.digest


def tmp_set(directory: Path) -> PolicySet:
    shutil.copytree(ROOT / "policies", directory)
    target = directory / "gpu-device-injection.yaml"
    target.write_text(
        target.read_text().replace("enforcementAction: deny", "enforcementAction: warn", 1)
    )
    return load_policy_dir(directory)


@pytest.mark.parametrize("content", [b"", b"not a pickle", pickle.dumps({"a": 1})])
def test_a_broken_entry_is_a_miss(cache: Path, content: bytes) -> None:
    fresh = policy_cache.load_policy_dir_cached(ROOT / "policies")
    (entry,) = entries(cache)
    entry.write_bytes(content)
    again = policy_cache.load_policy_dir_cached(ROOT / "policies")
    assert again.digest == fresh.digest
    assert isinstance(pickle.loads(entry.read_bytes()), PolicySet)  # written again


def test_a_failed_load_is_not_kept(cache: Path, policies: Path) -> None:
    (policies / "broken.yaml").write_text(
        "apiVersion: gpu-admission.io/v1alpha1\nkind: GPUPolicy\n"
    )
    for _ in range(2):  # reported every time
        with pytest.raises(PolicyError, match=r"broken\.yaml"):
            policy_cache.load_policy_dir_cached(policies)
    assert entries(cache) == []


def test_turned_off_or_unwritable_it_only_validates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(policy_cache.ENV, "")
    assert policy_cache.cache_dir() is None
    assert policy_cache.load_policy_dir_cached(ROOT / "policies").policies
    blocked = tmp_path / "file"
    blocked.write_text("a file where the directory would be")
    monkeypatch.setenv(policy_cache.ENV, str(blocked / "cache"))
    assert policy_cache.load_policy_dir_cached(ROOT / "policies").policies


def test_the_default_directory_follows_xdg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(policy_cache.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere")
    assert policy_cache.cache_dir() == Path("/somewhere/gpu-admission")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", "/home/u")
    assert policy_cache.cache_dir() == Path("/home/u/.cache/gpu-admission")


def test_entries_are_bounded(cache: Path, policies: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policy_cache, "MAX_ENTRIES", 2)
    target = policies / "gpu-device-injection.yaml"
    text = target.read_text()
    for i in range(4):
        target.write_text(text + f"# edit {i}\n")
        policy_cache.load_policy_dir_cached(policies)
    assert len(entries(cache)) == 2


def test_an_edit_changes_the_next_check(tmp_path: Path, policies: Path) -> None:
    """The CLI, twice on one cache: deny (exit 1), then, the policy set to warn, no
    deny (exit 0) from the very next run."""
    env = {**os.environ, policy_cache.ENV: str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "webhook", "check", "--policies", str(policies)]
    cmd += ["--inventory", str(NODES), "-o", "json", str(MANIFESTS)]
    runs = [subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT) for _ in "ab"]
    assert [r.returncode for r in runs] == [1, 1] and runs[0].stdout == runs[1].stdout
    for f in policies.glob("*.yaml"):
        f.write_text(f.read_text().replace("enforcementAction: deny", "enforcementAction: warn"))
    edited = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    assert edited.returncode == 0, edited.stdout + edited.stderr


def test_an_edit_to_the_code_is_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key covers the modules that build and read a set (here a stand-in package
    of one module): a newer mtime or another size is another key."""
    package = tmp_path / "webhook"
    package.mkdir()
    module = package / "engine.py"
    module.write_text("X = 1\n")
    monkeypatch.setattr(policy_cache, "_PACKAGE", package)
    files = files_digest(read_files(policy_files(ROOT / "policies"), ROOT / "policies"))
    before = policy_cache.entry_key(files, None)
    assert policy_cache.entry_key(files, None) == before
    os.utime(module, ns=(1, 1))
    touched = policy_cache.entry_key(files, None)
    module.write_text("X = 12\n")
    os.utime(module, ns=(1, 1))
    assert len({before, touched, policy_cache.entry_key(files, None)}) == 3
    assert policy_cache.entry_key(files, "eks") != policy_cache.entry_key(files, None)
