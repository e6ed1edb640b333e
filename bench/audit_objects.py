"""What `audit` spends on one parsed object, by kind of Pod, in process.

Reads the Pods of a dump written by bench/audit_worker.py (the bench's Pods: a fifth
ask for a GPU), splits them by the pre-filter into Pods without a GPU channel and GPU
Pods, and runs over each group `--repeat` times:

- `plain-filter`: the pre-filter alone (`Prefilter.plain`) on the Pods without a GPU
  channel,
- `plain`: `Auditor.add` on the same Pods,
- `gpu`: `Auditor.add` on the GPU Pods (the pre-filter, then the engine),

and prints CPU microseconds an object (time.process_time, best run). Under `valgrind
--tool=callgrind` with `--only S`, the difference between `--repeat 1` and `--repeat 3`,
over twice the group's size, is the instructions an object, the same on every run.
Usage: python bench/audit_objects.py [--pods N] [--repeat R] [--only S]
Not a test: prints numbers.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_bench

from webhook.commands.audit import Auditor
from webhook.sources import dumpsplit
from webhook.sources.files import read_inventory
from webhook.sources.policy_files import load_policy_dir

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", choices=["plain-filter", "plain", "gpu"])
    args = parser.parse_args()
    dump = Path(f"/tmp/bench-audit-worker-{args.pods}.json")
    nodes = dump.with_suffix(".nodes.json")
    if not dump.exists():
        audit_bench.write_dump(dump, args.pods)
    if not nodes.exists():
        nodes.write_bytes(orjson.dumps(audit_bench.nodes(), option=orjson.OPT_INDENT_2))
    policy_set = load_policy_dir(str(ROOT / "policies"))
    inventory = read_inventory(str(nodes))
    part = dumpsplit.parts(str(dump), count=1)[0]
    objects = [obj for _, obj, _ in dumpsplit.items(part, lines=[])]
    prefilter = Auditor(policy_set, inventory)._prefilter
    assert prefilter is not None, "the shipped policies are all pre-filtered"
    plain = [o for o in objects if prefilter.plain(o)]
    gpu = [o for o in objects if not prefilter.plain(o)]

    def adding(group: list[Any]) -> Callable[[], None]:
        def run() -> None:
            auditor = Auditor(policy_set, inventory)
            for obj in group:
                auditor.add(obj, location="pods.json:1")

        return run

    def filtering() -> None:
        for obj in plain:
            prefilter.plain(obj)

    stages = {"plain-filter": (filtering, plain), "plain": (adding(plain), plain)}
    stages["gpu"] = (adding(gpu), gpu)
    for name, (run, group) in stages.items():
        if args.only not in (None, name):
            continue
        best = float("inf")
        for _ in range(args.repeat):
            start = time.process_time()
            run()
            best = min(best, (time.process_time() - start) / len(group))
        print(f"{name:12} {len(group):,} objects: {best * 1e6:.1f} us an object (CPU)")


if __name__ == "__main__":
    main()
