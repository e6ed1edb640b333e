"""Start-up of `gpu-admission check` on a small pull request, beside gator, cold.

A pull request of 20 manifests is mostly start-up: interpreter, imports, the policy
set's validation. This runs, alternating, in fresh processes (as CI runs them):

- `python -m webhook check -o json --inventory NODES DIR` (the shipped policies),
- gator on the same files (bench/peers.py's template and constraint),
- `python -c pass` (the interpreter's own start, for scale),

and prints the best and the median wall seconds of --runs each, the ratio of the bests
and the load average. The corpus is bench/peers.py's (one Pod a file).
Usage: .venv/bin/python bench/startup.py [--files 20] [--runs 15] [--dir DIR]
Not a test: prints numbers.
"""

from __future__ import annotations

import argparse
import os
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


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1) or proc.stderr:
        raise SystemExit(f"{' '.join(cmd[:4])} ... exited {proc.returncode}: {proc.stderr!r}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--dir", type=Path, help="where to write the corpus (kept)")
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
    commands = {
        "check": [sys.executable, "-m", "webhook", *check],
        "gator": [str(gator_binary()), "test", *(a for f in rego for a in ("-f", str(f)))],
        "python -c pass": [sys.executable, "-c", "pass"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, cmd in commands.items():
            times[name].append(wall(cmd))
    print(f"{args.files} files, {os.cpu_count()} CPUs, {args.runs} alternating runs each")
    for name, found in times.items():
        print(f"{name:>16}: best {min(found):.3f} s, median {statistics.median(found):.3f} s")
    print(f"check / gator (bests): {min(times['check']) / min(times['gator']):.2f}")
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
