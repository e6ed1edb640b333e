"""Start-up of `gpu-admission check` on a small pull request, beside gator, cold.

A pull request of 20 manifests is mostly start-up: interpreter, imports, the policy
set's validation. This runs, alternating, in fresh processes (as CI runs them):

- `python -m webhook check -o json --inventory NODES DIR` (the shipped policies), with
  the policy set read from the policy cache (filled by one run before), and cold (the
  cache off: the policies validated with pydantic, as on a fresh CI runner),
- gator on the same files (bench/peers.py's template and constraint),
- `python -c pass` (the interpreter's own start, for scale),
- with --before TREE, the same check from another tree (`git archive REV webhook
  policies | tar -x -C TREE`, run with PYTHONPATH=TREE), whose output must be the same,

and prints the best and the median wall and CPU seconds of --runs each, the ratio of
the bests and the load average. The corpus is bench/peers.py's (one Pod a file).
Usage: .venv/bin/python bench/startup.py [--files 20] [--runs 15] [--dir DIR] [--before TREE]
Not a test: prints numbers.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from audit_bench import nodes  # noqa: E402
from peers import PEERS, gator_binary, write_corpus  # noqa: E402


def timed(
    cmd: list[str], *, tree: Path = ROOT, env: dict[str, str] | None = None
) -> tuple[float, float, bytes]:
    """Wall and CPU seconds (user + sys) of one run, and its output."""
    env = {**os.environ, "PYTHONPATH": str(tree), **(env or {})}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, env=env, cwd=tree)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1) or proc.stderr:
        raise SystemExit(f"{' '.join(cmd[:4])} ... exited {proc.returncode}: {proc.stderr!r}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return seconds, cpu, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--dir", type=Path, help="where to write the corpus (kept)")
    parser.add_argument("--before", type=Path, help="a tree with the code to compare")
    args = parser.parse_args()
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="bench-startup-"))
    corpus, inventory = workdir / f"pods-{args.files}", workdir / "nodes.json"
    if not corpus.is_dir() or len(os.listdir(corpus)) != args.files:
        write_corpus(corpus, args.files)
    inventory.write_bytes(orjson.dumps(nodes(), option=orjson.OPT_INDENT_2))
    # Bytecode as an installed wheel has it (see bench/peers.py).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "webhook")], check=True)
    check = ["check", "-o", "json", "--inventory", str(inventory), str(corpus)]
    rego = [PEERS / "gatekeeper-template.yaml", PEERS / "gatekeeper-constraint.yaml", corpus]
    # The policy cache (webhook.sources.policy_cache) in a directory of this run's,
    # filled by one run before the timed ones; "cold" runs with it off, as a fresh CI
    # runner starts.
    cached = {"GPU_ADMISSION_CACHE_DIR": tempfile.mkdtemp(prefix="bench-startup-cache-")}
    cold = {"GPU_ADMISSION_CACHE_DIR": ""}
    ours = [sys.executable, "-m", "webhook", *check]
    commands = {
        "check": (ours, ROOT, cached),
        "check, cold": (ours, ROOT, cold),
        "gator": (
            [str(gator_binary()), "test", *(a for f in rego for a in ("-f", str(f)))],
            ROOT,
            None,
        ),
        "python -c pass": ([sys.executable, "-c", "pass"], ROOT, None),
    }
    if args.before:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(args.before)], check=True)
        commands["check, --before"] = (ours, args.before, cold)
    timed(ours, env=cached)  # validates the policies once, for the cached runs
    runs: dict[str, list[tuple[float, float, bytes]]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, (cmd, tree, env) in commands.items():
            runs[name].append(timed(cmd, tree=tree, env=env))
    if runs["check"][-1][2] != runs["check, cold"][-1][2]:
        raise SystemExit("check with and without the policy cache wrote different output")
    if args.before and runs["check"][-1][2] != runs["check, --before"][-1][2]:
        raise SystemExit("check and check --before wrote different output")
    print(f"{args.files} files, {os.cpu_count()} CPUs, {args.runs} alternating runs each")
    for name, found in runs.items():
        wall, cpu = [r[0] for r in found], [r[1] for r in found]
        print(
            f"{name:>16}: wall best {min(wall):.3f} s, median {statistics.median(wall):.3f} s;"
            f" CPU best {min(cpu):.3f} s"
        )
    best = {name: min(r[0] for r in found) for name, found in runs.items()}
    print(f"check / gator (bests): {best['check'] / best['gator']:.2f}")
    print(f"check, cold / gator (bests): {best['check, cold'] / best['gator']:.2f}")
    if args.before:
        print(f"check --before / gator (bests): {best['check, --before'] / best['gator']:.2f}")
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
