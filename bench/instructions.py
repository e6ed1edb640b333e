"""Benchmark: CPU instructions per evaluation on the admission path, under callgrind.

Wall-clock medians move by 10% with whatever else the machine runs; the instruction
count of an evaluation does not. Each object is evaluated `--n` times in one process and
`0` times in another, and the difference in instructions (valgrind --tool=callgrind,
total Ir) divided by n is what one evaluation costs, imports and start-up cancelled.

    python bench/instructions.py                     # this checkout
    python bench/instructions.py --tree /tmp/base    # another checkout (before/after)
    python bench/instructions.py --policies DIR      # another policy set (one policy less)

A benchmark, not a test. Needs valgrind.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ("gpu-pod", "plain-pod", "deployment", "privileged-pod")
RUNNER = """
import sys
sys.path.insert(0, {tree!r})
from tests.support.reviews import deployment, pod
from webhook.core.engine.evaluation import evaluate
from webhook.core.engine.subject import subject_of
from webhook.sources.files import read_inventory
from webhook.sources.policy_files import load_policy_dir
from pathlib import Path
tree = Path({tree!r})
policies = load_policy_dir({policies!r} or tree / "policies")
inventory = read_inventory(str(tree / "examples/cluster/nodes.json"))
objs = {{
    "gpu-pod": pod(name="p", limits={{"nvidia.com/mig-3g.40gb": 1}}),
    "plain-pod": {{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "w"}},
                  "spec": {{"containers": [{{"name": "c", "image": "nginx"}}]}}}},
    "deployment": deployment(pod(limits={{"nvidia.com/mig-1g.10gb": 1}})),
    "privileged-pod": pod(name="x", container={{"securityContext": {{"privileged": True}}}}),
}}
obj = objs[{case!r}]
for _ in range({n}):
    evaluate(policies, subject_of(obj, namespace="ml"), inventory)
"""


def instructions(tree: Path, case: str, n: int, policies: str = "") -> int:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "run.py"
        script.write_text(RUNNER.format(tree=str(tree), case=case, n=n, policies=policies))
        out = Path(tmp) / "callgrind.out"
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
             str(script)],
            check=True, capture_output=True, cwd=tree,
        )  # fmt: skip
        found = re.search(r"^summary: (\d+)", out.read_text(), flags=re.M)
        assert found, "no summary line in the callgrind output"
        return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--policies", default="", help="a policy directory (default: the tree's)")
    args = parser.parse_args()
    for case in args.cases.split(","):
        base = instructions(args.tree, case, 0, args.policies)
        total = instructions(args.tree, case, args.n, args.policies)
        print(f"{case:16} {(total - base) / args.n / 1000:8.1f}k instructions an evaluation")


if __name__ == "__main__":
    main()
