"""Every YAML input of the CLI read as kubectl reads it (YAML 1.1 as go-yaml v2; docs/yaml.md).

`privileged: y` is `true` to kubectl and the apiserver (sigs.k8s.io/yaml over go-yaml v2
resolve.go); a pull request's review must deny it as admission would. The manifests,
policy files, PolicyTest suites, inventory files and `diff`'s dumps all go through the
same reading.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.clirun import gpu_admission
from tests.support.paths import ROOT
from webhook.sources.files import read_inventory

INVENTORY = str(ROOT / "examples" / "cluster" / "nodes.json")

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: team-a
spec:
  containers:
    - name: main
      image: busybox
      securityContext:
        privileged: {value}
"""

# (how privileged is written, whether kubectl reads it as true)
SPELLINGS = [
    ("y", True),
    ("Y", True),
    ("yes", True),
    ("on", True),
    ("ON", True),
    ("true", True),
    ("n", False),
    ("off", False),
    ('"y"', False),  # a string: the apiserver refuses it, it grants nothing
    ("yES", False),  # not one of go-yaml's spellings: a string
]


def test_check_denies_privileged_written_as_kubectl_reads_true(tmp_path: Path) -> None:
    for i, (value, _) in enumerate(SPELLINGS):
        (tmp_path / f"p{i:02d}.yaml").write_text(POD.format(name=f"p{i:02d}", value=value))

    proc = gpu_admission("check", "--inventory", INVENTORY, "-o", "json", str(tmp_path))

    assert "Traceback" not in proc.stderr
    assert proc.returncode == 1, proc.stderr
    denied = {
        (Path(r["file"]).name, r["line"])
        for r in json.loads(proc.stdout)["results"]
        if (r["policy"], r["rule"], r["action"]) == ("gpu-device-injection", "privileged", "deny")
    }
    want = {(f"p{i:02d}.yaml", 11) for i, (_, true) in enumerate(SPELLINGS) if true}
    assert denied == want


def test_a_policy_file_reads_the_same_way(tmp_path: Path) -> None:
    """An unquoted `no` in a list of namespaces is false to kubectl: refused, with its
    field, as a GPUPolicy object would be by the apiserver."""
    policies = tmp_path / "policies"
    shutil.copytree(ROOT / "policies", policies, ignore=shutil.ignore_patterns("tests"))
    path = policies / "gpu-device-injection.yaml"
    path.write_text(
        path.read_text().replace("excludedNamespaces: [kube-system,", "excludedNamespaces: [no,")
    )
    (tmp_path / "p.yaml").write_text(POD.format(name="p", value="y"))

    proc = gpu_admission("check", "--policies", str(policies), str(tmp_path / "p.yaml"))

    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2
    assert "match.excludedNamespaces.0" in proc.stderr
    assert "(got False)" in proc.stderr


def test_a_policy_test_suite_reads_the_same_way(tmp_path: Path) -> None:
    suite = f"""\
apiVersion: gpu-admission.io/v1alpha1
kind: PolicyTest
metadata: {{name: yaml11}}
spec:
  policies: {ROOT / "policies"}
  cases:
    - name: privileged written y
      object:
        apiVersion: v1
        kind: Pod
        metadata: {{name: p, namespace: team-a}}
        spec: {{containers: [{{name: main, securityContext: {{privileged: y}}}}]}}
      expect: {{outcome: deny, rules: [gpu-device-injection/privileged]}}
"""
    (tmp_path / "suite.yaml").write_text(suite)

    proc = gpu_admission("test", str(tmp_path / "suite.yaml"))

    assert "Traceback" not in proc.stderr
    assert proc.returncode == 0, proc.stdout
    assert "PASS  privileged written y" in proc.stdout


def test_diff_reads_dumps_the_same_way(tmp_path: Path) -> None:
    base = tmp_path / "base"
    shutil.copytree(ROOT / "policies", base, ignore=shutil.ignore_patterns("tests"))
    path = base / "gpu-device-injection.yaml"
    path.write_text(path.read_text().replace("denyPrivileged: true", "denyPrivileged: false"))
    (tmp_path / "p.yaml").write_text(POD.format(name="p", value="on"))

    proc = gpu_admission(
        "diff", "--base-policies", str(base), "--policies", str(ROOT / "policies"),
        "--inventory", INVENTORY, "-o", "json", str(tmp_path / "p.yaml"),
    )  # fmt: skip

    assert "Traceback" not in proc.stderr
    assert proc.returncode == 1, proc.stderr
    (entry,) = json.loads(proc.stdout)["becameDenied"]
    assert entry["name"] == "p"


@pytest.mark.parametrize(("count", "want"), [("0o4", 4), ("0x4", 4), ("4.0", 4), ("'4'", 4)])
def test_an_inventory_file_reads_the_same_way(tmp_path: Path, count: str, want: int) -> None:
    nodes = f"""\
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Node
    metadata: {{name: n1, labels: {{nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}}}}
    status: {{allocatable: {{cpu: "8", nvidia.com/gpu: {count}}}}}
"""
    (tmp_path / "nodes.yaml").write_text(nodes)

    inventory = read_inventory(str(tmp_path / "nodes.yaml"))

    assert [o.count for o in inventory.offers["nvidia.com/gpu"]] == [want]


DUPLICATED = """\
apiVersion: v1
kind: Pod
metadata: {name: twice}
spec:
  containers:
    - name: main
      image: busybox
      resources:
        limits: {nvidia.com/gpu: 1}
      resources:
        limits: {nvidia.com/gpux: 1}
      securityContext:
        privileged: false
        privileged: true
"""


def test_check_names_both_lines_of_a_repeated_key_and_judges_the_last(tmp_path: Path) -> None:
    (tmp_path / "twice.yaml").write_text(DUPLICATED)

    proc = gpu_admission("check", "-o", "json", str(tmp_path / "twice.yaml"))

    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2, proc.stderr  # an input error, as kustomize would refuse it
    out = json.loads(proc.stdout)
    where = str(tmp_path / "twice.yaml")
    assert [e.split(": kubectl")[0] for e in out["errors"]] == [
        f'{where}:10: key "resources" appears twice in one mapping ({where}:8 and {where}:10)',
        f'{where}:14: key "privileged" appears twice in one mapping ({where}:13 and {where}:14)',
    ]
    found = {(r["rule"], r["line"]) for r in out["results"]}
    assert found == {("unknown-resource", 11), ("privileged", 14)}  # the blocks kubectl reads
