"""Which job a running or Pending Pod is a rank of, read from what its operator wrote on it.

A job's Pods are found the way its own controller and gang scheduler find them: by the
labels the operator sets on every Pod it makes (data: the `podLabels` of a kind's
WorkloadKinds `job:` block, each cited there), else by the gang the Pod names (a
PodGroup, a Kueue pod group, a Workload). The values of those labels, in the Pod's
namespace, name one gang; `role` and `index` name the rank in it. A Pod that names no
job is no rank.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.jobs.model import PODGROUP_ANNOTATIONS, PODGROUP_LABELS
from webhook.core.kit.dicts import as_dict, as_list
from webhook.core.workloads.shapes import KindShape, PodLabels

# Kueue's plain-Pod groups: the Pods of one group are admitted as one Workload
# (kubernetes-sigs/kueue v0.19.2 pkg/controller/jobs/pod/constants/constants.go
# GroupNameLabel; the group's size is the `kueue.x-k8s.io/pod-group-total-count`
# annotation).
KUEUE_POD_GROUP = "kueue.x-k8s.io/pod-group-name"
_MAX_VALUE = 253  # a label value is at most 63 characters, a name 253: longer is noise


@dataclass(frozen=True, slots=True)
class Identity:
    """How Pods name their job: label (or annotation) keys whose values name one gang."""

    name: str  # what the gang is called in a message: "JobSet", "PodGroup"
    job: tuple[str, ...]
    role: str | None = None
    index: tuple[str, ...] = ()
    annotation: bool = False  # the keys are annotations (no `kubectl -l` selects them)


@dataclass(frozen=True, slots=True)
class Member:
    """One rank: the job it belongs to, and its role and index there."""

    key: tuple[str, ...]  # (namespace, the identity's keys and values): one gang
    job: str  # how a person names it: "PyTorchJob ml/train" or "PodGroup ml/pg-1"
    selector: str  # `kubectl get pods -n NS -l <selector>` lists the gang ("" if none)
    role: str
    index: str

    @property
    def rank(self) -> str:
        """`worker 3`, `3`, or "" when the Pod says neither."""
        return " ".join(p for p in (self.role, self.index) if p)


# The gang mechanisms every kind shares (webhook.core.jobs.model cites each).
MECHANISMS: tuple[Identity, ...] = (
    Identity("Kueue pod group", (KUEUE_POD_GROUP,)),
    *(Identity("PodGroup", (key,)) for key in PODGROUP_LABELS),
    *(Identity("PodGroup", (key,), annotation=True) for key in PODGROUP_ANNOTATIONS),
)


def identities(kinds: Iterable[KindShape]) -> tuple[Identity, ...]:
    """The kinds' own Pod labels first (a PyTorchJob's Pods also carry its PodGroup's
    annotation: the job names them better), then the shared mechanisms. Kinds that
    label alike (the training-operator's five) are one identity, named by the Pod's
    controller."""
    kinds_of: dict[PodLabels, list[str]] = {}
    for shape in kinds:
        labels = shape.job.pod_labels if shape.job is not None else None
        if labels is not None:
            kinds_of.setdefault(labels, []).append(shape.kind)
    own = [
        Identity(names[0] if len(names) == 1 else "job", labels.job, labels.role, labels.index)
        for labels, names in kinds_of.items()
    ]
    return (*own, *MECHANISMS)


def member_of(
    meta: Mapping[str, Any], spec: Mapping[str, Any], *, known: tuple[Identity, ...]
) -> Member | None:
    """The job a Pod is a rank of, or None."""
    labels = as_dict(meta.get("labels"))
    annotations = as_dict(meta.get("annotations"))
    namespace = str(meta.get("namespace") or "default")
    matched: tuple[Identity, list[str]] | None = None
    for identity in known:
        where = annotations if identity.annotation else labels
        values = [where.get(k) for k in identity.job]
        if not all(_value(v) for v in values):
            continue
        if matched is None:
            matched = (identity, [str(v) for v in values])
        # kinds that name the job alike may name the role apart (the training-operator's
        # replica-type, mpi-operator's job-role): the one whose role key is there
        if identity.role is None or identity.role in labels:
            matched = (identity, [str(v) for v in values])
            break
    if matched is not None:
        return _member(matched[0], namespace, matched[1], labels, meta)
    group = as_dict(spec.get("schedulingGroup")).get("podGroupName")
    # The Workload API since 1.36: the Pod names its PodGroup (webhook.core.jobs.model).
    if _value(group):
        return Member(
            (namespace, "schedulingGroup", str(group)), f"PodGroup {namespace}/{group}", "", "", ""
        )
    ref = as_dict(spec.get("workloadRef"))
    # The Workload API (Kubernetes 1.35+, KEP-4671): the Pod's pod group in a Workload.
    if _value(ref.get("name")):
        group = str(ref.get("podGroup") or "")
        replica = str(ref.get("podGroupReplicaKey") or "")
        name = "/".join(p for p in (str(ref["name"]), group, replica) if p)
        return Member((namespace, "workloadRef", name), f"Workload {namespace}/{name}", "", "", "")
    return None


def _member(
    identity: Identity,
    namespace: str,
    values: list[str],
    labels: Mapping[str, Any],
    meta: Mapping[str, Any],
) -> Member:
    key = (namespace, *identity.job, *values)
    selector = (
        ""
        if identity.annotation
        else ",".join(f"{k}={v}" for k, v in zip(identity.job, values, strict=True))
    )
    role = labels.get(identity.role) if identity.role else None
    index = "/".join(str(labels[k]) for k in identity.index if _value(labels.get(k)))
    return Member(
        key,
        _shown(identity, namespace, values, meta),
        selector,
        str(role) if _value(role) else "",
        index,
    )


def _shown(identity: Identity, namespace: str, values: list[str], meta: Mapping[str, Any]) -> str:
    """`PyTorchJob ml/train`: the controller's kind where it is the job (a training
    operator's Pod), else the identity's name with the label values."""
    name = "-".join(values)
    for ref in map(as_dict, as_list(meta.get("ownerReferences"))):
        if ref.get("controller") is True and ref.get("name") == values[0]:
            return f"{ref.get('kind')} {namespace}/{name}"
    if len(values) > 1:  # a LeaderWorkerSet's group: `LeaderWorkerSet ml/vllm group 0`
        return f"{identity.name} {namespace}/{values[0]} group {'-'.join(values[1:])}"
    return f"{identity.name} {namespace}/{name}"


def _value(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= _MAX_VALUE
