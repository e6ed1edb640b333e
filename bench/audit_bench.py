"""Audit throughput and peak memory on a generated `kubectl get pods -A -o json` dump.

Writes a dump of N Pods (default 100,000) as kubectl writes it (a pretty-printed
`List`, managedFields and status included), then measures in separate processes,
each pinned to one CPU core:

- `gpu-admission audit --from DUMP --inventory NODES -o json` (output to /dev/null) on
  every core (a big dump is cut into one byte range per CPU), and pinned to one,
- a plain `orjson.loads` of the same file, for scale,

and prints seconds, Pods/s and peak RSS (from `os.wait4`: the child's rusage, its
workers included): the best of --runs runs, and the median wall time. The dump is
flushed to disk (`os.sync`) before the first run: the kernel writing back 700 MiB of
dirty pages took a core from the first audit (2.30 s against 1.85 s). With --dir and
--keep, a dump already there for the same --pods is used again.
Usage: scripts/bench-audit [--pods N] [--runs R] [--dir DIR] [--keep]
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
from typing import Any

import orjson

NAMESPACES = 40
GPU_NODE_LABELS = {
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
    "nvidia.com/gpu.memory": "81920",
    "nvidia.com/gpu.count": "8",
}


def node(name: str, labels: dict[str, str], allocatable: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", **allocatable}},
    }


def nodes() -> dict[str, Any]:
    items = [node(f"gpu-a100-{i}", GPU_NODE_LABELS, {"nvidia.com/gpu": "8"}) for i in range(8)]
    items += [
        node(
            f"gpu-mig-{i}",
            {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/mig.strategy": "mixed"},
            {"nvidia.com/mig-1g.10gb": "7"},
        )
        for i in range(4)
    ]
    items += [node(f"cpu-{i}", {}, {}) for i in range(20)]
    return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {}}


def pod(i: int) -> dict[str, Any]:
    """A Pod as the API returns it; every 5th asks for a GPU, every 50th has a finding."""
    ns = f"team-{i % NAMESPACES}"
    app = f"app-{i % 997}"
    rs = f"{app}-7d9f8c6b5"
    labels = {"app": app, "pod-template-hash": "7d9f8c6b5"}
    resources: dict[str, Any] = {
        "limits": {"cpu": "2", "memory": "4Gi"},
        "requests": {"cpu": "500m", "memory": "1Gi"},
    }
    if i % 5 == 0:
        labels["gpu-admission.io/slo-class"] = "batch"
        labels["gpu-admission.io/peak-memory"] = "30Gi" if i % 50 else "90Gi"
        resources["limits"]["nvidia.com/gpu"] = "1"
    meta = {
        "name": f"{rs}-{i:06x}",
        "generateName": f"{rs}-",
        "namespace": ns,
        "uid": f"00000000-0000-4000-8000-{i:012d}",
        "resourceVersion": str(100000 + i),
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": labels,
        "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"},
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": rs,
                "uid": f"11111111-0000-4000-8000-{i % 997:012d}",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
        "managedFields": [
            {
                "apiVersion": "v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}}},
                    "f:spec": {"f:containers": {'k:{"name":"main"}': {".": {}, "f:image": {}}}},
                },
                "manager": "kube-controller-manager",
                "operation": "Update",
                "time": "2026-01-01T00:00:00Z",
            }
        ],
    }
    spec = {
        "containers": [
            {
                "name": "main",
                "image": f"registry.example.com/{app}:1.{i % 13}",
                "args": ["--port=8080", "--log-level=info"],
                "env": [
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
                ],
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": resources,
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
                "volumeMounts": [
                    {
                        "name": "kube-api-access-x7k2p",
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        "readOnly": True,
                    }
                ],
            }
        ],
        "nodeName": f"cpu-{i % 20}",
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "serviceAccountName": "default",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
        ],
        "volumes": [
            {
                "name": "kube-api-access-x7k2p",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt"}]}},
                    ]
                },
            }
        ],
    }
    status = {
        "phase": "Running",
        "conditions": [
            {"type": t, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "containerStatuses": [
            {
                "name": "main",
                "ready": True,
                "restartCount": 0,
                "image": f"registry.example.com/{app}:1.{i % 13}",
                "imageID": "registry.example.com/app@sha256:" + "ab" * 32,
                "containerID": "containerd://" + f"{i:064x}",
                "started": True,
                "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
            }
        ],
        "hostIP": "10.0.0.1",
        "podIP": f"10.1.{i // 250 % 250}.{i % 250}",
        "qosClass": "Burstable",
        "startTime": "2026-01-01T00:00:00Z",
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def write_dump(path: Path, count: int) -> None:
    """The List exactly as `kubectl get pods -A -o json` lays it out (4-space indent)."""
    with path.open("w") as out:
        out.write('{\n    "apiVersion": "v1",\n    "items": [\n')
        for i in range(count):
            text = orjson.dumps(pod(i), option=orjson.OPT_INDENT_2).decode()
            text = "\n".join("        " + line.replace("  ", "    ") for line in text.split("\n"))
            out.write(text + (",\n" if i < count - 1 else "\n"))
        out.write('    ],\n    "kind": "List",\n    "metadata": {\n')
        out.write('        "resourceVersion": ""\n    }\n}\n')


def measure(cmd: list[str], *, pinned: bool = True) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of `cmd`, pinned to one core or not."""
    start = time.perf_counter()
    pin = _one_core if pinned else None
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, preexec_fn=pin)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited with {proc.returncode}")
    cpu = usage.ru_utime + usage.ru_stime
    return elapsed, cpu, usage.ru_maxrss / 1024  # Linux reports KiB


def _one_core() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3, help="runs of each audit (best shown)")
    parser.add_argument("--dir", type=Path, help="where to write the dump (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    args = parser.parse_args()
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="bench-audit-"))
    workdir.mkdir(parents=True, exist_ok=True)
    dump, inventory = workdir / "pods.json", workdir / "nodes.json"
    stamp = workdir / "pods.count"  # the --pods the kept dump was written for
    if not (args.keep and dump.exists() and stamp.exists() and stamp.read_text() == str(args.pods)):
        stamp.unlink(missing_ok=True)
        write_dump(dump, args.pods)
        stamp.write_text(str(args.pods))
    inventory.write_bytes(orjson.dumps(nodes(), option=orjson.OPT_INDENT_2))
    os.sync()
    size = dump.stat().st_size / 2**20
    print(f"dump: {args.pods:,} Pods, {size:,.0f} MiB ({dump})")
    python = sys.executable
    audit = [python, "-m", "webhook", "audit", "--from", str(dump), "--inventory", str(inventory)]
    parse = [python, "-c", f"import orjson; orjson.loads(open({str(dump)!r}, 'rb').read())"]
    cases = [
        (f"audit, {len(os.sched_getaffinity(0))} CPUs", [*audit, "-o", "json"], False, args.runs),
        ("audit, one core", [*audit, "-o", "json"], True, args.runs),
        ("plain orjson.loads", parse, True, 1),
    ]
    print(f"{'':20} {'wall s':>7} {'Pods/s':>9} {'CPU s':>7} {'Pods/CPU-s':>10} {'peak RSS':>10}")
    for name, cmd, pinned, runs in cases:
        results = [measure(cmd, pinned=pinned) for _ in range(runs)]
        wall, cpu, rss = min(results)
        median = statistics.median(r[0] for r in results)
        print(
            f"{name:20} {wall:7.2f} {args.pods / wall:9,.0f} {cpu:7.2f} "
            f"{args.pods / cpu:10,.0f} {rss:7,.0f} MiB"
            + (f"  (best of {runs}; median {median:.2f} s)" if runs > 1 else "")
        )
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if not args.keep and args.dir is None:
        dump.unlink()
        inventory.unlink()
        stamp.unlink()
        workdir.rmdir()


if __name__ == "__main__":
    main()
