"""Benchmark: the inventory at 10, 1,000, 10,000 and 50,000 nodes (not a test).

For each size it writes a realistic `kubectl get nodes -o json` List (bench/clustergen.py:
GFD-labelled H100, A100 MIG-mixed, A100 40GB, time-sliced A10G, MPS L4 and CPU nodes,
cloud and NFD labels, taints on the GPU pools, ~45 labels a node, conditions, images)
and measures:
- loading it (`read_inventory`) in a fresh process: seconds (the faster of two runs) and
  peak RSS of that process;
- `evaluate` with the four shipped policies, median per Pod, for an allowed Pod and for
  each deny with a fix suggestion, warm (the inventory's memo holds the candidates, as
  for the Pods of one workload) and cold (a fresh memo every time: a Pod whose
  constraints were never seen);
- one Node watch event through the server's State.update_nodes: a heartbeat (conditions,
  resourceVersion, GFD timestamp: nothing a check reads) and a relevant change (a label);
  and, for scale, rebuilding the index from the parsed nodes, as every event did before;
- at 10,000 nodes: `gpu-admission check` of examples/manifests with that inventory,
  against a plain orjson load of the file plus the same check with the 10-node one.

Prints a markdown table. Usage: python bench/cluster.py [--sizes 10,1000] [--dir DIR]
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))  # the repository: tests.support and this checkout's webhook

import clustergen  # noqa: E402

from tests.support.reviews import pod  # noqa: E402
from webhook.core.engine.evaluation import Subject, evaluate  # noqa: E402
from webhook.core.supply.inventory import Inventory  # noqa: E402
from webhook.core.supply.nodeindex import NodeIndex  # noqa: E402
from webhook.serve.state import Settings, State  # noqa: E402
from webhook.sources.files import read_inventory  # noqa: E402
from webhook.sources.policy_files import load_policy_dir  # noqa: E402

SIZES = (10, 1_000, 10_000, 50_000)
TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
H100 = "NVIDIA-H100-80GB-HBM3"


def labels(peak: str, slo: str) -> dict[str, str]:
    return {"gpu-admission.io/peak-memory": peak, "gpu-admission.io/slo-class": slo}


# (row name, Pod, the rule it must get: None for allowed, and a text its message holds)
PODS: list[tuple[str, dict[str, Any], str | None, str]] = [
    (
        "allowed (H100 by nodeSelector)",
        pod(
            labels=labels("60Gi", "latency-sensitive"),
            limits={"nvidia.com/gpu": 8},
            spec={"tolerations": TOLERATE_GPU, "nodeSelector": {"nvidia.com/gpu.product": H100}},
        ),
        None,
        "",
    ),
    (
        "exceeds-device-memory, with a pin",
        pod(
            labels=labels("30Gi", "batch"),
            limits={"nvidia.com/gpu": 1},
            spec={"tolerations": TOLERATE_GPU},
        ),
        "exceeds-device-memory",
        "Pin the pod to nodes where it fits with nodeSelector",
    ),
    (
        "sharing-mode-not-accepted, with a pin",
        pod(
            labels=labels("4Gi", "latency-sensitive"),
            limits={"nvidia.com/gpu": 1},
            spec={"tolerations": TOLERATE_GPU},
        ),
        "sharing-mode-not-accepted",
        "or pin the pod with nodeSelector",
    ),
    (
        "insufficient-capacity",
        pod(
            labels=labels("4Gi", "batch"),
            limits={"nvidia.com/gpu": 32},
            spec={"tolerations": TOLERATE_GPU},
        ),
        "insufficient-capacity",
        "the most any node that can take this pod offers is 16",
    ),
    (
        "no-candidate-node",
        pod(labels=labels("20Gi", "batch"), limits={"nvidia.com/mig-3g.40gb": 1}),
        "no-candidate-node",
        "can take this pod",
    ),
]


def median_us(fn: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        t = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t)
    return statistics.median(samples) / 1000


def child(*args: str) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in MiB and stdout of `python ARGS` in its own process."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, cwd=ROOT)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # check exits 1 on a deny
        raise SystemExit(f"failed: python {' '.join(args)}")
    return wall, usage.ru_maxrss / 1024, out.decode()


def load(path: Path) -> tuple[float, float]:
    code = (
        "import time; from webhook.sources.files import read_inventory; "
        f"t = time.perf_counter(); inv = read_inventory({str(path)!r}); "
        "print(time.perf_counter() - t, inv.node_count)"
    )
    runs = [child("-c", code) for _ in range(2)]  # the faster of two: the machine is shared
    return min(float(out.split()[0]) for _, _, out in runs), max(rss for _, rss, _ in runs)


def evaluations(inventory: Inventory, policies: Any, runs: int) -> dict[str, tuple[float, float]]:
    out = {}
    for row, obj, rule, text in PODS:
        subject = Subject(obj, "ml")
        decision = evaluate(policies, subject, inventory)
        rules = [f.rule for f in decision.findings]
        if rule is None:
            assert not decision.findings, (row, decision.findings)
        else:
            assert rule in rules and any(text in f.message for f in decision.findings), (
                row,
                decision.findings,
            )
        warm = median_us(lambda s=subject: evaluate(policies, s, inventory), runs)
        fresh = [Inventory(inventory.index) for _ in range(max(20, runs // 20))]
        cold = median_us(lambda s=subject, f=fresh: evaluate(policies, s, f.pop()), len(fresh))
        out[row] = (warm, cold)
    return out


def watch_events(path: Path, runs: int) -> tuple[float, float, float]:
    """Median µs of a heartbeat and of a label change through State.update_nodes, and
    the milliseconds of rebuilding the index from the parsed nodes."""
    state = State.start(Settings(str(ROOT / "policies")))
    state.inventory = read_inventory(str(path))
    state.inventory_synced = True
    raw = clustergen.node(7, random.Random(1))  # an A100 node, as the watch sends it
    name = state.inventory.nodes[len(state.inventory.nodes) // 2].name
    raw["metadata"]["name"] = raw["metadata"]["labels"]["kubernetes.io/hostname"] = name
    state.update_nodes({name: raw})
    beats, changes = [], []
    for n in range(runs):
        beat = copy.deepcopy(raw)
        beat["metadata"]["resourceVersion"] = str(2_000_000 + n)
        beat["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = str(1_800_000_000 + n)
        beat["status"]["conditions"][0]["lastHeartbeatTime"] = f"2025-06-12T09:{n % 60:02d}:00Z"
        beats.append(beat)
        change = copy.deepcopy(raw)
        change["metadata"]["labels"]["example.com/team"] = f"team-{n % 2}"
        changes.append(change)
    before = state.inventory
    beat_us = median_us(lambda: state.update_nodes({name: beats.pop()}), runs)
    assert state.inventory is before
    change_us = median_us(lambda: state.update_nodes({name: changes.pop()}), runs)
    assert state.inventory is not before
    nodes = state.inventory.nodes
    t = time.perf_counter()
    NodeIndex.build(nodes)
    rebuild_ms = (time.perf_counter() - t) * 1000
    return beat_us, change_us, rebuild_ms


def check_ratio(big: Path, small: Path) -> tuple[float, float, float, int]:
    manifests = ROOT / "examples" / "manifests"

    def check(path: Path) -> float:
        args = ("-m", "webhook", "check", str(manifests), "--inventory", str(path), "-o", "json")
        return min(child(*args)[0] for _ in range(3))

    load = f"import orjson; orjson.loads(open({str(big)!r}, 'rb').read())"
    plain = min(child("-c", load)[0] for _ in range(3))
    count = sum(1 for _ in manifests.rglob("*.yaml"))
    return check(big), plain, check(small), count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--dir", default=None, help="where to write the inventories")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    policies = load_policy_dir(ROOT / "policies")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        columns: dict[int, dict[str, str]] = {}
        paths = {}
        for size in sizes:
            path = paths[size] = Path(tmp) / f"nodes-{size}.json"
            nbytes = clustergen.write_node_list(str(path), size)
            seconds, rss = load(path)
            col = columns[size] = {
                "inventory file (pretty JSON)": f"{nbytes / 2**20:,.1f} MiB",
                "load: `read_inventory`, fresh process (faster of 2)": f"{seconds:.2f} s",
                "load: peak RSS of that process": f"{rss:,.0f} MiB",
            }
            inventory = read_inventory(str(path))
            gc.collect()
            runs = 2000 if size <= 10_000 else 400
            for row, (warm, cold) in evaluations(inventory, policies, runs).items():
                col[f"evaluate: {row} (warm / cold memo)"] = f"{warm:,.0f} / {cold:,.0f} µs"
            del inventory
            beat, change, rebuild = watch_events(path, 300)
            col["Node watch event: heartbeat (nothing a check reads)"] = f"{beat:,.0f} µs"
            col["Node watch event: a label changes"] = f"{change:,.0f} µs"
            col["(for scale: rebuilding the index from parsed nodes)"] = f"{rebuild:,.0f} ms"
            print(f"{size:,} nodes measured", file=sys.stderr)
        print_table(columns)
        if 10_000 in paths and 10 in paths:
            checked, plain, small, count = check_ratio(paths[10_000], paths[10])
            print(
                f"\n`gpu-admission check` of {count} manifests (examples/manifests), fastest "
                f"of 3: {checked:.2f} s with the 10,000-node inventory; plain orjson load of "
                f"that file {plain:.2f} s + the same check with the 10-node inventory "
                f"{small:.2f} s = {plain + small:.2f} s: **{checked / (plain + small):.2f}x**."
            )


def print_table(columns: dict[int, dict[str, str]]) -> None:
    sizes = list(columns)
    print("| nodes | " + " | ".join(f"{s:,}" for s in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for row in columns[sizes[0]]:
        print(f"| {row} | " + " | ".join(columns[s][row] for s in sizes) + " |")


if __name__ == "__main__":
    main()
