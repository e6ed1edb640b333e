"""One `audit --from` worker's cost per Pod, in process: what each range of a big dump costs.

Writes a dump of N benchmark Pods (bench/audit_bench.py's, a fifth with a GPU) unless
it exists, then runs the worker's loop (webhook.commands.auditdump._audit_part) on the
whole items array as one range, `--repeat` times, and prints the CPU microseconds per
Pod (time.process_time, best run) of reading and parsing alone (`read`) and of the
whole audit (`audit`). CPU time, not wall time: other processes on the machine slow a
run down less. Under `valgrind --tool=callgrind` the difference between two sizes
(`--pods 1000` and `--pods 5000`, `--repeat 1 --stage audit`) is the instructions per
Pod, which do not depend on the load at all.
Usage: python bench/audit_worker.py [--pods N] [--dump PATH] [--repeat R] [--stage S]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_bench

from webhook.commands import auditdump
from webhook.sources import dumpsplit
from webhook.sources.files import read_inventory
from webhook.sources.policy_files import load_policy_dir

ROOT = Path(__file__).resolve().parents[1]


def read(part: dumpsplit.Part) -> int:
    return sum(1 for _ in dumpsplit.items(part, lines=[]))


def audit(part: dumpsplit.Part) -> int:
    done = auditdump._audit_part(part)
    assert done is not None, "the dump was not read as ranges"
    return done[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--dump", type=Path, help="default: /tmp/bench-audit-worker-N.json")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stage", choices=["read", "audit", "both"], default="both")
    args = parser.parse_args()
    dump = args.dump or Path(f"/tmp/bench-audit-worker-{args.pods}.json")
    nodes = dump.with_suffix(".nodes.json")
    if not dump.exists():
        audit_bench.write_dump(dump, args.pods)
    if not nodes.exists():
        nodes.write_bytes(orjson.dumps(audit_bench.nodes(), option=orjson.OPT_INDENT_2))
    part = dumpsplit.parts(str(dump), count=1)[0]
    auditdump._shared = (load_policy_dir(str(ROOT / "policies")), read_inventory(str(nodes)), None)
    stages = {"read": [read], "audit": [audit], "both": [read, audit]}[args.stage]
    for stage in stages:
        best = float("inf")
        for _ in range(args.repeat):
            start = time.process_time()
            count = stage(part)
            best = min(best, (time.process_time() - start) / count)
        us = best * 1e6
        print(f"{stage.__name__:6} {count:,} Pods: {us:.1f} us a Pod (CPU, best of {args.repeat})")


if __name__ == "__main__":
    main()
