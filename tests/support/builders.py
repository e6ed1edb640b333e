"""Small builders for Node and Pod objects, and a way to run them through the engine.

The check tests describe each case as a table row; these keep the rows short. Objects
are plain dicts, as the engine sees them at admission.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from tests.support.paths import ROOT
from webhook.core.dra.model import DraSupply
from webhook.core.engine.check import Check, CheckParams, Rule
from webhook.core.engine.context import Context
from webhook.core.engine.evaluation import Decision, Subject, evaluate
from webhook.core.engine.policy import Match, Policy, PolicySet
from webhook.core.engine.reads import Reads
from webhook.core.kit.violation import Violation
from webhook.core.supply.inventory import Inventory
from webhook.core.workloads.pods import PodView
from webhook.core.workloads.targets import TargetKind
from webhook.sources.policy_files import load_policy_dir, load_policy_files

POLICIES = ROOT / "policies"
EXAMPLES = ROOT / "examples"

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TOLERATE_GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
LABELS = {"gpu-admission.io/peak-memory": "4Gi", "gpu-admission.io/slo-class": "batch"}


def node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    allocatable: dict[str, Any] | None = None,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", **(allocatable or {})}},
    }
    if taints:
        obj["spec"]["taints"] = taints
    return obj


def mig_node(name: str = "a100-mig") -> dict[str, Any]:
    """A100 80GB, mixed strategy; the 2g.20gb profile has no memory label (catalog)."""
    labels = {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig-1g.10gb.memory": "9856",
        "nvidia.com/mig-3g.40gb.memory": "40192",
    }
    allocatable = {
        "nvidia.com/gpu": "0",
        "nvidia.com/mig-1g.10gb": "7",
        "nvidia.com/mig-2g.20gb": "3",
        "nvidia.com/mig-3g.40gb": "2",
    }
    return node(name, labels=labels, allocatable=allocatable)


def h100_node(name: str) -> dict[str, Any]:
    labels = {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.replicas": "1",
    }
    return node(name, labels=labels, taints=[GPU_TAINT], allocatable={"nvidia.com/gpu": "8"})


def time_sliced_node(name: str = "a10g-ts") -> dict[str, Any]:
    labels = {
        "nvidia.com/gpu.product": "NVIDIA-A10G-SHARED",
        "nvidia.com/gpu.memory": "23028",
        "nvidia.com/gpu.sharing-strategy": "time-slicing",
        "nvidia.com/gpu.replicas": "4",
    }
    return node(name, labels=labels, allocatable={"nvidia.com/gpu": "16"})


def cluster_nodes() -> list[dict[str, Any]]:
    return [mig_node(), h100_node("h100-a"), h100_node("h100-b"), time_sliced_node(), node("cpu")]


@cache
def cluster() -> Inventory:
    """MIG node, two tainted H100 nodes, a time-sliced node and a CPU node."""
    return Inventory.from_nodes(cluster_nodes())


def dra_inventory(*nodes: list[dict[str, Any]], driver: str = "gpu.nvidia.com") -> Inventory:
    """No Nodes; one DeviceClass named for `driver` (selecting its devices) and a
    ResourceSlice per entry of `nodes`, on node n0, n1, ... with those devices."""
    supply = DraSupply().with_object(
        {
            "kind": "DeviceClass",
            "metadata": {"name": driver},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]},
        }
    )
    for i, devices in enumerate(nodes):
        supply = supply.with_object(
            {
                "kind": "ResourceSlice",
                "metadata": {"name": f"n{i}-gpu"},
                "spec": {"driver": driver, "nodeName": f"n{i}", "pool": {"name": f"n{i}"},
                         "devices": devices},
            }
        )  # fmt: skip
    return Inventory.from_nodes([]).with_dra(supply)


def container(
    name: str = "main",
    *,
    limits: dict[str, Any] | None = None,
    requests: dict[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "registry.example.com/app:1"}
    resources = {k: v for k, v in (("limits", limits), ("requests", requests)) if v is not None}
    if resources:
        c["resources"] = resources
    c.update(fields)
    return c


def gpu(resource: str = "nvidia.com/gpu", count: Any = 1, name: str = "main") -> dict[str, Any]:
    return container(name, limits={resource: count})


def pod(
    *containers: dict[str, Any],
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    name: str = "p",
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(LABELS if labels is None else labels)}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": list(containers) or [container()], **spec},
    }


def template_of(pod_obj: dict[str, Any]) -> dict[str, Any]:
    """A pod's metadata (labels, annotations) and spec as a PodTemplateSpec."""
    meta = {k: v for k, v in pod_obj["metadata"].items() if k in ("labels", "annotations")}
    return {"metadata": meta, "spec": pod_obj["spec"]}


@cache
def shipped() -> PolicySet:
    return load_policy_dir(POLICIES)


@cache
def only(policy: str) -> PolicySet:
    """One shipped policy (with the shipped workload kinds), so findings are its alone."""
    return load_policy_files([POLICIES / f"{policy}.yaml", POLICIES / "workload-kinds.yaml"])


def policy_file(tmp_path: Path, name: str, text: str) -> PolicySet:
    """A policy set from YAML text written to tmp_path (plus the shipped workload kinds)."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return load_policy_files([path, POLICIES / "workload-kinds.yaml"])


def run(
    policy_set: PolicySet,
    obj: dict[str, Any],
    inventory: Inventory | None = None,
    *,
    namespace: str = "default",
) -> Decision:
    return evaluate(policy_set, Subject(obj, namespace), inventory or Inventory.unknown())


def rules(decision: Decision) -> list[str]:
    return [f.rule for f in decision.findings]


def messages(decision: Decision) -> list[str]:
    return [f.message for f in decision.findings]


RAISE_LABEL = "test.gpu-admission.io/raise"  # a pod with this label breaks BROKEN_CHECK


def _raise_on_label(pod: PodView, *, context: Context, params: Any) -> Iterator[Violation]:
    """A bug as a check would have one, after it has reported something: a KeyError on a
    spec it did not expect, or (the label's value, when set) a ValueError quoting input."""
    if RAISE_LABEL not in pod.labels:
        return
    yield Violation("partial", pod.path, "reported before the check raised")
    if pod.labels[RAISE_LABEL]:
        raise ValueError(pod.labels[RAISE_LABEL])
    raise KeyError("spec")


def _reads_labels(params: Any) -> dict[TargetKind, Reads]:
    return {"pod": Reads(every_field=True)}  # a label, which is no trigger: filter nothing


BROKEN_CHECK = Check(
    name="broken",
    params=CheckParams,
    run=_raise_on_label,
    rules={"partial": Rule("A finding of a check that then raised: never reported.")},
    judges=_reads_labels,
)


def with_broken_check(policy_set: PolicySet, *, name: str = "broken") -> PolicySet:
    """`policy_set` plus a deny policy whose check raises on pods labelled RAISE_LABEL:
    what every shell must report as an internal error, never as an allow."""
    broken = Policy(
        name=name,
        action="deny",
        match=Match(),
        check=BROKEN_CHECK,
        params=CheckParams(),
        message_prefix="",
        description="",
        source="tests/support/builders.py",
    )
    return PolicySet((*policy_set.policies, broken), policy_set.custom_kinds, policy_set.digest)
