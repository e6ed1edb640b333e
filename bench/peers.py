"""`gpu-admission check` beside Gatekeeper's gator on the same Pod manifests, one per file.

Generates N Pod manifests (one file each, as a repository of manifests holds them: every
10th asks for a GPU, every 100th mounts /dev/nvidia0 by hostPath, which both tools
deny), then runs, in one run on the same files, best of --runs:

- `gpu-admission check --inventory NODES DIR` (the four shipped policies),
- `gator test -f gatekeeper-template.yaml -f gatekeeper-constraint.yaml -f DIR`
  (one Rego rule: hostPath under /dev/nvidia), from ../shared/tools/peers (README there),

and prints wall seconds per size. gator is timed as its unpacked binary (the
wrapper's Python start-up is not gator's cost), check with its bytecode
compiled. Both must report the same hostPath Pods (checked).
Usage: .venv/bin/python bench/peers.py [--sizes 20,2000,20000] [--large] [--runs 3]
(--large adds 100,000 manifests.) Not a test: prints numbers.
"""

from __future__ import annotations

import argparse
import os
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


def timed(cmd: list[str], runs: int) -> tuple[float, int, str]:
    """Best wall seconds of `runs`, the exit code and the output of the last run."""
    best, code, out = float("inf"), 0, ""
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        best = min(best, time.perf_counter() - start)
        code, out = proc.returncode, proc.stdout
        if code not in (0, 1):
            raise SystemExit(f"{' '.join(cmd[:4])} ... exited {code}: {proc.stderr[-2000:]}")
    return best, code, out


def gator_binary() -> Path:
    """The unpacked gator: timed without the Python wrapper that unpacks it."""
    subprocess.run([str(PEERS / "gator"), "--help"], capture_output=True, check=True)
    digest = (PEERS / "SHA256SUMS").read_text().split()[0]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(cache) / "peers" / digest[:16] / "gator"


def hostpath_pods_ours(out: str) -> set[str]:
    found = orjson.loads(out)["results"]
    return {r["name"] for r in found if r["rule"].startswith("host-path")}


def hostpath_pods_gator(out: str) -> set[str]:
    # gator prints "... Pod/pod-000100 ... : ["gpu-hostpath"] Message: ..." per violation
    names = set()
    for line in out.splitlines():
        for word in line.replace('"', " ").split():
            if word.startswith("pod-") and word[4:].isdigit():
                names.add(word)
    return names


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
    print(f"{'manifests':>10} {'gpu-admission check':>20} {'gator':>8} {'ratio':>6}  findings")
    for size in sizes:
        corpus = workdir / f"pods-{size}"
        if not corpus.is_dir() or len(os.listdir(corpus)) != size:
            shutil.rmtree(corpus, ignore_errors=True)
            write_corpus(corpus, size)
        t_ours, code_ours, out_ours = timed([*ours, "-o", "json", str(corpus)], args.runs)
        t_gator, code_gator, out_gator = timed([*gator, "-f", str(corpus)], args.runs)
        same = hostpath_pods_ours(out_ours) == hostpath_pods_gator(out_gator)
        findings = len(orjson.loads(out_ours)["results"])
        print(
            f"{size:>10,} {t_ours:>18.2f} s {t_gator:>6.2f} s {t_ours / t_gator:>6.2f}  "
            f"{findings} (exit {code_ours}/{code_gator}; hostPath Pods "
            f"{'the same' if same else 'DIFFER'})"
        )
    print(f"load average: {os.getloadavg()[0]:.1f}")
    if args.dir is None:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
