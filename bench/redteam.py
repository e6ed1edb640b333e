"""How many red-team cases (tests/data/redteam/cases.yaml) a checkout's `check` catches.

    python bench/redteam.py                  # this checkout
    python bench/redteam.py --tree /tmp/base # another one (before/after, docs/redteam.md)

Each case goes through `check -o json` of that checkout, with its shipped policies and
examples/cluster/nodes.json; a way in is caught when it gets any deny or warn finding,
and caught with the expected rule when every rule the case names is among them. A
measurement, not a test (tests/e2e/test_redteam.py is the test).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT)
    tree = parser.parse_args().tree.resolve()
    cases = yaml.safe_load((ROOT / "tests/data/redteam/cases.yaml").read_text())
    cases = [c for c in cases if not c.get("admissionOnly")]
    with tempfile.TemporaryDirectory() as tmp:
        for c in cases:
            (Path(tmp) / f"{c['id']}.yaml").write_text(c["manifest"])
        env = {**os.environ, "PYTHONPATH": str(tree), "GPU_ADMISSION_CACHE_DIR": ""}
        run = subprocess.run(
            [sys.executable, "-m", "webhook", "check", "-o", "json", "--policies",
             str(tree / "policies"), "--inventory", str(tree / "examples/cluster/nodes.json"), tmp],
            capture_output=True, text=True, env=env, cwd=tree, check=False,
        )  # fmt: skip
    found: dict[str, set[tuple[str, str]]] = {}
    for r in json.loads(run.stdout)["results"]:
        found.setdefault(r["name"], set()).add((r["action"], f"{r['policy']}/{r['rule']}"))
    ways = [c for c in cases if c["expect"] or c.get("warn")]
    controls = [c for c in cases if not c["expect"] and not c.get("warn")]
    caught = [c for c in ways if found.get(c["id"])]
    expected = [
        c
        for c in ways
        if {("deny", r) for r in c["expect"]} | {("warn", r) for r in c.get("warn", [])}
        <= found.get(c["id"], set())
    ]
    flagged = [c["id"] for c in controls if found.get(c["id"])]
    print(
        f"{tree}: ways in caught {len(caught)} of {len(ways)}, with the expected rule "
        f"{len(expected)}; controls flagged {len(flagged)} of {len(controls)} {flagged}"
    )


if __name__ == "__main__":
    main()
