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


# go-yaml's own test documents, which it reads unlike PyYAML on purpose (merge order):
# tests/sources/test_kubeyaml.py pins them.
KUBE_ONLY = ROOT / "tests/data/yaml"


def test_direct_build_is_pyyaml_where_kubernetes_reads_yaml_alike() -> None:
    """On every YAML file of the repository but go-yaml's own test documents, the direct
    build (kubectl's reading, webhook.sources.kubeyaml) is what PyYAML reads: the shipped
    and test material uses no YAML 1.1 form where the two differ."""
    files = [f for f in yaml_files() if KUBE_ONLY not in f.parents]
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
    ("text", "expected"),
    [
        ("a: &x {b: 1}\nc: *x\n", {"a": {"b": 1}, "c": {"b": 1}}),  # anchors
        ("base: &b {x: 1}\nm:\n  <<: *b\n  z: 2\n", {"base": {"x": 1}, "m": {"x": 1, "z": 2}}),
        ("=: 1\n", {"=": 1}),  # value key: a plain string to go-yaml
        ("s: !!set {a, b}\n", {"s": {"a": None, "b": None}}),  # a set is a map of nulls
        ("y: 1\n1: x\n", {"true": 1, "1": "x"}),  # keys become strings, as JSON's
        ("t: 2001-12-14t21:59:43.10-05:00\nb: !!binary aGk=\no: 0o17\nn: ~\n",
         {"t": "2001-12-14t21:59:43.10-05:00", "b": "hi", "o": 15, "false": None}),
    ],
    ids=["anchor", "merge", "value-key", "set", "keys", "scalars"],
)  # fmt: skip
def test_direct_build_reads_what_kubectl_reads(text: str, expected: Any) -> None:
    (doc,) = iter_documents(text.encode(), source="t.yaml")
    assert typed(doc.data) == typed(expected)


@pytest.mark.parametrize(
    ("text", "problem"),
    [("? [a, b]\n: c\n", "cannot be a key"), ("f: .inf\n", "no JSON form")],
    ids=["complex-key", "infinity"],
)
def test_what_kubectl_refuses_is_an_input_error(text: str, problem: str) -> None:
    with pytest.raises(Exception, match=problem):
        list(iter_documents(text.encode(), source="t.yaml"))


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
