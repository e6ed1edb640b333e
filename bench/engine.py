"""Benchmark: evaluation cost per pod spec, and `check` throughput beside a plain YAML parse.

Run with scripts/bench. Prints medians; this is a benchmark, not a test.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repository: tests.support and this checkout's webhook

from tests.support.reviews import deployment, pod  # noqa: E402
from webhook.commands.check import check_paths  # noqa: E402
from webhook.core.engine.evaluation import Subject, evaluate  # noqa: E402
from webhook.sources.files import read_inventory  # noqa: E402
from webhook.sources.policy_files import load_policy_dir  # noqa: E402

FOUR_POLICIES = ("gpu-device-injection", "gpu-resource-names", "gpu-memory-fit", "gpu-slo-class")


def median_us(fn, *, runs: int = 20_000) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(runs):
        t = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t)
    return statistics.median(samples) / 1000


def manifests(directory: Path, count: int) -> None:
    objs = [
        pod(name="p", limits={"nvidia.com/mig-3g.40gb": 1}),
        deployment(pod(limits={"nvidia.com/mig-1g.10gb": 1})),
        pod(
            name="bad",
            limits={"nvidia.com/mig-1g.10g": 1},
            container={"securityContext": {"privileged": True}},
        ),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "s"},
            "spec": {"ports": [{"port": 80}]},
        },
    ]
    for i in range(count):
        obj = objs[i % len(objs)]
        (directory / f"m{i:05d}.yaml").write_text(yaml.safe_dump(obj, sort_keys=False))


def main() -> None:
    policy_set = load_policy_dir(ROOT / "policies")
    inventory = read_inventory(str(ROOT / "examples/cluster/nodes.json"))
    gpu_pod = pod(
        name="train",
        limits={"nvidia.com/mig-3g.40gb": 1},
        container={
            "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        },
        spec={
            "volumes": [{"name": "data", "emptyDir": {}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        },
    )
    deploy = deployment(gpu_pod)
    # The four device-plugin policies (the aim of 20 us), then every shipped policy.
    four = replace(
        policy_set, policies=tuple(p for p in policy_set.policies if p.name in FOUR_POLICIES)
    )
    assert len(four.policies) == len(FOUR_POLICIES)
    for label, policies in (
        ("4 device-plugin", four),
        (f"all {len(policy_set.policies)}", policy_set),
    ):
        for name, obj in (("GPU Pod", gpu_pod), ("GPU Deployment", deploy)):
            subject = Subject(obj, "ml")
            assert not evaluate(policies, subject, inventory).findings
            us = median_us(lambda s=subject, ps=policies: evaluate(ps, s, inventory))
            print(f"evaluate, {label} shipped policies, {name}: median {us:.1f} us")

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        manifests(directory, 2000)
        files = sorted(str(p) for p in directory.iterdir())
        t = time.perf_counter()
        for f in files:
            list(yaml.load_all(Path(f).read_bytes(), Loader=yaml.CSafeLoader))
        parse = time.perf_counter() - t
        t = time.perf_counter()
        run = check_paths([tmp], policy_set=policy_set, inventory=inventory)
        check = time.perf_counter() - t
    print(
        f"plain YAML parse (libyaml) of 2000 manifests: {parse:.3f} s, "
        f"{2000 / parse:,.0f} objects/s"
    )
    print(
        f"check of the same 2000 manifests: {check:.3f} s, {run.objects / check:,.0f} objects/s "
        f"({check / parse:.2f}x the plain parse; {len(run.results)} findings)"
    )


if __name__ == "__main__":
    main()
