"""`diagnose`: every Pending Pod that asks for GPUs, classified by failure domain.

Pure aggregation, no I/O and no clock, like the audit: the caller feeds Node, Pod and
Event objects one by one (from dumps or paged lists, in any order) and asks for the
report at the end. Memory is bounded by the nodes and the Pending Pods, not by the
Pods read: a bound Pod adds its requests to its node's sums (and its name, if it holds
GPUs), a terminal Pod adds nothing, and only the latest FailedScheduling event of each
Pod is kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from webhook.checks import device_injection, distributed, resource_names
from webhook.core.access.model import AccessRules
from webhook.core.diagnosis.classify import agreement, diagnose
from webhook.core.diagnosis.cluster import ClusterFacts, NodeUse
from webhook.core.diagnosis.drafacts import DraCollector
from webhook.core.diagnosis.evidence import DOMAINS, Domain, Evidence, Fact
from webhook.core.diagnosis.facts import (
    TERMINAL_PHASES,
    DaemonPod,
    Holder,
    NodeFacts,
    PendingPod,
    SchedulerEvent,
    daemon_pod,
    node_facts,
    owner_of,
    parse_time,
    pending_pod,
    pod_ref,
    priority_of,
    scheduler_event,
)
from webhook.core.diagnosis.jobs import JobPods, JobRecord, Placed, job_record, rank_domain
from webhook.core.diagnosis.queued import ADMISSION_GATE, KueueCollector, QueuedRecord
from webhook.core.dra.model import CLAIM_KINDS, SUPPLY_KINDS
from webhook.core.engine.policy import PolicySet
from webhook.core.jobs.members import Identity, Member, identities, member_of
from webhook.core.jobs.model import Reading
from webhook.core.jobs.running import nics_of
from webhook.core.kit.dicts import as_dict, str_map
from webhook.core.queues.model import is_queue_object
from webhook.core.supply.profiles import GENERIC, ClusterProfile
from webhook.core.workloads.podrequests import pod_requests
from webhook.core.workloads.pods import PodView
from webhook.core.workloads.shapes import KindShape
from webhook.errors import InventoryError
from webhook.sources.files import queue_supply

# Kinds of the DRA API: the dra-unallocatable domain reads them (webhook.core.diagnosis.dra).
DRA_KINDS = SUPPLY_KINDS | CLAIM_KINDS


def diagnosis_rules(policy_set: PolicySet | None) -> AccessRules:
    """The access model's rules: the device-injection policy's channels and the
    resource-names policy's GPU names (the shipped defaults where a set has none)."""
    injection = device_injection.Params()
    names = resource_names.Params()
    for policy in policy_set.policies if policy_set else ():
        if isinstance(policy.params, device_injection.Params):
            injection = policy.params
        elif isinstance(policy.params, resource_names.Params):
            names = policy.params
    return injection.access_rules(gpus=names.gpus)


@dataclass(frozen=True)
class JobRules:
    """How diagnose finds a Pod's job and reads its ranks: the WorkloadKinds' Pod labels
    and the gpu-distributed policy's reading (the shipped defaults where a set has none)."""

    known: tuple[Identity, ...] = identities(())
    reading: Reading = distributed.Params().reading
    profile: ClusterProfile = GENERIC
    kinds: tuple[KindShape, ...] = ()  # the WorkloadKinds: a queued job's pod sets


def job_rules(policy_set: PolicySet | None) -> JobRules:
    if policy_set is None:
        return JobRules()
    params = next(
        (p.params for p in policy_set.policies if isinstance(p.params, distributed.Params)),
        distributed.Params(),
    )
    kinds = policy_set.custom_kinds
    return JobRules(identities(kinds), params.reading, policy_set.profile, kinds)


@dataclass(frozen=True)
class DiagnoseReport:
    records: tuple[Evidence, ...]  # by domain (most Pods first), then Pod
    nodes: int
    pods: int  # Pods read
    pending: int  # Pending and not bound to a node
    time: datetime | None
    errors: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    jobs: tuple[JobRecord, ...] = ()  # the jobs of the Pending ranks, by job
    queued: tuple[QueuedRecord, ...] = ()  # the jobs Kueue holds, by Workload

    @property
    def stuck(self) -> int:
        return sum(1 for r in self.records if r.stuck)

    @property
    def exit_code(self) -> int:
        if self.errors:
            return 2
        return 1 if self.stuck or any(q.stuck for q in self.queued) else 0

    def by_domain(self) -> list[tuple[Domain, list[Evidence]]]:
        """Domains with their records, most Pods first (ties in the domains' order)."""
        groups: dict[Domain, list[Evidence]] = {}
        for r in self.records:
            groups.setdefault(r.domain, []).append(r)
        order = {d: i for i, d in enumerate(DOMAINS)}
        return sorted(groups.items(), key=lambda g: (-len(g[1]), order[g[0]]))


@dataclass
class Diagnoser:
    """Feed objects with `add`; `report(now=...)` classifies the Pending GPU Pods."""

    rules: AccessRules
    jobs: JobRules = field(default_factory=JobRules)
    namespace: str | None = None
    only: frozenset[str] = frozenset()  # namespace/name of the Pods asked about; empty: all
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _nodes: dict[str, NodeFacts] = field(default_factory=dict)
    _use: dict[str, NodeUse] = field(default_factory=dict)
    _daemons: dict[str, list[DaemonPod]] = field(default_factory=dict)
    _pending: dict[str, PendingPod] = field(default_factory=dict)
    _events: dict[str, tuple[str, SchedulerEvent]] = field(default_factory=dict)
    _seen: dict[str, str] = field(default_factory=dict)  # asked-about Pod -> its state
    _pods: int = 0
    _pending_count: int = 0
    _latest: str = ""  # the newest creationTimestamp read (RFC 3339 sorts as text)
    _skipped: Counter[str] = field(default_factory=Counter)
    dra: DraCollector = field(default_factory=DraCollector)
    kueue: KueueCollector = field(default_factory=KueueCollector)
    _jobs: dict[tuple[str, ...], JobPods] = field(default_factory=dict)
    _queue_objects: list[Mapping[str, Any]] = field(default_factory=list)

    def add(self, obj: Mapping[str, Any], *, location: str = "") -> None:
        kind = obj.get("kind") if isinstance(obj, Mapping) else None
        if kind == "Pod":
            self._pod(obj)
        elif kind == "Node":
            self._node(obj, location)
        elif kind == "Event":
            self._event(obj)
        elif kind in DRA_KINDS:
            self.dra.add(obj)
        elif self.kueue.add(obj):
            pass  # a Workload
        elif is_queue_object(obj):
            self._queue_objects.append(obj)  # few: the queues, not the jobs
        else:
            self._skipped[str(kind)] += 1

    def _node(self, obj: Mapping[str, Any], location: str) -> None:
        try:
            facts = node_facts(obj, index=len(self._nodes))
        except InventoryError as exc:
            self.errors.append(f"{location}: {exc}" if location else str(exc))
            return
        # A Node in two dumps (nodes.json and all.json) is one node: the later one wins.
        self._nodes[facts.name] = facts

    def _pod(self, obj: Mapping[str, Any]) -> None:
        self._pods += 1
        meta = as_dict(obj.get("metadata"))
        created = meta.get("creationTimestamp")
        if type(created) is str and created > self._latest:
            self._latest = created
        spec = as_dict(obj.get("spec"))
        phase = as_dict(obj.get("status")).get("phase") or "Pending"
        node = spec.get("nodeName")
        if node:
            if phase not in TERMINAL_PHASES:
                self._bound(obj, meta, spec, str(node))
            if self.only:
                self._remember(obj, f"bound to node {node} (phase {phase})")
        elif phase == "Pending":
            self._pending_count += 1
            self._consider(obj)
        elif self.only:
            self._remember(obj, f"phase {phase}")

    def _bound(
        self, obj: Mapping[str, Any], meta: Mapping[str, Any], spec: Mapping[str, Any], node: str
    ) -> None:
        want = pod_requests(spec)
        priority = priority_of(spec)
        is_gpu = self.rules.gpus.is_gpu
        held = tuple((r, n) for r, n in want.items() if "/" in r and is_gpu(r))
        holder = Holder(pod_ref(obj), owner_of(meta), priority, held) if held else None
        use = self._use.get(node)
        if use is None:
            use = self._use[node] = NodeUse()
        use.add(want, priority=priority, holder=holder)
        if holder is not None:
            self._placed_rank(meta, spec, node, holder)
        if meta.get("labels"):
            daemon = daemon_pod(obj)
            if daemon is not None:
                self._daemons.setdefault(node, []).append(daemon)

    def _consider(self, obj: Mapping[str, Any]) -> None:
        ref = pod_ref(obj)
        if self.namespace is not None and not ref.startswith(self.namespace + "/"):
            return
        if self.only and ref not in self.only:
            return
        pod = pending_pod(obj, rules=self.rules)
        if pod.asks_for_gpus or self.only:
            self._pending[ref] = pod
            self._seen[ref] = "Pending"
            self.kueue.pod(ref, as_dict(obj.get("metadata")))
        if pod.asks_for_gpus and pod.access.requests:
            member = member_of(as_dict(obj.get("metadata")), pod.spec, known=self.jobs.known)
            if member is not None:
                job = self._job(member)
                job.waiting.append((member, pod))
                job.count(member.role, pod.view)

    def _placed_rank(
        self, meta: Mapping[str, Any], spec: Mapping[str, Any], node: str, holder: Holder
    ) -> None:
        """A bound Pod that holds GPUs and names a job: one of its placed ranks."""
        member = member_of(meta, spec, known=self.jobs.known)
        if member is None:
            return
        job = self._job(member)
        view = _view(meta, spec)
        job.count(member.role, view)
        nics = nics_of(view, self.jobs.reading)
        job.placed.append(Placed(holder.pod, node, holder.amounts, nics, member))

    def _job(self, member: Member) -> JobPods:
        job = self._jobs.get(member.key)
        if job is None:
            job = self._jobs[member.key] = JobPods(member)
        return job

    def _remember(self, obj: Mapping[str, Any], state: str) -> None:
        ref = pod_ref(obj)
        if ref in self.only:
            self._seen[ref] = state

    def _event(self, obj: Mapping[str, Any]) -> None:
        found = scheduler_event(obj)
        if found is None:
            return
        ref, uid, event = found
        old = self._events.get(ref)
        if old is None or _later(event, old[1]):
            self._events[ref] = (uid, event)

    def latest(self) -> datetime | None:
        """The newest time in what was read: when a dump was taken, near enough."""
        times = [e.time for _, e in self._events.values() if e.time is not None]
        created = parse_time(self._latest)
        if created is not None:
            times.append(created)
        if self.kueue.latest is not None:
            times.append(self.kueue.latest)
        return max(times) if times else None

    def report(self, *, now: datetime | None) -> DiagnoseReport:
        notes = list(self.notes)
        cluster = ClusterFacts(
            list(self._nodes.values()), self._use, self._daemons, dra=self.dra.facts()
        )
        records = {
            p.ref: diagnose(
                p, cluster=cluster, gpus=self.rules.gpus, event=self._event_of(p), now=now
            )
            for p in self._pending.values()
        }
        queued = self._queued(records, notes, now)
        jobs = self._job_records(cluster, records, now)
        errors = list(self.errors)
        for ref in sorted(self.only):
            state = self._seen.get(ref)
            if state is None:
                errors.append(f"Pod {ref} not found")
            elif state != "Pending":
                notes.append(f"Pod {ref} is not waiting for the scheduler: {state}")
        if not self._nodes:
            notes.append("no Nodes were read: every GPU resource looks unadvertised")
        return DiagnoseReport(
            records=tuple(_ordered(records.values())),
            nodes=len(self._nodes),
            pods=self._pods,
            pending=self._pending_count,
            time=now,
            errors=tuple(errors),
            notes=tuple(notes),
            jobs=tuple(sorted(jobs, key=lambda j: j.job)),
            queued=tuple(queued),
        )

    def _queued(
        self, records: dict[str, Evidence], notes: list[str], now: datetime | None
    ) -> list[QueuedRecord]:
        """A record per GPU job Kueue holds; the records of its Pending Pods point to it."""
        supply = queue_supply(self._queue_objects)
        notes += [f"Kueue object not read: {why}" for why in supply.unreadable.values()]
        found, by_pod = self.kueue.records(
            supply=supply,
            is_gpu=self.rules.gpus.is_gpu,
            kinds=self.jobs.kinds,
            now=now,
            namespace=self.namespace,
            only=bool(self.only),
        )
        if found and not supply.kueue:
            notes.append(
                "Workloads were read without Kueue's queue objects: their quota and who holds "
                "it are not judged (add clusterqueues,localqueues,resourceflavors,cohorts)"
            )
        for ref, queued in by_pod.items():
            if ref in records:
                records[ref] = _held_by_kueue(records[ref], queued, self._pending[ref].gates)
        return found

    def _job_records(
        self, cluster: ClusterFacts, records: dict[str, Evidence], now: datetime | None
    ) -> list[JobRecord]:
        """A record per job with a waiting rank; its ranks' own records name the job, and
        a rank that fits alone while its job does not is `gang-does-not-fit`."""
        out = []
        for job in self._jobs.values():
            job.waiting = [(m, p) for m, p in job.waiting if p.ref in records]
            if not job.waiting:
                continue
            found = job_record(
                job,
                cluster=cluster,
                records=records,
                reading=self.jobs.reading,
                profile=self.jobs.profile,
                now=now,
            )
            out.append(found)
            for _, pod in job.waiting:
                records[pod.ref] = _in_job(records[pod.ref], found)
        return out

    def _event_of(self, pod: PendingPod) -> SchedulerEvent | None:
        found = self._events.get(pod.ref)
        if found is None:
            return None
        uid, event = found
        # An event of an earlier Pod of the same name (a recreated Pod) is not this one's.
        return None if uid and pod.uid and uid != pod.uid else event


def _view(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> PodView:
    labels, annotations = str_map(meta.get("labels")), str_map(meta.get("annotations"))
    return PodView(spec, ("spec",), labels, annotations, ("metadata",))


def _in_job(record: Evidence, job: JobRecord) -> Evidence:
    """A rank's own record, told of its job: one that fits alone while its job does not
    is `gang-does-not-fit` (and the scheduler's words are read again for it); one whose
    job can never fit waits in vain whatever it waits for."""
    domain = rank_domain(record.domain, job.fit)
    if domain != record.domain:
        event = None
        if record.scheduler_message is not None:
            event = SchedulerEvent(record.scheduler_message, record.scheduler_time, 1)
        agrees, why = agreement(domain, event)
        verdict = f"the Pod fits a node alone, but its job does not fit at once: {job.verdict}"
        return replace(
            record,
            domain=domain,
            verdict=verdict,
            next_action=job.next_action,
            job=job.job,
            agreement=agrees,
            disagreement=why,
        )
    if job.fit == "never":
        also = f"gang-does-not-fit: its job {job.job} can never be placed at once (its job record)"
        return replace(record, job=job.job, also=(*record.also, also), next_action=job.next_action)
    return replace(record, job=job.job)


def _held_by_kueue(record: Evidence, queued: QueuedRecord, gates: tuple[str, ...]) -> Evidence:
    """A Pod of a job Kueue holds: gated (its scheduling gate stays, or its job is
    suspended) until the Workload is admitted, whatever the nodes offer now."""
    if queued.job == f"Pod {record.pod}":  # Kueue's Pod integration: the Pod is the job
        held = f"Kueue holds the Pod: its Workload {queued.workload} is not admitted"
    else:
        job = queued.job or "job"
        held = f"Kueue holds the Pod's {job}: its Workload {queued.workload} is not admitted"
    held += f" ({queued.state}; the queued record says why)"
    if ADMISSION_GATE in gates:
        verdict = f"{held}, so Kueue's scheduling gate {ADMISSION_GATE} stays and the "
        verdict += "scheduler does not try the Pod"
    else:
        verdict = f"{held}, and Kueue keeps the job suspended: its Pods do not run until then"
    event = None
    if record.scheduler_message is not None:
        event = SchedulerEvent(record.scheduler_message, record.scheduler_time, 1)
    agrees, why = agreement("gated", event)
    kept = [f for f in record.facts if f.about == "scheduler" or f.name == "spec.schedulingGates"]
    condition = queued.condition
    if condition is not None:
        value = f"{condition.status}, {condition.reason}: {condition.message}"
        kept.insert(0, Fact(f"Workload {queued.workload}", f"condition {condition.type}", value))
    return replace(
        record,
        domain="gated",
        verdict=verdict,
        facts=tuple(kept),
        candidates=0,
        candidate_nodes=(),
        next_action=queued.next_action,
        agreement=agrees,
        disagreement=why,
        job=queued.job or f"Workload {queued.workload}",
        commands=(*record.commands[:2], *queued.commands[:2]),
    )


def _later(a: SchedulerEvent, b: SchedulerEvent) -> bool:
    if a.time is None or b.time is None:
        return b.time is None
    return a.time >= b.time


def _ordered(records: Iterable[Evidence]) -> list[Evidence]:
    records = list(records)
    counts = Counter(r.domain for r in records)
    order = {d: i for i, d in enumerate(DOMAINS)}
    return sorted(records, key=lambda r: (-counts[r.domain], order[r.domain], r.pod))
