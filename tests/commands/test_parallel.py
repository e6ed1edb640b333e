"""Speed without a different answer: the parallel `check` and the direct YAML build give
what the single process and PyYAML's own constructor give, on every corpus we have."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.builders import EXAMPLES, POLICIES, ROOT
from tests.support.clirun import gpu_admission
from tests.support.paths import SHARED
from webhook.commands.check import check_paths
from webhook.commands.parallel import MIN_FILES, check_files
from webhook.reports.check import render_json
from webhook.sources.files import read_inventory
from webhook.sources.policy_files import load_policy_dir
from webhook.sources.yamlsource import iter_documents

CORPUS = SHARED / "corpus" / "public"
NODES = str(EXAMPLES / "cluster" / "nodes.json")
CORPORA = [p for p in (ROOT / "tests", EXAMPLES, POLICIES, CORPUS) if p.is_dir()]


def yaml_files() -> list[Path]:
    return sorted(f for d in CORPORA for f in d.rglob("*") if f.suffix in (".yaml", ".yml"))


def typed(value: Any) -> Any:
    """A value with every scalar's type kept: 1, 1.0 and True differ."""
    if isinstance(value, dict):
        return ("dict", [(typed(k), typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    return (type(value).__name__, repr(value))


def test_direct_build_is_pyyaml_on_every_yaml_file() -> None:
    files = yaml_files()
    assert len(files) > 100  # the tests' own fixtures at least
    compared = 0
    for f in files:
        data = f.read_bytes()
        try:
            expected = [d for d in yaml.load_all(data, Loader=yaml.CSafeLoader) if d is not None]
        except yaml.YAMLError:
            continue  # invalid on purpose: test_yamlsource pins those errors
        try:
            got = [d.data for d in iter_documents(data, source=str(f))]
        except Exception as exc:  # bounds (depth, aliases) refuse a few hostile files
            assert "nested deeper" in str(exc) or "aliases" in str(exc), f
            continue
        assert typed(got) == typed(expected), f
        compared += 1
    assert compared > 100


@pytest.mark.parametrize(
    "text",
    [
        "a: &x {b: 1}\nc: *x\n",  # anchors: PyYAML shares the object
        "base: &b {x: 1}\nm:\n  <<: *b\n  y: 2\n",  # merge key
        "=: 1\n",  # value key
        "s: !!set {a, b}\n",
        "? [a, b]\n: c\n",  # complex key
        "t: 2001-12-14t21:59:43.10-05:00\nb: !!binary aGk=\nf: .inf\nn: ~\no: 0o17\ny: yes\n",
    ],
    ids=["anchor", "merge", "value-key", "set", "complex-key", "scalars"],
)
def test_direct_build_leaves_the_unusual_to_pyyaml(text: str) -> None:
    try:
        expected = yaml.load(text, Loader=yaml.CSafeLoader)
    except yaml.YAMLError as exc:
        with pytest.raises(Exception, match="invalid YAML") as raised:
            list(iter_documents(text.encode(), source="t.yaml"))
        assert str(getattr(exc, "problem", exc)) in str(raised.value)
        return
    (doc,) = iter_documents(text.encode(), source="t.yaml")
    assert typed(doc.data) == typed(expected)


@pytest.fixture(scope="module")
def judged() -> tuple[Any, Any]:
    return load_policy_dir(POLICIES), read_inventory(NODES)


def test_parallel_check_is_the_single_process_check_on_every_corpus(
    tmp_path: Path, judged: tuple[Any, Any]
) -> None:
    policy_set, inventory = judged
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: Pod\nspec: [unclosed\n")
    paths = [str(p) for p in CORPORA]
    paths.insert(1, str(broken))
    single = check_paths(paths, policy_set=policy_set, inventory=inventory)
    split = check_files(paths, policy_set=policy_set, inventory=inventory, workers=2, min_files=1)
    assert single.results and single.errors  # findings and broken files both
    assert render_json(split) == render_json(single)
    assert split.exit_code == single.exit_code == 2


def test_parallel_cli_prints_what_one_process_finds(
    tmp_path: Path, judged: tuple[Any, Any]
) -> None:
    """Past MIN_FILES the command forks workers: same JSON, same exit code."""
    sources = sorted((EXAMPLES / "manifests").rglob("*.yaml"))
    for i in range(MIN_FILES + 50):
        shutil.copy(sources[i % len(sources)], tmp_path / f"m{i:04d}.yaml")
    (tmp_path / "m0100.yaml").write_text("kind: [unclosed\n")  # an input error in the middle
    policy_set, inventory = judged
    single = check_paths([str(tmp_path)], policy_set=policy_set, inventory=inventory)
    proc = gpu_admission("check", "-o", "json", "--inventory", NODES, str(tmp_path))
    assert proc.returncode == single.exit_code == 2, proc.stderr
    assert json.loads(proc.stdout) == json.loads(render_json(single))
    (tmp_path / "m0100.yaml").unlink()
    single = check_paths([str(tmp_path)], policy_set=policy_set, inventory=inventory)
    proc = gpu_admission("check", "-o", "json", "--inventory", NODES, str(tmp_path))
    assert proc.returncode == single.exit_code == 1
    assert json.loads(proc.stdout) == json.loads(render_json(single))


def test_a_claim_template_resolves_across_the_parts_of_a_parallel_check(tmp_path: Path) -> None:
    # The Pod names a ResourceClaimTemplate that only another file (another part) holds.
    cluster = yaml.safe_load((ROOT / "examples/dra/cluster.yaml").read_text())
    (template,) = [o for o in cluster["items"] if o["kind"] == "ResourceClaimTemplate"]
    cluster["items"].remove(template)
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    inventory = read_inventory(str(tmp_path / "cluster.yaml"))
    policy_set = load_policy_dir(POLICIES)
    pod = tmp_path / "a-pod.yaml"
    shutil.copy(ROOT / "examples/dra/good/pod-with-template.yaml", pod)
    (tmp_path / "z-template.yaml").write_text(yaml.safe_dump(template))
    alone = check_paths([str(pod)], policy_set=policy_set, inventory=inventory)
    assert [r.finding.rule for r in alone.results] == ["missing-claim-source"]
    paths = [str(pod), str(tmp_path / "z-template.yaml")]
    single = check_paths(paths, policy_set=policy_set, inventory=inventory)
    split = check_files(paths, policy_set=policy_set, inventory=inventory, workers=2, min_files=1)
    assert not single.results
    assert render_json(split) == render_json(single)
