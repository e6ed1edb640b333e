"""Files a tenant writes are read in bounded time or refused with their file and line.

YAML aliases ("billion laughs"), nesting past bounds.MAX_DEPTH, recursive aliases and
scalars Python cannot hold: in manifests, dumps, policies and inventories, through the
readers and through the real CLI (exit 2, the file:line on stderr, in milliseconds).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.clirun import gpu_admission
from tests.support.paths import ROOT
from webhook.errors import ManifestError
from webhook.sources.dumps import read_dump
from webhook.sources.yamlsource import ALIAS_BUDGET, iter_documents


def laughs(levels: int = 9, *, key: str = "labels") -> str:
    """A Pod whose `key` holds 10**levels strings through 700 bytes of aliases."""
    rows = ['    l0: &l0 ["x","x","x","x","x","x","x","x","x","x"]']
    for i in range(1, levels):
        rows.append(f"    l{i}: &l{i} [{','.join([f'*l{i - 1}'] * 10)}]")
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\n"
        f"  {key}:\n" + "\n".join(rows) + "\nspec:\n  containers: [{name: c, image: i}]\n"
    )


def merge_laughs(levels: int = 9) -> str:
    """The same through merge keys, which PyYAML copies for real while it builds."""
    rows = ["m0: &m0 {" + ", ".join(f"k{i}: {i}" for i in range(10)) + "}"]
    for i in range(1, levels):
        rows.append(f"m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * 10)}]}}")
    return "\n".join(rows) + "\n"


def nested(depth: int) -> str:
    return "a: " + "[" * depth + "]" * depth + "\n"


def block(depth: int) -> str:
    return "".join(" " * i + "a:\n" for i in range(depth)) + " " * depth + "b\n"


BUDGET = f"{ALIAS_BUDGET:,}"
TOO_MANY_ALIASES = (
    f"YAML aliases expand this stream past {BUDGET} nodes and characters "
    '(a "billion laughs" document?): write the values out, or alias less'
)
CASES = [
    ("laughs", laughs(), f"f.yaml:11: {TOO_MANY_ALIASES}"),
    ("merge laughs", merge_laughs(), f"f.yaml:6: {TOO_MANY_ALIASES}"),
    ("nested 200", nested(200), "f.yaml:1: nested deeper than 200 levels"),
    ("nested 10,000", nested(10_000), "f.yaml:1: invalid YAML: exceeded maximum nesting depth"),
    ("block 300", block(300), "f.yaml:201: nested deeper than 200 levels"),
    ("compact sequences", "- " * 250 + "x\n", "f.yaml:1: nested deeper than 200 levels"),
    (
        "aliases past the depth",
        "a: &a " + "[" * 150 + "]" * 150 + "\nb: " + "[" * 100 + "*a" + "]" * 100 + "\n",
        "f.yaml:2: nested deeper than 200 levels (aliases expanded)",
    ),
    (
        "recursive alias",
        "a: &a [1, *a]\n",
        "f.yaml:1: a YAML alias refers to a node that contains it",
    ),
    # What sigs.k8s.io/yaml cannot turn into JSON (docs/yaml.md); a 5000-digit integer
    # and 2001-02-30 are strings to go-yaml v2, so they are no longer errors.
    (
        "not a JSON number",
        "a: 1\nb: .nan\n",
        "f.yaml:2: kubectl and the apiserver refuse this: `.nan` has no JSON form "
        "(encoding/json refuses it)",
    ),
    (
        "a null key",
        "a: 1\n~: x\n",
        "f.yaml:2: kubectl and the apiserver refuse this: a null key cannot be a JSON object key",
    ),
]


@pytest.mark.parametrize(("name", "text", "error"), CASES, ids=[c[0] for c in CASES])
def test_documents_are_refused_with_their_line(name: str, text: str, error: str) -> None:
    started = time.thread_time()
    with pytest.raises(ManifestError) as raised:
        list(iter_documents(text, source="f.yaml"))
    assert time.thread_time() - started < 0.5
    assert str(raised.value).split("\n")[0] == error


@pytest.mark.parametrize(("name", "text", "error"), CASES, ids=[c[0] for c in CASES])
def test_dumps_are_refused_with_their_line(
    tmp_path: Path, name: str, text: str, error: str
) -> None:
    path = tmp_path / "f.yaml"
    path.write_text(text)
    started = time.thread_time()
    with pytest.raises(ManifestError) as raised:
        list(read_dump(str(path)))
    assert time.thread_time() - started < 0.5
    first = str(raised.value).split("\n")[0]
    # The streaming reader composes in Python, and says where it stopped in its own words.
    stream_error = error.replace("f.yaml", str(path))
    if name in ("block 300", "compact sequences"):
        stream_error = stream_error.replace(":201:", ":202:").replace(
            "nested deeper", "invalid YAML: nested deeper"
        )
    assert first == stream_error


@pytest.mark.parametrize("encode", [False, True], ids=["str", "utf-8 bytes"])
def test_non_ascii_text_is_measured_too(encode: bool) -> None:
    text = "# é\n" + nested(201)
    with pytest.raises(ManifestError, match=r"^f\.yaml:2: nested deeper than 200 levels$"):
        list(iter_documents(text.encode() if encode else text, source="f.yaml"))


def test_aliases_within_the_budget_read_as_usual() -> None:
    text = "a: &a {x: 1}\nb: *a\nc: {<<: *a, z: 2}\n---\n" + laughs(5)
    first, pod = (d.data for d in iter_documents(text, source="f.yaml"))
    assert first == {"a": {"x": 1}, "b": {"x": 1}, "c": {"x": 1, "z": 2}}
    assert len(pod["metadata"]["labels"]["l4"]) == 10  # 10**5 strings, within the budget


def test_a_list_dump_counts_aliases_across_its_items(tmp_path: Path) -> None:
    rows = [
        "kind: List",
        "items:",
        '- &i0 {kind: Pod, a: ["x","x","x","x","x","x","x","x","x","x"]}',
    ]
    rows += [f"- &i{n} {{kind: Pod, a: [{', '.join([f'*i{n - 1}'] * 10)}]}}" for n in range(1, 9)]
    path = tmp_path / "list.yaml"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(ManifestError, match=rf"^{path}:8: YAML aliases expand this stream"):
        list(read_dump(str(path)))


DEEP_JSON = [
    ("one line", '{"a": ' + "[" * 300 + "]" * 300 + "}\n", 1),
    ("pretty", '{\n  "a": ' + "[" * 300 + "]" * 300 + "\n}\n", 2),
    ("list item", '{"kind": "List",\n "items": [\n{},\n' + "[" * 5000 + "]" * 5000 + "\n]}", 4),
    ("scanned", '{"kind":"List","items":[' + "[" * 5000 + "]" * 5000 + "]} ", 1),
]


@pytest.mark.parametrize(("name", "text", "line"), DEEP_JSON, ids=[c[0] for c in DEEP_JSON])
def test_deep_json_dumps_are_refused_with_their_line(
    tmp_path: Path, name: str, text: str, line: int
) -> None:
    path = tmp_path / "d.json"
    path.write_text(text)
    with pytest.raises(ManifestError) as raised:
        list(read_dump(str(path)))
    assert str(raised.value) == f"{path}:{line}: invalid JSON: nested deeper than 200 levels"


def test_json_integers_past_the_digit_limit_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text('{"kind":"List","items":[{"a": 1' + "0" * 5000 + "}]} ")
    with pytest.raises(ManifestError, match=rf"^{path}:1: invalid JSON: Exceeds the limit \(4300"):
        list(read_dump(str(path)))


def test_check_refuses_a_bomb_with_exit_2_in_milliseconds(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(laughs())
    deep = tmp_path / "deep.yaml"
    deep.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  labels:\n    a: " + "[" * 900 + "]" * 900
    )
    started = time.perf_counter()
    proc = gpu_admission("check", str(bomb), str(deep))
    assert time.perf_counter() - started < 10  # the interpreter's start; the bomb hung for minutes
    assert proc.returncode == 2
    assert f"error: {bomb}:11: {TOO_MANY_ALIASES}\n" in proc.stdout
    assert f"error: {deep}:5: nested deeper than 200 levels\n" in proc.stdout
    assert "2 errors" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_policies_and_inventories_are_bounded_too(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "bomb.yaml").write_text(merge_laughs())
    inventory = tmp_path / "nodes.yaml"
    inventory.write_text("kind: List\nitems: " + "[" * 300 + "]" * 300 + "\n")
    pod = str(ROOT / "examples/manifests")

    bad_policies = gpu_admission("check", pod, "--policies", str(policies))
    bad_inventory = gpu_admission("check", pod, "--inventory", str(inventory))

    assert (bad_policies.returncode, bad_inventory.returncode) == (2, 2)
    assert f"{policies}/bomb.yaml:6: {TOO_MANY_ALIASES}" in bad_policies.stderr
    assert f"{inventory}:2: nested deeper than 200 levels" in bad_inventory.stderr
    assert "Traceback" not in bad_policies.stderr + bad_inventory.stderr


def test_too_many_pod_templates_is_an_input_error_in_every_shell(tmp_path: Path) -> None:
    """The object cannot be judged as it is: check, audit, diff and test say so with the
    same words and exit 2 (the webhook answers 400: test_serve_hostile.py)."""
    specs = {f"r{i}": {"template": {"spec": {"containers": [{"name": "c"}]}}} for i in range(1001)}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "big", "namespace": "ml"},
        "spec": {"pytorchReplicaSpecs": specs},
    }
    path = tmp_path / "job.yaml"
    path.write_text("# a comment\n" + json.dumps({"kind": "List", "items": [job]}, indent=1))
    why = (
        "PyTorchJob ml/big not judged: spec.pytorchReplicaSpecs: more than 1000 entries match "
        "the pod template path spec.pytorchReplicaSpecs.*.template: too many pod templates to "
        "judge"
    )
    suite = tmp_path / "suite.yaml"
    case = {"name": "big job", "object": job, "expect": {"outcome": "allow"}}
    doc = {"apiVersion": "gpu-admission.io/v1alpha1", "kind": "PolicyTest",
           "metadata": {"name": "bounds"}, "spec": {"cases": [case]}}  # fmt: skip
    suite.write_text(json.dumps(doc))
    policies = str(ROOT / "policies")

    check = gpu_admission("check", str(path))
    audit = gpu_admission("audit", "--from", str(path))
    diff = gpu_admission("diff", "--base-policies", policies, "--policies", policies, str(path))
    test = gpu_admission("test", str(suite))

    codes = {p: r.returncode for p, r in (("check", check), ("audit", audit), ("diff", diff),
                                          ("test", test))}  # fmt: skip
    assert codes == {"check": 2, "audit": 2, "diff": 2, "test": 2}, diff.stdout + test.stdout
    assert f"error: {path}:5: {why}\n" in check.stdout
    assert f"error: {path}:5: {why}\n" in audit.stdout + audit.stderr
    assert f"{why} (under the base policies)" in diff.stdout + diff.stderr
    assert f"ERROR  big job\n        {why}\n" in test.stdout
    assert "Traceback" not in "".join(r.stderr for r in (check, audit, diff, test))
