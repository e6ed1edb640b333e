"""`gpu-admission check` beside Gatekeeper's gator on the same Pod manifests, one per file.

Generates N Pod manifests (one file each, as a repository of manifests holds them: every
10th asks for a GPU, every 100th mounts /dev/nvidia0 by hostPath, which both tools
deny), then runs, in one run on the same files, best of --runs:

- `gpu-admission check --inventory NODES DIR` (the shipped policies; from the second
  run on, the policy set comes from the policy cache as on a user's later runs, see
  webhook.sources.policy_cache; bench/startup.py times a cold start beside it),
- `gator test -f gatekeeper-template.yaml -f gatekeeper-constraint.yaml -f DIR`
  (one Rego rule: hostPath under /dev/nvidia), from ../shared/tools/peers (README there),

and prints wall seconds per size. gator is timed as its unpacked binary (the
wrapper's Python start-up is not gator's cost), check with its bytecode
compiled. Both must report the same, non-empty set of hostPath Pods, and gator must
not report an error: anything else stops the run (a peer that failed is not a time).

gator keeps every file it reads open until it is done, so past the process's
open-file limit (`ulimit -n`, 20,000 on this machine and not raisable here) it stops
with "too many open files" after ~19,990 files. For a directory that large gator is
given the same manifests on stdin as one multi-document stream, its documented input
(`cat manifest.yaml | gator test`); at 10,000 files the two inputs cost gator the same
(4.59 s from the directory, 4.47 s from stdin, 2026-12-01).
Usage: .venv/bin/python bench/peers.py [--sizes 20,2000,20000] [--large] [--runs 3]
(--large adds 100,000 manifests.) Not a test: prints numbers.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import yaml

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT.parent / "shared" / "tools" / "peers"
sys.path.insert(0, str(ROOT / "bench"))

from audit_bench import nodes  # noqa: E402


def pod(i: int) -> dict[str, Any]:
    """A Pod as people write one; every 10th asks for a GPU, every 100th mounts a device."""
    app = f"app-{i % 97}"
    labels: dict[str, str] = {"app": app, "team": f"team-{i % 13}"}
    limits: dict[str, Any] = {"cpu": "2", "memory": "4Gi"}
    volumes: list[dict[str, Any]] = [{"name": "cache", "emptyDir": {}}]
    mounts: list[dict[str, Any]] = [{"name": "cache", "mountPath": "/cache"}]
    if i % 10 == 0:
        labels["gpu-admission.io/slo-class"] = "batch"
        labels["gpu-admission.io/peak-memory"] = "30Gi"
        limits["nvidia.com/gpu"] = 1
    if i % 100 == 0:
        volumes.append({"name": "dev", "hostPath": {"path": "/dev/nvidia0"}})
        mounts.append({"name": "dev", "mountPath": "/dev/nvidia0"})
    container = {
        "name": "main",
        "image": f"registry.example.com/{app}:1.{i % 7}",
        "args": ["--port=8080"],
        "ports": [{"containerPort": 8080}],
        "env": [{"name": "LOG_LEVEL", "value": "info"}],
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": limits},
        "volumeMounts": mounts,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i:06d}", "namespace": f"ns-{i % 11}", "labels": labels},
        "spec": {"containers": [container], "volumes": volumes},
    }


def write_corpus(directory: Path, count: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        text = yaml.safe_dump(pod(i), sort_keys=False)
        (directory / f"pod-{i:06d}.yaml").write_text(text)


def write_stream(corpus: Path) -> Path:
    """The corpus's files as one multi-document YAML stream, in file-name order."""
    stream = corpus.with_suffix(".stream.yaml")
    with stream.open("wb") as out:
        for path in sorted(corpus.iterdir()):
            out.write(b"---\n" + path.read_bytes())
    return stream


def timed(cmd: list[str], runs: int, stdin: Path | None = None) -> tuple[float, int, str]:
    """Best wall seconds of `runs`, the exit code and the output of the last run.

    Exit 0 or 1 with nothing on stderr, or the run stops: a tool that failed part-way
    (gator past the open-file limit exits 1, as for a violation) has no time to compare.
    """
    best, code, out = float("inf"), 0, ""
    for _ in range(runs):
        with stdin.open("rb") if stdin else open(os.devnull, "rb") as feed:
            start = time.perf_counter()
            proc = subprocess.run(cmd, stdin=feed, capture_output=True, check=False)
            best = min(best, time.perf_counter() - start)
        code, out = proc.returncode, proc.stdout.decode()
        error = proc.stderr.decode().strip()
        if code not in (0, 1) or error:
            raise SystemExit(f"{' '.join(cmd[:4])} ... exited {code}: {error[-2000:]}")
    return best, code, out


def gator_binary() -> Path:
    """The unpacked gator: timed without the Python wrapper that unpacks it."""
    subprocess.run([str(PEERS / "gator"), "--help"], capture_output=True, check=True)
    digest = (PEERS / "SHA256SUMS").read_text().split()[0]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(cache) / "peers" / digest[:16] / "gator"


def hostpath_pods_ours(out: str) -> set[str]:
    found = orjson.loads(out)["results"]
    return {r["name"] for r in found if r["rule"] == "hostpath-device"}


def hostpath_pods_gator(out: str) -> set[str]:
    # gator prints one line per violation: `v1/Pod ns-0/pod-000100: ["gpu-hostpath"] ...`
    return {m.group(1) for m in re.finditer(r"/(pod-\d+): \[\"gpu-hostpath\"\]", out)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,2000,20000")
    parser.add_argument("--large", action="store_true", help="also 100,000 manifests")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="where to write the corpus (kept)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")] + ([100_000] if args.large else [])
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="bench-peers-"))
    workdir.mkdir(parents=True, exist_ok=True)
    inventory = workdir / "nodes.json"
    inventory.write_bytes(orjson.dumps(nodes(), option=orjson.OPT_INDENT_2))
    gator = [str(gator_binary()), "test"]
    gator += ["-f", str(PEERS / "gatekeeper-template.yaml")]
    gator += ["-f", str(PEERS / "gatekeeper-constraint.yaml")]
    # Bytecode as an installed wheel has it (pip compiles at install; this environment
    # may set PYTHONDONTWRITEBYTECODE, which would recompile the package every run).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "webhook")], check=True)
    ours = [sys.executable, "-m", "webhook", "check", "--inventory", str(inventory)]
    print(f"{os.cpu_count()} CPUs; best of {args.runs}; corpus in {workdir}")
    # gator holds each file open: leave room for its own descriptors under the limit
    open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 100
    print(f"{'manifests':>10} {'gpu-admission check':>20} {'gator':>8} {'ratio':>6}  findings")
    for size in sizes:
        corpus = workdir / f"pods-{size}"
        if not corpus.is_dir() or len(os.listdir(corpus)) != size:
            shutil.rmtree(corpus, ignore_errors=True)
            write_corpus(corpus, size)
        t_ours, code_ours, out_ours = timed([*ours, "-o", "json", str(corpus)], args.runs)
        if size < open_files:
            gator_input, stream = "directory", None
            t_gator, code_gator, out_gator = timed([*gator, "-f", str(corpus)], args.runs)
        else:
            gator_input, stream = "stdin", write_stream(corpus)
            t_gator, code_gator, out_gator = timed(gator, args.runs, stdin=stream)
        ours_found, gator_found = hostpath_pods_ours(out_ours), hostpath_pods_gator(out_gator)
        if not ours_found or ours_found != gator_found:
            raise SystemExit(
                f"{size}: the tools disagree on the hostPath Pods: ours {len(ours_found)}, "
                f"gator {len(gator_found)} (first differing: "
                f"{sorted(ours_found ^ gator_found)[:3]})"
            )
        findings = len(orjson.loads(out_ours)["results"])
        print(
            f"{size:>10,} {t_ours:>18.2f} s {t_gator:>6.2f} s {t_ours / t_gator:>6.2f}  "
            f"{findings} (exit {code_ours}/{code_gator}; the same {len(ours_found)} "
            f"hostPath Pods; gator read the {gator_input})"
        )
    print(f"load average: {os.getloadavg()[0]:.1f}")
    if args.dir is None:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
