"""`gpu-admission check` as a real subprocess: outputs, exit codes, lines, stdin, errors.

Every command of this module starts at once (see `runs`): each one pays the interpreter
start-up, and running them side by side keeps the module fast.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.builders import EXAMPLES, POLICIES, ROOT
from webhook.checks import registry

MANIFESTS = EXAMPLES / "manifests"
NODES = EXAMPLES / "cluster" / "nodes.json"
EXAMPLE_FILES = sorted(MANIFESTS.rglob("*.yaml"))
RESULT_FIELDS = [
    "file",
    "line",
    "apiVersion",
    "kind",
    "namespace",
    "name",
    "policy",
    "rule",
    "action",
    "message",
]

BROKEN = """\
apiVersion: v1
kind: Pod
metadata:
  name: half-written
spec:
  containers:
    - name: a
      image: [busybox
    - name: b
"""

STDIN_LIST = """\
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata: {name: clean, namespace: ml}
    spec:
      containers: [{name: web, image: nginx}]
  - apiVersion: v1
    kind: Pod
    metadata: {name: sneaky, namespace: ml}
    spec:
      containers:
        - name: app
          image: cuda
          env:
            - name: NVIDIA_VISIBLE_DEVICES
              value: all
---
not: a kubernetes object
---
apiVersion: v1
kind: Service
metadata: {name: svc}
"""
# Line of `- name: NVIDIA_VISIBLE_DEVICES` in STDIN_LIST.
STDIN_ENV_LINE = 17


def prepare(tmp: Path) -> dict[str, tuple[list[str], str | None]]:
    """Files the commands need, and the commands: name -> (arguments, stdin)."""
    mixed = tmp / "mixed"
    mixed.mkdir()
    shutil.copy(MANIFESTS / "good" / "pod-inference-h100.yaml", mixed / "a-good.yaml")
    (mixed / "b-broken.yaml").write_text(BROKEN)
    shutil.copy(MANIFESTS / "bad" / "privileged.yaml", mixed / "c-bad.yaml")
    relaxed = tmp / "policies"
    shutil.copytree(POLICIES, relaxed)
    for name, action in (("gpu-device-injection", "warn"), ("gpu-memory-fit", "dryrun")):
        path = relaxed / f"{name}.yaml"
        path.write_text(
            path.read_text().replace("enforcementAction: deny", f"enforcementAction: {action}")
        )
    bad = MANIFESTS / "bad"
    nodes, json_out = str(NODES), ["--output", "json"]
    return {
        # Relative paths, as a CI job would pass them.
        "examples-json": (
            [*json_out, "--inventory", "examples/cluster/nodes.json", "examples/manifests"],
            None,
        ),
        "examples-text": (["--inventory", nodes, str(MANIFESTS)], None),
        "mixed-json": (
            [*json_out, "--inventory", nodes, str(mixed), str(tmp / "missing.yaml")],
            None,
        ),
        "mixed-colour": (["--color", str(mixed)], None),
        "stdin": ([*json_out, "-"], STDIN_LIST),
        "relaxed": (
            [
                *json_out,
                "--policies",
                str(relaxed),
                "--inventory",
                nodes,
                str(bad / "privileged.yaml"),
                str(bad / "missing-peak-memory.yaml"),
            ],
            None,
        ),
        "no-paths": ([], None),
        "no-inventory": (["--inventory", "nowhere.json", "x.yaml"], None),
        "not-policies": (["--policies", str(bad), "x.yaml"], None),
    }


def finish(proc: subprocess.Popen[str], stdin: str | None) -> subprocess.CompletedProcess[str]:
    out, err = proc.communicate(stdin, timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    tmp = tmp_path_factory.mktemp("cli")
    commands = prepare(tmp)
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "webhook", "check", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        for name, (args, _) in commands.items()
    }
    done = {name: finish(proc, commands[name][1]) for name, proc in procs.items()}
    done["tmp"] = subprocess.CompletedProcess([], 0, str(tmp), "")  # where the files are
    return done


def as_json(proc: subprocess.CompletedProcess[str]) -> tuple[int, dict[str, Any]]:
    assert proc.stderr == ""
    return proc.returncode, json.loads(proc.stdout)


def expected_findings(path: Path) -> list[str]:
    """The `# expect: policy/rule` lines at the top of an example file."""
    return sorted(e for e, _ in expected_actions(path))


def expected_actions(path: Path) -> list[tuple[str, str]]:
    """(policy/rule, action) per `# expect:` line; ` (warn)` after one marks a warning."""
    found = re.findall(r"^# expect: (\S+)(?: \((warn)\))?$", path.read_text(), flags=re.MULTILINE)
    return [(rule, action or "deny") for rule, action in found]


def expected_count(action: str) -> int:
    return sum(a == action for p in EXAMPLE_FILES for _, a in expected_actions(p))


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: str(p.relative_to(MANIFESTS)))
def test_each_example_yields_exactly_what_it_says(runs: Any, path: Path) -> None:
    _, body = as_json(runs["examples-json"])
    rel = str(path.relative_to(ROOT))
    found = sorted(
        (f"{r['policy']}/{r['rule']}", r["action"]) for r in body["results"] if r["file"] == rel
    )
    assert found == sorted(expected_actions(path))
    assert bool(found) is (path.parent.name == "bad")


def test_examples_cover_every_rule_of_every_check() -> None:
    # The DRA rules need a DRA cluster: examples/dra (tests/core/test_dra.py runs them);
    # the queue rules a queued one: examples/queues (tests/checks/test_queues.py). The
    # tenancy rules need tenants, which the shipped policy leaves to the platform: its
    # suite (policies/tests/gpu-tenancy.yaml) and examples/tenancy cover them.
    files = [
        *EXAMPLE_FILES,
        *sorted((EXAMPLES / "dra").rglob("*.yaml")),
        *sorted((EXAMPLES / "queues").rglob("*.yaml")),
    ]
    expected = {e.split("/")[1] for p in files for e in expected_findings(p)}
    checks = [c for name, c in registry().items() if name != "tenancy"]
    assert expected == {rule for check in checks for rule in check.rules}


def test_examples_json_shape_and_summary(runs: Any) -> None:
    code, body = as_json(runs["examples-json"])
    assert code == 1
    assert list(body) == ["results", "summary", "errors"]
    assert all(list(r) == RESULT_FIELDS for r in body["results"])
    assert {r["action"] for r in body["results"]} == {"deny", "warn"}
    n = len(EXAMPLE_FILES)
    assert body["summary"] == {
        "files": n,
        "objects": n,
        "evaluated": n - 1,
        "skipped": 1,
        "skippedReasons": {"no policy matches DaemonSet in namespace gpu-operator": 1},
        "deny": expected_count("deny"),
        "warn": expected_count("warn"),
        "dryrun": 0,
        "errors": 0,
    }
    assert body["errors"] == []


# What the line a finding points at must hold: the offending field, not the document start.
LINE_HOLDS = {
    "shm-default": r"^\s+- name: (nccl|bench|train)$",
    "shm-unbounded": r"^\s+volumes: \[\{name: dshm, emptyDir: \{medium: Memory\}\}\]",
    "shm-host": r"hostPath: \{path: /dev/shm\}",
    "nccl-forces-sockets": r"name: NCCL_IB_DISABLE",
    "rdma-without-ipc-lock": r"rdma/rdma_shared_device_a: 1",
    "nccl-interface-not-attached": r"name: NCCL_SOCKET_IFNAME, value: net2",
    "nccl-ignore-net-mismatch": r"^\s+- name: NCCL_IGNORE_NET_MISMATCH$",
    "host-rdma": r"^\s+host(Network|IPC): true$",
    "multi-rank-shared-gpu": r"nvidia\.com/gpu\.shared: 2",
    "multi-rank-mig": r"nvidia\.com/mig-1g\.10gb: 2",
    "gang-never-fits": r"^\s+nvidia\.com/gpu: 8$",
    "hostpath-device": r"^\s+path: ",
    "hostpath-runtime-socket": r"^\s+hostPath: \{path: /var/run/containerd/containerd\.sock",
    "hostpath-kubelet-socket": r"^\s+hostPath: \{path: /var/lib/kubelet/device-plugins\}",
    "hostpath-writable-device-config": r"^\s+- \{name: cdi, mountPath: /cdi\}",
    "sys-admin-unconfined": r"capabilities: \{add: \[SYS_ADMIN\]\}",
    "host-pid-capabilities": r"capabilities: \{add: \[SYS_PTRACE\]\}",
    "host-process": r"windowsOptions: \{hostProcess: true",
    "image-visible-devices": r"^\s+- name: shell$",
    "device-list-volume-mount": r"^\s+mountPath: /var/run/nvidia-container-devices",
    "visible-devices-env": r"^\s+- name: NVIDIA_VISIBLE_DEVICES$",
    "visible-devices-env-from": r"^\s+- configMapRef:$",
    "feature-devices-env": r"^\s+- name: NVIDIA_GDS$",
    "legacy-image-env": r"^\s+- name: CUDA_VERSION$",
    "share-limit-env": r"^\s+- name: CUDA_DEVICE_MEMORY_LIMIT_0$",
    "cdi-annotation": r"^\s+cdi\.k8s\.io/",
    "device-annotation": r"^\s+devices\.gke\.io/container\.profiler: \|$",
    "privileged": r"^\s+privileged: true$",
    "unknown-resource": r"^\s+nvidia\.com/",
    "insufficient-capacity": r"^\s+nvidia\.com/gpu: 9$",
    "no-candidate-node": r"^\s+nvidia\.com/gpu: 1$",
    "non-integer-count": r"^\s+nvidia\.com/gpu: 500m$",
    "request-without-limit": r"^\s+nvidia\.com/gpu: 1$",
    "request-limit-mismatch": r"^\s+nvidia\.com/gpu: 2$",
    "missing-peak-memory": r"^\s+nvidia\.com/",
    "invalid-peak-memory": r"^\s+gpu-admission\.io/peak-memory: 12GB$",
    "exceeds-device-memory": r"^\s+nvidia\.com/",
    "unknown-device-memory": r"^\s+nvidia\.com/gpu: 1$",
    "missing-slo-class": r"^\s+nvidia\.com/",
    "unknown-slo-class": r"^\s+gpu-admission\.io/slo-class: realtime$",
    "sharing-mode-not-accepted": r"^\s+nvidia\.com/gpu: 1$",
    "gang-not-wired": r"^metadata:$",
    "gang-disabled": r"^spec:$",
    "ranks-differ": r"^\s+(nvidia\.com/gpu\.product: NVIDIA-H100-80GB-HBM3$|resources: )",
    "nproc-exceeds-gpus": r"^\s+command: \[torchrun, --nproc-per-node=8",
    "nproc-unequal": r"^\s+command: \[sh, -c, \"torchrun --nnodes=3 --nproc_per_node=4",
}


def test_lines_point_at_the_offending_field(runs: Any) -> None:
    _, body = as_json(runs["examples-json"])
    assert {r["rule"] for r in body["results"]} == set(LINE_HOLDS)
    for r in body["results"]:
        line = (ROOT / r["file"]).read_text().splitlines()[r["line"] - 1]
        assert re.search(LINE_HOLDS[r["rule"]], line), (r["file"], r["line"], line)


def test_examples_text_output(runs: Any) -> None:
    proc = runs["examples-text"]
    assert (proc.returncode, proc.stderr) == (1, "")
    assert "\x1b[" not in proc.stdout  # not a terminal: no colour
    _, body = as_json(runs["examples-json"])
    blocks = proc.stdout.rstrip("\n").split("\n\n")
    files = sorted({r["file"] for r in body["results"]})
    assert [b.splitlines()[0] for b in blocks[:-1]] == [str(ROOT / f) for f in files]
    # Per file: one head line and one message line per finding, ordered by line.
    for block, file in zip(blocks, files, strict=False):
        results = [r for r in body["results"] if r["file"] == file]
        lines = block.splitlines()[1:]
        assert len(lines) == 2 * len(results)
        for r, head, message in zip(results, lines[::2], lines[1::2], strict=True):
            assert head == (
                f"  {r['line']:>4}  {r['action'].upper():6} {r['policy']}/{r['rule']}  "
                f"{r['kind']} {r['namespace']}/{r['name']}"
            )
            assert message == "        " + r["message"]
    n, deny, warn = len(EXAMPLE_FILES), expected_count("deny"), expected_count("warn")
    assert blocks[-1] == (
        f"{n} files, {n} objects: {n - 1} checked, 1 skipped (1 no policy matches DaemonSet in "
        f"namespace gpu-operator); findings: {deny} deny, {warn} warn, 0 dryrun"
    )


def test_key_example_messages_have_real_numbers(runs: Any) -> None:
    _, body = as_json(runs["examples-json"])
    by_file = {Path(r["file"]).name: r["message"] for r in body["results"]}
    assert by_file["exceeds-device-memory-mig-1g.yaml"].startswith(
        "the pod needs 12 GiB (12288 MiB) per device (gpu-admission.io/peak-memory=12Gi), but "
        "nvidia.com/mig-1g.10gb offers 9856 MiB (label nvidia.com/mig-1g.10gb.memory) on node "
        "gpu-a100-mig-0"
    )
    assert (
        "5757 MiB per replica (23028 MiB shared by 4 time-slicing replicas"
        in (by_file["exceeds-device-memory-time-sliced.yaml"])
    )
    assert (
        "the most any node that can take this pod offers is 8 (node gpu-h100-0)"
        in (by_file["insufficient-capacity-9-gpus.yaml"])
    )
    assert "; did you mean nvidia.com/mig-1g.10gb" in by_file["unknown-resource-typo.yaml"]
    assert "catalog value" not in "".join(by_file.values())  # 2g.20gb is used only by good files


def test_a_broken_file_among_good_ones(runs: Any) -> None:
    tmp = Path(runs["tmp"].stdout)
    code, body = as_json(runs["mixed-json"])
    assert code == 2
    # The parser notices the unclosed `[` of line 8 at the next line.
    assert body["errors"] == [
        f"{tmp / 'mixed' / 'b-broken.yaml'}:9: invalid YAML: did not find expected ',' or ']'",
        f"{tmp / 'missing.yaml'}: no such file or directory",
    ]
    # The other files are still checked.
    assert [(Path(r["file"]).name, r["line"], r["rule"]) for r in body["results"]] == [
        ("c-bad.yaml", 15, "privileged"),
    ]
    assert (body["summary"]["files"], body["summary"]["errors"]) == (4, 2)


def test_colour_on_request(runs: Any) -> None:
    proc = runs["mixed-colour"]
    tmp = Path(runs["tmp"].stdout)
    assert proc.returncode == 2
    assert f"\x1b[1m{tmp / 'mixed' / 'c-bad.yaml'}\x1b[0m\n" in proc.stdout
    assert "\x1b[31m\x1b[1mDENY  \x1b[0m gpu-device-injection/privileged" in proc.stdout
    assert f"\x1b[31m\x1b[1merror:\x1b[0m {tmp / 'mixed' / 'b-broken.yaml'}:9: invalid YAML: " in (
        proc.stdout
    )
    assert proc.stdout.endswith("findings: 1 deny, 0 warn, 0 dryrun; 1 error\n")


def test_stdin_with_a_list_and_skipped_documents(runs: Any) -> None:
    code, body = as_json(runs["stdin"])
    assert code == 1
    assert [
        (r["file"], r["line"], r["kind"], r["namespace"], r["name"], r["rule"])
        for r in body["results"]
    ] == [("<stdin>", STDIN_ENV_LINE, "Pod", "ml", "sneaky", "visible-devices-env")]
    assert STDIN_LIST.splitlines()[STDIN_ENV_LINE - 1].strip() == "- name: NVIDIA_VISIBLE_DEVICES"
    summary = body["summary"]
    assert [summary[k] for k in ("files", "objects", "evaluated", "skipped")] == [1, 4, 2, 2]
    assert summary["skippedReasons"] == {
        "without apiVersion/kind": 1,
        "kind Service holds no pod spec": 1,
    }


def test_warn_and_dryrun_policies_exit_zero(runs: Any) -> None:
    code, body = as_json(runs["relaxed"])
    assert code == 0
    assert Counter((r["rule"], r["action"]) for r in body["results"]) == {
        ("privileged", "warn"): 1,
        ("missing-peak-memory", "dryrun"): 1,
    }
    assert [body["summary"][k] for k in ("deny", "warn", "dryrun")] == [0, 1, 1]


@pytest.mark.parametrize(
    ("run", "stderr"),
    [
        ("no-paths", r"Error: Missing argument 'PATHS\.\.\.'\.\n$"),
        (
            "no-inventory",
            r"^Error: inventory did not load: nowhere\.json: no such file or directory\n$",
        ),
        (
            "not-policies",
            r"^Error: policies did not load:\n\S+/cdi-annotation\.yaml: document 1 \(line 4\): "
            r"kind must be GPUPolicy, WorkloadKinds or ClusterProfile, got 'Pod'\n",
        ),
    ],
)
def test_usage_and_input_errors_exit_two(runs: Any, run: str, stderr: str) -> None:
    proc = runs[run]
    assert (proc.returncode, proc.stdout) == (2, "")
    assert re.search(stderr, proc.stderr), proc.stderr
