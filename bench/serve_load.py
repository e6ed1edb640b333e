"""Load benchmark of `gpu-admission serve --workers 1` beside a bare starlette+uvicorn endpoint.

Both run on the same stack (uvicorn, httptools, uvloop), serve the same certificate (made
by `gpu-admission certs`) and get the same AdmissionReviews: a realistic GPU Pod with a
MIG request and the memory/SLO labels, which the shipped policies ALLOW. Two modes:

- cached: every request carries the same Pod, as the replicas of one ReplicaSet or Job
  do; after the first, serve answers from its evaluation cache;
- uncached: every request a different Pod (a label and an env value differ), rotating
  through --bodies distinct reviews, more than the evaluation cache holds, so no request
  is a cache hit (the script reads serve's /metrics to show it).

`wrk` drives each endpoint in each mode with 16 connections: a short warmup, then
measured rounds in which the two endpoints take turns (on a shared machine, whatever
else runs then slows both alike). Prints a markdown table: requests/s, p50/p99 latency,
errors, each endpoint's CPU time a request (user + system, from /proc: steadier than
requests/s on a shared machine), and the ratio of serve to the bare endpoint per mode.
--baseline DIR adds serve run from an earlier tree. Not a test: it prints numbers.

    python bench/serve_load.py [--rounds 3] [--duration 5] [--warmup 3] [--connections 16]
                               [--threads 1] [--mode both|cached|uncached] [--bodies 20000]
                               [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]

# One body per line (compact JSON has no raw newline); each wrk thread starts at its own
# offset, so two threads never send the same body at the same time.
LUA = r"""
local bodies = {}
for line in io.lines(os.getenv("BENCH_BODIES")) do bodies[#bodies + 1] = line end
local threads = tonumber(os.getenv("BENCH_THREADS"))
local next_id = 0
local headers = {["Content-Type"] = "application/json"}

setup = function(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
end

init = function(args)
  i = math.floor((id or 0) * #bodies / threads)
end

request = function()
  i = i % #bodies + 1
  return wrk.format("POST", nil, headers, bodies[i])
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, "max_us": %d, ' ..
    '"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency.max, e.connect, e.read, e.write, e.status, e.timeout))
end
"""


def gpu_pod() -> dict[str, Any]:
    """A training Pod as a Job controller would create it: one MIG slice, labelled."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "resnet-train-7f9c8-0",
            "namespace": "ml",
            "generateName": "resnet-train-7f9c8-",
            "labels": {
                "app.kubernetes.io/name": "resnet-train",
                "app.kubernetes.io/part-of": "vision",
                "team": "ml-platform",
                "batch.kubernetes.io/job-name": "resnet-train",
                "gpu-admission.io/peak-memory": "30Gi",
                "gpu-admission.io/slo-class": "batch",
            },
            "annotations": {"kubectl.kubernetes.io/default-container": "trainer"},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "resnet-train",
                    "uid": "5b0c3f7e-9d1a-4a1e-8f0b-2f4d0c1e9a77",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "restartPolicy": "Never",
            "serviceAccountName": "trainer",
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "initContainers": [
                {
                    "name": "fetch-data",
                    "image": "registry.example.com/tools/fetch:1.4",
                    "args": ["--src", "s3://datasets/imagenet", "--dst", "/data"],
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "512Mi"},
                        "limits": {"cpu": "1", "memory": "1Gi"},
                    },
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            "containers": [
                {
                    "name": "trainer",
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "command": ["torchrun", "--nproc_per_node=1", "train.py"],
                    "args": ["--epochs", "90", "--batch-size", "256", "--data", "/data"],
                    "env": [
                        {"name": "NCCL_DEBUG", "value": "WARN"},
                        {"name": "OMP_NUM_THREADS", "value": "4"},
                        {
                            "name": "POD_NAME",
                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                        },
                    ],
                    "ports": [{"name": "metrics", "containerPort": 9090}],
                    "resources": {
                        "requests": {
                            "cpu": "4",
                            "memory": "32Gi",
                            "nvidia.com/mig-3g.40gb": "1",
                        },
                        "limits": {
                            "cpu": "8",
                            "memory": "48Gi",
                            "nvidia.com/mig-3g.40gb": "1",
                        },
                    },
                    "volumeMounts": [
                        {"name": "data", "mountPath": "/data"},
                        {"name": "dshm", "mountPath": "/dev/shm"},
                    ],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "runAsNonRoot": True,
                        "runAsUser": 1000,
                    },
                }
            ],
            "volumes": [
                {"name": "data", "emptyDir": {"sizeLimit": "100Gi"}},
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
            ],
        },
    }


def review(variant: int | None = None) -> dict[str, Any]:
    """The AdmissionReview of gpu_pod(); a variant differs in a label and an env value,
    both of which the evaluation cache keys on (checks read labels and env)."""
    obj = gpu_pod()
    if variant is not None:
        obj["metadata"]["labels"]["bench.gpu-admission.io/variant"] = str(variant)
        obj["spec"]["containers"][0]["env"].append({"name": "RUN_ID", "value": str(variant)})
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "resnet-train-7f9c8-0",
            "namespace": "ml",
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:kube-system:job-controller",
                "uid": "0b6d2f1e-3c4a-4f5e-9a8b-7c6d5e4f3a2b",
                "groups": ["system:serviceaccounts", "system:authenticated"],
            },
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], err: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            if httpx.get(url + "/readyz", verify=False, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url} did not get ready:\n{err.read_text()}")


def check_allowed(url: str, body: bytes) -> None:
    uid = json.loads(body)["request"]["uid"]
    r = httpx.post(
        url + "/validate",
        content=body,
        headers={"content-type": "application/json"},
        verify=False,
        timeout=5,
    )
    r.raise_for_status()
    response = r.json()["response"]
    if response["uid"] != uid or response["allowed"] is not True:
        raise SystemExit(f"{url}: the payload is not allowed: {response}")


def cpu_seconds(pid: int) -> float:
    """The user and system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cache_hits(url: str) -> tuple[float, float]:
    """serve's evaluation cache counters (hit, miss) from its /metrics."""
    text = httpx.get(url + "/metrics", verify=False, timeout=5).text
    values = {}
    for line in text.splitlines():
        if line.startswith("gpu_admission_eval_cache_lookups{"):
            name, value = line.rsplit(" ", 1)
            values[name.split('"')[1]] = float(value)
    return values.get("hit", 0.0), values.get("miss", 0.0)


def wrk(url: str, env: dict[str, str], lua: Path, seconds: int, args: argparse.Namespace) -> Any:
    cmd = [
        "wrk",
        f"-t{args.threads}",
        f"-c{args.connections}",
        f"-d{seconds}s",
        "--timeout",
        "5s",
        "-s",
        str(lua),
        url + "/validate",
    ]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    [line] = [ln for ln in out.splitlines() if ln.startswith("BENCH ")]
    result = json.loads(line.removeprefix("BENCH "))
    result["rps"] = result["requests"] / (result["duration_us"] / 1e6)
    result["errors"] = sum(result[k] for k in ("connect", "read", "write", "status", "timeout"))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=5, help="seconds per round and target")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds, taking turns")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of warmup per target")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads")
    parser.add_argument("--mode", choices=["both", "cached", "uncached"], default="both")
    parser.add_argument("--bodies", type=int, default=20000, help="distinct Pods, uncached")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument(
        "--serve-args", default="", help="extra arguments for serve, e.g. '--eval-cache-size 0'"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="also run serve from this tree's webhook package (e.g. `git archive` of an "
        "earlier commit), taking turns with the others: a before/after in one run",
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk not found (apt-get install -y wrk)")

    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    tls = work / "tls"
    subprocess.run(
        [sys.executable, "-m", "webhook", "certs", "--service", "gpu-admission",
         "--namespace", "gpu-admission-system", "--out", str(tls)],
        check=True, stdout=subprocess.DEVNULL, cwd=ROOT,
    )  # fmt: skip
    modes = ["cached", "uncached"] if args.mode == "both" else [args.mode]
    bodies = {
        "cached": [orjson.dumps(review())],
        "uncached": [orjson.dumps(review(i)) for i in range(args.bodies)],
    }
    for mode in modes:
        (work / f"{mode}.bodies").write_bytes(b"\n".join(bodies[mode]) + b"\n")
    size = len(bodies["cached"][0])
    lua = work / "post.lua"
    lua.write_text(LUA)

    serve_port, bare_port = free_port(), free_port()
    procs: dict[str, subprocess.Popen[bytes]] = {}
    targets = {
        "serve": (
            serve_port,
            [sys.executable, "-m", "webhook", "serve", "--workers", "1",
             "--host", "127.0.0.1", "--port", str(serve_port),
             "--inventory", str(ROOT / "examples/cluster/nodes.json"),
             "--tls-cert-file", str(tls / "tls.crt"), "--tls-key-file", str(tls / "tls.key"),
             *args.serve_args.split()],
        ),
        "bare": (
            bare_port,
            [sys.executable, str(ROOT / "bench/bare_endpoint.py"), "--port", str(bare_port),
             "--cert", str(tls / "tls.crt"), "--key", str(tls / "tls.key")],
        ),
    }  # fmt: skip
    envs: dict[str, dict[str, str]] = {}
    if args.baseline is not None:
        base_port = free_port()
        base_cmd = [*targets["serve"][1]]
        base_cmd[base_cmd.index(str(serve_port))] = str(base_port)
        targets["baseline"] = (base_port, base_cmd)
        envs["baseline"] = {**os.environ, "PYTHONPATH": str(args.baseline.resolve())}
    results: dict[tuple[str, str], list[Any]] = {}
    hits: dict[str, tuple[float, float]] = {}
    try:
        for i, (name, (_port, cmd)) in enumerate(targets.items()):
            # Files, not pipes: the decision log would fill an unread pipe and stall serve.
            procs[name] = subprocess.Popen(
                cmd,
                cwd=args.baseline if name == "baseline" else ROOT,  # `-m` imports from cwd
                env=envs.get(name),
                stdout=(work / f"{i}.out").open("wb"),
                stderr=(work / f"{i}.err").open("wb"),
            )
        for i, (name, (port, _)) in enumerate(targets.items()):
            url = f"https://127.0.0.1:{port}"
            wait_ready(url, procs[name], work / f"{i}.err")
            for mode in modes:
                check_allowed(url, bodies[mode][-1])
        for mode in modes:
            env = {
                **os.environ,
                "BENCH_BODIES": str(work / f"{mode}.bodies"),
                "BENCH_THREADS": str(args.threads),
            }
            urls = {name: f"https://127.0.0.1:{port}" for name, (port, _) in targets.items()}
            for name, url in urls.items():
                print(f"# {name} {mode}: warmup {args.warmup}s", file=sys.stderr)
                wrk(url, env, lua, args.warmup, args)
            before = cache_hits(urls["serve"])
            # Rounds taking turns: on a shared machine, whatever else runs slows both alike.
            for r in range(args.rounds):
                for name, url in urls.items():
                    print(f"# {name} {mode}: round {r + 1}, {args.duration}s", file=sys.stderr)
                    before_cpu = cpu_seconds(procs[name].pid)
                    result = wrk(url, env, lua, args.duration, args)
                    result["cpu_s"] = cpu_seconds(procs[name].pid) - before_cpu
                    results.setdefault((name, mode), []).append(result)
            after = cache_hits(urls["serve"])
            hits[mode] = (after[0] - before[0], after[1] - before[1])
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    report(results, hits, modes, size, args)


def combined(rounds: list[Any]) -> dict[str, float]:
    """Rounds of one target: requests/s over all of them, the median round's latencies."""
    requests = sum(r["requests"] for r in rounds)
    seconds = sum(r["duration_us"] for r in rounds) / 1e6
    return {
        "rps": requests / seconds,
        "p50_us": statistics.median(r["p50_us"] for r in rounds),
        "p99_us": statistics.median(r["p99_us"] for r in rounds),
        "errors": sum(r["errors"] for r in rounds),
        # The endpoint's CPU a request: what it costs whatever else the machine runs.
        "cpu_us": sum(r["cpu_s"] for r in rounds) / max(requests, 1) * 1e6,
    }


def report(
    results: dict[tuple[str, str], list[Any]],
    hits: dict[str, tuple[float, float]],
    modes: list[str],
    size: int,
    args: argparse.Namespace,
) -> None:
    print(
        f"{args.connections} connections, wrk -t{args.threads}, {args.rounds} rounds of "
        f"{args.duration} s per endpoint taking turns after {args.warmup} s warmup, TLS, "
        f"uvicorn+httptools+uvloop, {size} byte AdmissionReview (GPU Pod, MIG 3g.40gb, "
        f"allowed); {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, Python "
        f"{platform.python_version()}\n"
    )
    print(
        "| endpoint | Pods | requests/s | p50 (ms) | p99 (ms) | errors | cache hits | CPU us/req |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    table = {key: combined(rounds) for key, rounds in results.items()}
    for (name, mode), r in table.items():
        label = {
            "serve": "gpu-admission serve --workers 1",
            "baseline": f"serve --workers 1 from {args.baseline}",
        }.get(name, "bare starlette")
        pods = "one Pod" if mode == "cached" else f"{args.bodies} different"
        hit = ""
        if name == "serve":
            h, m = hits[mode]
            hit = f"{h / max(h + m, 1):.0%}"
        print(
            f"| {label} | {pods} | {r['rps']:.0f} | {r['p50_us'] / 1000:.2f} "
            f"| {r['p99_us'] / 1000:.2f} | {r['errors']} | {hit} | {r['cpu_us']:.0f} |"
        )
    print()
    for mode in modes:
        serve, bare = table["serve", mode], table["bare", mode]
        print(f"{mode}: serve / bare requests/s **{serve['rps'] / bare['rps']:.2f}x**")
        if ("baseline", mode) in table:
            base = table["baseline", mode]["rps"] / bare["rps"]
            print(f"{mode}: baseline / bare requests/s {base:.2f}x")
    if "uncached" in modes:
        serve, bare = table["serve", "uncached"], table["bare", "uncached"]
        ok = serve["rps"] >= 0.6 * bare["rps"] and serve["p99_us"] < 10_000
        ok = ok and serve["errors"] == 0
        print(f"aim met: {'yes' if ok else 'no'} (uncached >= 0.6x, p99 < 10 ms, 0 errors)")


if __name__ == "__main__":
    main()
