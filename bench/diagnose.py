"""Benchmark: `gpu-admission diagnose --from DUMP` on a generated 10,000-node cluster
with 100,000 Pods of which 1,000 are Pending (not a test).

The dump is one `kubectl get nodes,pods,events -A -o json` List, pretty-printed:
- the nodes of bench/clustergen.py (H100, A100 MIG mixed, A100 40GB, time-sliced A10G,
  MPS L4 and CPU pools; ~45 labels a node, conditions, images);
- 99,000 bound Pods, kubectl-shaped (managedFields, status, owner references): GPU Pods
  filling every H100 node and some of the others, CPU Pods everywhere, a tenth of them
  Succeeded (holding nothing);
- 1,000 Pending Pods of a handful of workloads, one per failure domain and more for
  the common ones (capacity, typos, placement), with their FailedScheduling events,
  and other events (Scheduled, Pulled) besides.

Measures, each in its own process pinned to one core (peak RSS from `os.wait4`):
`diagnose --from DUMP -o json` (to /dev/null), and a plain streaming read of the same
dump (`read_dump`, every object parsed and dropped) for scale. Prints a markdown table.
Usage: scripts/bench-diagnose [--nodes N] [--pods N] [--pending N] [--dir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import clustergen  # noqa: E402
from audit_bench import measure  # noqa: E402

TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
H100 = "NVIDIA-H100-80GB-HBM3"
STAMP = "2026-12-01T12:00:00Z"
# Pending workloads: (share of the Pending Pods, name, GPU limits, extra spec).
PENDING: list[tuple[float, str, dict[str, str], dict[str, Any]]] = [
    (0.35, "h100-trainer", {"nvidia.com/gpu": "8"},
     {"nodeSelector": {"nvidia.com/gpu.product": H100}, "tolerations": TOLERATE_GPU}),
    (0.20, "mig-typo", {"nvidia.com/mig-1g.10g": "1"}, {"tolerations": TOLERATE_GPU}),
    (0.15, "h100-misspelt", {"nvidia.com/gpu": "1"},
     {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB"}}),
    (0.10, "giant", {"nvidia.com/gpu": "32"}, {"tolerations": TOLERATE_GPU}),
    (0.10, "queued", {"nvidia.com/gpu": "1"},
     {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}),
    (0.10, "a10g-inference", {"nvidia.com/gpu": "1"},
     {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A10G-SHARED"}}),
]  # fmt: skip
MESSAGES = {
    "h100-trainer": "Insufficient nvidia.com/gpu",
    "mig-typo": "Insufficient nvidia.com/mig-1g.10g",
    "h100-misspelt": "node(s) didn't match Pod's node affinity/selector",
    "giant": "Insufficient nvidia.com/gpu",
}


def pod(
    name: str,
    namespace: str,
    owner: str,
    *,
    limits: dict[str, str],
    node: str | None,
    phase: str,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Pod as the API returns it (and kubectl writes it)."""
    rs = owner
    meta = {
        "name": name,
        "generateName": f"{rs}-",
        "namespace": namespace,
        "uid": f"00000000-0000-4000-8000-{abs(hash(name)) % 10**12:012d}",
        "resourceVersion": "100000",
        "creationTimestamp": STAMP,
        "labels": {"app": owner, "pod-template-hash": "7d9f8c6b5"},
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": f"rs-{rs}",
             "controller": True, "blockOwnerDeletion": True}
        ],
        "managedFields": [
            {"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "kube-controller-manager",
             "operation": "Update", "time": STAMP,
             "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}}},
                          "f:spec": {"f:containers": {'k:{"name":"main"}': {".": {}}}}}}
        ],
    }  # fmt: skip
    container = {
        "name": "main",
        "image": f"registry.example.com/{owner}:1.4.2",
        "args": ["--port=8080"],
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        "resources": {
            "limits": {"cpu": "4", "memory": "16Gi", **limits},
            "requests": {"cpu": "2", "memory": "8Gi", **limits},
        },
        "volumeMounts": [
            {"name": "kube-api-access", "readOnly": True,
             "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
        ],
    }  # fmt: skip
    body: dict[str, Any] = {
        "containers": [container],
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "serviceAccountName": "default",
        "priority": 0,
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}
        ],
        **(spec or {}),
    }  # fmt: skip
    if node:
        body["nodeName"] = node
    status: dict[str, Any] = {"phase": phase, "qosClass": "Burstable"}
    if node:
        status |= {
            "hostIP": "10.0.0.1",
            "podIP": "10.1.0.1",
            "startTime": STAMP,
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": STAMP}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {"name": "main", "ready": True, "restartCount": 0, "started": True,
                 "image": container["image"], "imageID": "sha256:" + "ab" * 32,
                 "state": {"running": {"startedAt": STAMP}}}
            ],
        }  # fmt: skip
    else:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "lastTransitionTime": STAMP}
        ]  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body, "status": status}


def bound_pods(nodes: int, count: int, rng: random.Random) -> Any:
    """`count` bound Pods: every H100 node full, GPU Pods on some other GPU nodes, CPU
    Pods everywhere; a tenth Succeeded."""
    made = 0
    for i in range(nodes):
        name, pool = clustergen.node_name(i), clustergen._pool(i)
        if pool == "h100":
            yield pod(f"trainer-{i:05d}", "research", "trainer-7d9f8c6b5",
                      limits={"nvidia.com/gpu": "8"}, node=name, phase="Running",
                      spec={"tolerations": TOLERATE_GPU})  # fmt: skip
            made += 1
        elif pool == "a100-mig" and i % 2:
            yield pod(f"notebook-{i:05d}", "notebooks", "notebook-6c5b4a3f2",
                      limits={"nvidia.com/mig-1g.10gb": "4"}, node=name, phase="Running",
                      spec={"tolerations": TOLERATE_GPU})  # fmt: skip
            made += 1
    i = 0
    while made < count:
        node = clustergen.node_name(rng.randrange(nodes))
        phase = "Succeeded" if i % 10 == 0 else "Running"
        team = f"team-{i % 40}"
        yield pod(f"svc-{i:06d}", team, f"svc-{i % 997}-5f4e3d2c1", limits={},
                  node=node, phase=phase)  # fmt: skip
        made += 1
        i += 1


def pending_pods(count: int) -> Any:
    n = 0
    for share, name, limits, spec in PENDING:
        for k in range(round(count * share)):
            if n >= count:
                return
            yield pod(f"{name}-{k:04d}", "ml", f"{name}-5d4c3b2a1", limits=limits, node=None,
                      phase="Pending", spec=spec)  # fmt: skip
            n += 1


def event(obj: dict[str, Any], reason: str, message: str, i: int) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{i:016x}", "namespace": meta["namespace"]},
        "involvedObject": {"kind": "Pod", "namespace": meta["namespace"], "name": meta["name"],
                           "uid": meta["uid"], "apiVersion": "v1"},
        "reason": reason,
        "message": message,
        "type": "Warning" if reason == "FailedScheduling" else "Normal",
        "eventTime": "2026-12-01T12:00:05.000000Z",
        "reportingComponent": "default-scheduler",
        "action": "Scheduling",
        "source": {},
    }  # fmt: skip


def write_dump(path: Path, *, nodes: int, pods: int, pending: int) -> int:
    rng = random.Random(11)
    with path.open("wb") as out:
        out.write(b'{\n  "apiVersion": "v1",\n  "items": [\n')
        first = True

        def put(obj: dict[str, Any]) -> None:
            nonlocal first
            text = orjson.dumps(obj, option=orjson.OPT_INDENT_2)
            out.write((b"    " if first else b",\n    ") + text.replace(b"\n", b"\n    "))
            first = False

        for _, i in clustergen._names(nodes):
            put(clustergen.node(i, rng))
        waiting = list(pending_pods(pending))
        for obj in bound_pods(nodes, pods - len(waiting), rng):
            put(obj)
        for obj in waiting:
            put(obj)
        for k, obj in enumerate(waiting):
            app = obj["metadata"]["ownerReferences"][0]["name"].rsplit("-", 1)[0]
            if app in MESSAGES:
                text = f"0/{nodes} nodes are available: {nodes} {MESSAGES[app]}. preemption: 0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling."  # noqa: E501
                put(event(obj, "FailedScheduling", text, k))
        for k in range(5_000):  # the rest of an hour of events
            obj = {"metadata": {"name": f"svc-{k:06d}", "namespace": "team-1", "uid": "u"}}
            put(event(obj, "Scheduled", f"Successfully assigned team-1/svc-{k:06d}", k))
        out.write(b'\n  ],\n  "kind": "List",\n  "metadata": {\n    "resourceVersion": ""\n  }\n}')
        return out.tell()


READ_ONLY = (
    "import sys\nfrom webhook.sources.dumps import read_dump\n"
    "n = sum(1 for _ in read_dump(sys.argv[1]))\nprint(n)\n"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--pending", type=int, default=1_000)
    parser.add_argument("--dir", type=Path)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="bench-diagnose-"))
    work.mkdir(parents=True, exist_ok=True)
    dump = work / "cluster.json"
    start = time.perf_counter()
    size = write_dump(dump, nodes=args.nodes, pods=args.pods, pending=args.pending)
    print(
        f"wrote {dump}: {size / 2**20:,.0f} MiB ({args.nodes:,} nodes, {args.pods:,} Pods, "
        f"{args.pending:,} Pending) in {time.perf_counter() - start:.1f} s",
        file=sys.stderr,
    )
    python = sys.executable
    diagnose = [python, "-m", "webhook", "diagnose", "--from", str(dump), "-o", "json"]
    rows = [
        ("`gpu-admission diagnose --from cluster.json -o json`", diagnose),
        ("streaming read of the same dump (parse and drop)", [python, "-c", READ_ONLY, str(dump)]),
    ]
    print("| run | wall s | CPU s | peak RSS MiB |")
    print("|---|---:|---:|---:|")
    for name, cmd in rows:
        best = min((measure(cmd) for _ in range(2)), key=lambda m: m[0])
        print(f"| {name} | {best[0]:.2f} | {best[1]:.2f} | {best[2]:,.0f} |")
    out = subprocess.run(diagnose, capture_output=True, text=True, check=False)
    records = orjson.loads(out.stdout)
    domains: dict[str, int] = {}
    for r in records:
        domains[r["domain"]] = domains.get(r["domain"], 0) + 1
    print(f"\n{len(records):,} records (exit {out.returncode}): {domains}")
    if not args.keep and args.dir is None:
        shutil.rmtree(work)
    elif not args.keep:
        os.remove(dump)


if __name__ == "__main__":
    main()
