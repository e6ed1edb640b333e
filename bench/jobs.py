"""Benchmark: whether a 64-rank PyTorchJob can ever be placed at once
(webhook.core.jobs.feasibility.gang_never_fits) on 10,000 and 50,000 generated nodes.

The nodes are bench/clustergen's, with GPU Feature Discovery's NVLink domain label
(`nvidia.com/gpu.clique`) added to the H100 nodes, 18 to a domain (an NVL72 rack's trays).
Each run judges a freshly built workload (as each admission request does: a new pod memo)
against one inventory snapshot; the first call on a new snapshot is timed apart (cold).

Run: .venv/bin/python bench/jobs.py [--runs N] [--sizes 10000,50000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.clustergen import node_list  # noqa: E402
from tests.support.builders import shipped  # noqa: E402
from webhook.core.jobs.feasibility import gang_never_fits  # noqa: E402
from webhook.core.supply.inventory import Inventory  # noqa: E402
from webhook.core.supply.profiles import GENERIC  # noqa: E402
from webhook.core.workloads.kinds import WorkloadView  # noqa: E402
from webhook.core.workloads.targets import workload_of  # noqa: E402

JOB = {"training.kubeflow.org/job-name": "llm"}
PER_CLIQUE = 18


def is_gpu(name: str) -> bool:
    return name == "nvidia.com/gpu"


def nodes(count: int) -> list[dict[str, Any]]:
    items = node_list(count)["items"]
    h100 = 0
    for item in items:
        labels = item["metadata"]["labels"]
        if labels.get("nvidia.com/gpu.product") == "NVIDIA-H100-80GB-HBM3":
            labels["nvidia.com/gpu.clique"] = f"uuid-{h100 // PER_CLIQUE}.1"
            h100 += 1
    return items


def job(topology_key: str) -> dict[str, Any]:
    template = {
        "metadata": {"labels": JOB},
        "spec": {
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "affinity": {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": JOB}, "topologyKey": topology_key}
                    ]
                }
            },
            "containers": [
                {
                    "name": "pytorch",
                    "image": "pytorch",
                    "resources": {"limits": {"nvidia.com/gpu": "8"}},
                }
            ],
        },
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "llm"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template},
                "Worker": {"replicas": 63, "template": template},
            }
        },
    }


def judged(obj: dict[str, Any], inventory: Inventory) -> tuple[float, bool]:
    workload = workload_of(obj, custom=KINDS)
    assert isinstance(workload, WorkloadView)
    t = time.perf_counter_ns()
    found = gang_never_fits(workload, inventory=inventory, profile=GENERIC, is_gpu=is_gpu)
    return (time.perf_counter_ns() - t) / 1e6, found is not None


KINDS = shipped().custom_kinds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--sizes", default="10000,50000")
    args = parser.parse_args()
    for count in (int(s) for s in args.sizes.split(",")):
        items = nodes(count)
        for key in ("topology.kubernetes.io/zone", "nvidia.com/gpu.clique"):
            obj = job(key)
            inventory = Inventory.from_nodes(items)
            cold, never = judged(obj, inventory)
            warm = sorted(judged(obj, inventory)[0] for _ in range(args.runs))
            p99 = warm[len(warm) * 99 // 100]
            print(
                f"{count:>6} nodes, 64 ranks x 8 GPUs in one {key:<28} "
                f"{'never fits' if never else 'may fit':<10} cold {cold:7.3f} ms  "
                f"median {statistics.median(warm):6.3f} ms  p99 {p99:6.3f} ms"
            )


if __name__ == "__main__":
    main()
