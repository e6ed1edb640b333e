"""A Pending rank diagnosed as part of its job: the rank map, which ranks wait and why,
whether the job fits at once (ever, now), and whether placed ranks hold GPUs meanwhile.

The job's Pods are found by the labels their operator wrote (webhook.core.jobs.members).
Each Pending rank also has its own record (webhook.core.diagnosis.classify); the job's
record adds what no single Pod shows: the scheduler places ranks one at a time, so a
job whose ranks each fit alone may never fit whole, and without a gang mechanism the
ranks it did place hold their GPUs while the rest wait. Every record names its evidence:
the nodes, the Pods that hold the room, the scheduler's words, and the `kubectl`
commands that show each fact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from webhook.core.diagnosis.cluster import ClusterFacts
from webhook.core.diagnosis.evidence import Domain, Evidence, Fact
from webhook.core.diagnosis.facts import PendingPod
from webhook.core.diagnosis.gangroom import RoleRoom, never_fits, room_now
from webhook.core.diagnosis.placement import placement
from webhook.core.jobs.members import Member
from webhook.core.jobs.model import Reading, pod_gangs
from webhook.core.jobs.running import nics_of
from webhook.core.kit.text import listing, plural
from webhook.core.supply.profiles import ClusterProfile
from webhook.core.workloads.pods import PodView
from webhook.core.workloads.units import shown

Fit = Literal["never", "not-now", "ranks-stuck", "fits-now"]
SHOWN_RANKS = 64  # rows of the rank map; a larger job's rows are counted past it


@dataclass(frozen=True, slots=True)
class Placed:
    """A bound rank: where it runs and what it holds."""

    pod: str
    node: str
    gpus: tuple[tuple[str, int], ...]
    nics: tuple[str, ...]
    member: Member


@dataclass(frozen=True, slots=True)
class RankRow:
    """One row of the rank map."""

    rank: str
    pod: str
    node: str  # "" while it waits
    product: str  # the node's GPU product label, "" if unknown
    gpus: str  # "8 nvidia.com/gpu"
    nics: tuple[str, ...]  # RDMA resources and Multus networks it asks for
    state: Literal["placed", "waiting"]
    domain: str  # why it waits (its own record's domain), "" when placed


@dataclass
class JobPods:
    """What diagnose gathered of one job: its placed and waiting ranks, and per role
    one Pod's spec with the count of its Pods (for the gang proof)."""

    member: Member
    placed: list[Placed] = field(default_factory=list)
    waiting: list[tuple[Member, PendingPod]] = field(default_factory=list)
    roles: dict[str, tuple[PodView, int]] = field(default_factory=dict)

    def count(self, role: str, view: PodView | None) -> None:
        held = self.roles.get(role)
        if held is not None:
            self.roles[role] = (held[0], held[1] + 1)
        elif view is not None:
            self.roles[role] = (view, 1)


@dataclass(frozen=True, slots=True)
class JobRecord:
    time: datetime | None
    job: str  # "PyTorchJob ml/train"
    namespace: str
    selector: str  # kubectl -l, "" when the Pods are named by annotation
    gang: str  # the gang mechanism the ranks carry, "" for none
    fit: Fit
    verdict: str
    next_action: str
    ranks: tuple[RankRow, ...]
    placed: int
    waiting: int
    held: Mapping[str, int]  # GPUs the placed ranks hold, by resource
    facts: tuple[Fact, ...]
    commands: tuple[str, ...]

    @property
    def stuck(self) -> bool:
        return self.fit != "fits-now"


def rank_domain(own: Domain, fit: Fit) -> Domain:
    """A waiting rank's domain within its job: one that fits alone while the job does
    not fit at once is `gang-does-not-fit`."""
    return "gang-does-not-fit" if own == "not-stuck" and fit in ("never", "not-now") else own


def job_record(
    job: JobPods,
    *,
    cluster: ClusterFacts,
    records: Mapping[str, Evidence],
    reading: Reading,
    profile: ClusterProfile,
    now: datetime | None,
) -> JobRecord:
    member, namespace = job.member, job.member.key[0]
    waiting = [p for _, p in job.waiting]
    gang = _gang(waiting, reading)
    held: dict[str, int] = {}
    for p in job.placed:
        for resource, n in p.gpus:
            held[resource] = held.get(resource, 0) + n
    never = never_fits(job.roles, cluster=cluster, profile=profile, gpus=reading.gpus)
    rooms = _rooms(job, cluster)
    stuck_alone = [p.ref for p in waiting if records[p.ref].stuck]
    if never is not None:
        fit: Fit = "never"
        why = f"The job can never be placed at once: {never.message}"
    elif any(r.room < r.waiting for r in rooms):
        fit = "not-now"
        why = "The job does not fit at once now: "
        why += "; ".join(_short(r) for r in rooms if r.room < r.waiting) + "."
    elif stuck_alone:
        fit = "ranks-stuck"
        why = (
            f"{plural(len(stuck_alone), 'waiting rank')} cannot be placed (see each Pod's record)."
        )
    else:
        fit = "fits-now"
        why = "The waiting ranks fit the nodes' free room now."
    total = len(waiting) + len(job.placed)
    verdict = f"{len(waiting)} of {total} ranks {'waits' if len(waiting) == 1 else 'wait'}. {why}"
    if job.placed and held:
        nodes = sorted({p.node for p in job.placed})
        verdict += (
            f" The {plural(len(job.placed), 'placed rank')} hold {_amounts(held)} on "
            f"{listing(nodes, 3)} while they wait"
        )
        verdict += (
            f" ({gang})."
            if gang
            else (
                ", with no gang mechanism (no Kueue queue, PodGroup, gang scheduler or "
                "Workload API pod group): the scheduler places each rank alone."
            )
        )
    return JobRecord(
        time=now,
        job=member.job,
        namespace=namespace,
        selector=member.selector,
        gang=gang,
        fit=fit,
        verdict=verdict,
        next_action=_next(fit, job, gang, rooms),
        ranks=_rank_map(job, cluster, records, reading, fit),
        placed=len(job.placed),
        waiting=len(waiting),
        held=held,
        facts=tuple(_facts(job, cluster, rooms, records)),
        commands=_commands(job, rooms),
    )


def _gang(waiting: list[PendingPod], reading: Reading) -> str:
    found = [g.what for g in pod_gangs(waiting[0].view, reading)] if waiting[0].view else []
    return f"gang: {found[0]}" if found else ""


def _rooms(job: JobPods, cluster: ClusterFacts) -> list[RoleRoom]:
    taken = frozenset(p.node for p in job.placed)
    by_role: dict[str, list[PendingPod]] = {}
    for member, pod in job.waiting:
        by_role.setdefault(member.role, []).append(pod)
    return [room_now(role, pods, cluster=cluster, taken=taken) for role, pods in by_role.items()]


def _short(room: RoleRoom) -> str:
    who = f"role {room.role}" if room.role else "the job"
    return (
        f"{who} has {plural(room.waiting, 'waiting rank')} of {_want(room)} and the nodes "
        f"it may use have room for {room.room} now"
    )


def _want(room: RoleRoom) -> str:
    gpus = [(r, n) for r, n in room.want.items() if "/" in r]
    return " and ".join(f"{shown(r, n)} {r}" for r, n in gpus) or "its requests"


def _amounts(held: Mapping[str, int]) -> str:
    return " and ".join(f"{n} {r}" for r, n in sorted(held.items()))


def _next(fit: Fit, job: JobPods, gang: str, rooms: list[RoleRoom]) -> str:
    if fit == "never":
        text = (
            "shrink the job (fewer ranks or GPUs per rank) to what the nodes can hold, or add nodes"
        )
    elif fit == "not-now":
        text = "wait for the Pods that hold the candidate nodes (facts), or add nodes"
    elif fit == "ranks-stuck":
        text = "fix what each waiting rank's own record names"
    else:
        return "nothing in the GPU stack: the scheduler retries the waiting ranks"
    if job.placed and not gang:
        text += (
            "; the placed ranks hold their GPUs meanwhile: suspend or delete the job to free "
            "them, and queue it (Kueue) or give it a PodGroup so its ranks start together"
        )
    return text


def _rank_map(
    job: JobPods,
    cluster: ClusterFacts,
    records: Mapping[str, Evidence],
    reading: Reading,
    fit: Fit,
) -> tuple[RankRow, ...]:
    labels = {f.name: f.labels for f in cluster.nodes}
    rows = [
        RankRow(
            p.member.rank,
            p.pod,
            p.node,
            _product(labels.get(p.node, {}), reading),
            _amounts(dict(p.gpus)),
            p.nics,
            "placed",
            "",
        )
        for p in job.placed
    ]
    for member, pod in job.waiting:
        gpus = {r: n for r, n in pod.want.items() if reading.gpus.is_gpu(r)}
        rows.append(
            RankRow(
                member.rank,
                pod.ref,
                "",
                "",
                _amounts(gpus),
                nics_of(pod.view, reading),
                "waiting",
                rank_domain(records[pod.ref].domain, fit),
            )
        )
    rows.sort(key=lambda r: (_order(r.rank), r.pod))
    return tuple(rows[:SHOWN_RANKS])


def _order(rank: str) -> tuple[str, int, str]:
    role, _, index = rank.rpartition(" ")
    last = index.rsplit("/", 1)[-1]
    return (role, int(last) if last.isdigit() else -1, index)


def _product(labels: Mapping[str, str], reading: Reading) -> str:
    return next((labels[k] for k in reading.product_labels if k in labels), "")


def _facts(
    job: JobPods, cluster: ClusterFacts, rooms: list[RoleRoom], records: Mapping[str, Evidence]
) -> list[Fact]:
    facts: list[Fact] = []
    for p in job.placed[:8]:
        facts.append(
            Fact(f"Pod {p.pod}", f"placed on node {p.node}, holds", _amounts(dict(p.gpus)))
        )
    by_name = {f.name: i for i, f in enumerate(cluster.nodes)}
    for room in rooms:
        for name, n in list(zip(room.nodes, room.per_node, strict=True))[:4]:
            facts.append(Fact(f"node {name}", "room now", f"{plural(n, 'rank')} of {_want(room)}"))
        if not room.nodes:
            facts.append(Fact("cluster", f"room now for {_want(room)}", "no candidate node"))
        for resource in (r for r in room.want if "/" in r):
            facts += _holders(cluster, by_name, resource, job, room)
    for _, pod in job.waiting[:4]:
        r = records[pod.ref]
        if r.scheduler_message:
            facts.append(Fact(f"Pod {pod.ref}", "FailedScheduling", r.scheduler_message))
    return facts


def _holders(
    cluster: ClusterFacts, by_name: Mapping[str, int], resource: str, job: JobPods, room: RoleRoom
) -> list[Fact]:
    """The other Pods holding `resource` on the nodes this job's ranks may use: who the
    waiting ranks wait for."""
    own = {p.pod for p in job.placed}
    out: list[Fact] = []
    candidates = [n for n in _may_use(cluster, job, room) if n in by_name]
    for name in candidates:
        for h in cluster.use[by_name[name]].holders:
            amount = dict(h.amounts).get(resource)
            if amount and h.pod not in own:
                out.append(Fact(f"node {name}", f"held by Pod {h.pod}", f"{amount} {resource}"))
            if len(out) >= 5:
                return out
    return out


def _may_use(cluster: ClusterFacts, job: JobPods, room: RoleRoom) -> list[str]:
    pod = next(p for m, p in job.waiting if m.role == room.role)
    place = placement(pod.spec, cluster)
    return [f.name for f in cluster.named(place.placed & ~place.unavailable)][:16]


def _commands(job: JobPods, rooms: list[RoleRoom]) -> tuple[str, ...]:
    namespace = job.member.key[0]
    out = []
    if job.member.selector:
        out.append(f"kubectl get pods -n {namespace} -l {job.member.selector} -o wide")
    if job.waiting:
        pod = job.waiting[0][1].ref.split("/", 1)[1]
        out.append(f"kubectl describe pod -n {namespace} {pod}")
        out.append(
            f"kubectl get events -n {namespace} --field-selector "
            f"involvedObject.name={pod},reason=FailedScheduling"
        )
    nodes = sorted({p.node for p in job.placed} | {n for r in rooms for n in r.nodes[:3]})
    for node in nodes[:4]:
        out.append(f"kubectl describe node {node}")
        out.append(f"kubectl get pods -A --field-selector spec.nodeName={node} -o wide")
    return tuple(out)
