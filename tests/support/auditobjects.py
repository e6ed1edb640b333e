"""Workload objects as the API returns them, with uids and ownerReferences, for audit
tests; and `audit_dump`, the report of one dump file as `audit --from` writes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.paths import ROOT
from webhook.commands.audit import Auditor
from webhook.commands.auditdump import audit_dumps
from webhook.reports.audit import render_json
from webhook.sources.files import read_inventory
from webhook.sources.policy_files import load_policy_dir

INVENTORY = ROOT / "examples" / "cluster" / "nodes.json"

GPU_LABELS = {"gpu-admission.io/peak-memory": "4Gi", "gpu-admission.io/slo-class": "batch"}


def pod_spec(*, privileged: bool = False, gpus: int = 0) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "registry.example/app:1"}
    if privileged:
        container["securityContext"] = {"privileged": True}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {"containers": [container]}


def meta(
    name: str, namespace: str | None, uid: str, owner: tuple[str, str, str] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "uid": uid}
    if namespace is not None:
        out["namespace"] = namespace
    if owner is not None:
        kind, owner_name, owner_uid = owner
        out["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": kind,
                "name": owner_name,
                "uid": owner_uid,
                "controller": True,
            }
        ]
    return out


def pod(
    name: str,
    *,
    namespace: str = "team-a",
    owner: tuple[str, str, str] | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    m = meta(name, namespace, f"uid-pod-{namespace}-{name}", owner)
    m["labels"] = labels or {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": m, "spec": pod_spec(**spec)}


def template(*, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": labels or {"app": "x"}}, "spec": pod_spec(**spec)}


def deployment(name: str, *, namespace: str = "team-a", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(name, namespace, f"uid-deploy-{name}"),
        "spec": {"replicas": 3, "template": template(**spec)},
    }


def replicaset(name: str, deploy: str, *, namespace: str = "team-a", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": meta(
            name, namespace, f"uid-rs-{name}", ("Deployment", deploy, f"uid-deploy-{deploy}")
        ),
        "spec": {"replicas": 3, "template": template(**spec)},
    }


def cronjob(name: str, *, namespace: str = "team-a", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": meta(name, namespace, f"uid-cron-{name}"),
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template(**spec)}}},
    }


def job(name: str, cron: str, *, namespace: str = "team-a", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(name, namespace, f"uid-job-{name}", ("CronJob", cron, f"uid-cron-{cron}")),
        "spec": {"template": template(**spec)},
    }


def deployment_family(
    name: str, *, pods: int, namespace: str = "team-a", **spec: Any
) -> list[dict[str, Any]]:
    """A Deployment, its ReplicaSet and `pods` Pods, all with the same pod spec."""
    rs = f"{name}-5d8f7"
    return [
        deployment(name, namespace=namespace, **spec),
        replicaset(rs, name, namespace=namespace, **spec),
        *[
            pod(f"{rs}-{i}", namespace=namespace, owner=("ReplicaSet", rs, f"uid-rs-{rs}"), **spec)
            for i in range(pods)
        ],
    ]


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}


def audit_dump(
    path: Path,
    *,
    workers: int,
    policies: Path = ROOT / "policies",
    namespace: str | None = None,
    prefilter: bool = True,
) -> tuple[str, int]:
    """The JSON report and the exit code (--fail-on deny) of auditing one dump file, cut
    across `workers` processes when it is laid out so (min_bytes=1: any size)."""
    auditor = Auditor(
        load_policy_dir(str(policies)), read_inventory(str(INVENTORY)), prefilter=prefilter
    )
    audit_dumps(
        [str(path)],
        auditor=auditor,
        namespace=namespace,
        stage=lambda _: None,
        tick=lambda _: None,
        workers=workers,
        min_bytes=1,
    )
    report = auditor.report()
    return render_json(report), report.exit_code("deny")
