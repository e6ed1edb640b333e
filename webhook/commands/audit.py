"""Dry-run audits: every object judged as if it were being created, nothing blocked.

Pure aggregation, no I/O and no clock: the caller feeds objects one by one (from a
dump or a paged list) and asks for the report at the end. A Pod whose controller is
also in the audit is reported once, under its top owner (Pod -> ReplicaSet ->
Deployment, Pod -> Job -> CronJob), with the number of Pods affected; a finding a Pod
shares with its owner's template (same policy, rule and field) merges into the owner's.

Memory is bounded by what is reported, not by what is read: Pods without findings are
only counted, identical findings are stored once, and controllers keep a small index
entry for the folding.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from webhook.checks import distributed
from webhook.commands.usage import Usage, UsageGatherer
from webhook.core.engine.evaluation import Finding, evaluate, problem
from webhook.core.engine.policy import Policy, PolicySet
from webhook.core.engine.subject import Subject, subject_of
from webhook.core.jobs.members import Identity, identities, member_of
from webhook.core.jobs.running import RULE, RunningRank, nics_of, running_ranks_differ
from webhook.core.kit.dicts import api_group, as_dict, as_list
from webhook.core.kit.paths import Path
from webhook.core.supply.inventory import Inventory
from webhook.core.workloads.identity import namespace_of, shown_name
from webhook.core.workloads.kinds import BUILTIN_TEMPLATES
from webhook.core.workloads.podrequests import pod_requests
from webhook.core.workloads.pods import PodView

FailOn = Literal["deny", "warn", "never"]
_MAX_OWNER_DEPTH = 8  # Pod -> ReplicaSet -> Deployment is 2; a cycle must not hang us


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """An object as reports name it."""

    api_version: str
    kind: str
    namespace: str  # "" for a cluster-scoped object
    name: str
    uid: str = ""

    def __str__(self) -> str:
        return (
            f"{self.kind} {self.namespace}/{self.name}"
            if self.namespace
            else (f"{self.kind} {self.name}")
        )


@dataclass(slots=True)
class AuditEntry:
    """One finding on one resource, with the Pods that share it folded in."""

    resource: ObjectRef
    finding: Finding
    location: str  # "file:line" for a dump, "" for a live cluster
    pods: int = 0  # Pods under this resource with the same finding

    def sort_key(self) -> tuple[str, ...]:
        r, f = self.resource, self.finding
        return (r.namespace, r.kind, r.name, f.policy, f.rule, repr(f.path))


@dataclass(frozen=True)
class AuditReport:
    entries: tuple[AuditEntry, ...]
    objects: int
    evaluated: int
    skipped: Mapping[str, int]
    kinds: Mapping[str, int]
    passed: Mapping[str, int]  # namespace -> resources (owners, lone Pods) without findings
    pods_affected: Mapping[ObjectRef, int]  # folded Pods with any finding, per resource
    errors: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    usage: Usage = field(default_factory=Usage)  # GPU use in GPU units (commands.usage)

    def count(self, action: str) -> int:
        return sum(1 for e in self.entries if e.finding.action == action)

    def exit_code(self, fail_on: FailOn) -> int:
        if self.errors:
            return 2
        failing = {"deny": ("deny",), "warn": ("deny", "warn"), "never": ()}[fail_on]
        return 1 if any(e.finding.action in failing for e in self.entries) else 0


@dataclass(slots=True)
class _Record:
    ref: ObjectRef
    owner: str  # uid of the controller owner, "" if none
    findings: tuple[Finding, ...]
    location: str


@dataclass(frozen=True, slots=True)
class _Rank:
    """A bound GPU Pod that is a rank of a job, with its controller and where it was read."""

    rank: RunningRank
    ref: ObjectRef
    owner: str
    location: str


@dataclass(slots=True)
class _Owner:
    ref: ObjectRef
    owner: str
    location: str


@dataclass(frozen=True, slots=True)
class AuditState:
    objects: int
    evaluated: int
    skipped: dict[str, int]
    kinds: dict[str, int]
    records: list[_Record]
    owners: dict[str, _Owner]
    passing_pods: dict[tuple[str, str], int]
    errors: list[str]
    ranks: list[_Rank] = field(default_factory=list)
    usage: tuple[dict[str, Any], dict[str, Any]] = field(default_factory=lambda: ({}, {}))


@dataclass
class Auditor:
    """Feed objects with `add`; `report()` folds and sorts what was found."""

    policy_set: PolicySet
    inventory: Inventory
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # False: every object goes through the checks (tests compare the two; engine.prefilter)
    prefilter: bool = True
    _objects: int = 0
    _evaluated: int = 0
    _skipped: Counter[str] = field(default_factory=Counter)
    _kinds: Counter[str] = field(default_factory=Counter)
    _records: list[_Record] = field(default_factory=list)
    _owners: dict[str, _Owner] = field(default_factory=dict)
    _passing_pods: dict[tuple[str, str], int] = field(default_factory=dict)
    _interned: dict[Finding, Finding] = field(default_factory=dict)
    _ranks: list[_Rank] = field(default_factory=list)
    _jobs: _RunningJobs | None = field(default=None, init=False)
    _usage: UsageGatherer = field(init=False)

    def __post_init__(self) -> None:
        self._jobs = _RunningJobs.of(self.policy_set)
        self._usage = UsageGatherer(self.inventory)

    def add(self, obj: Mapping[str, Any], *, location: str = "") -> None:
        self._objects += 1
        if type(obj) is not dict and not isinstance(obj, Mapping):  # a number, a string
            self._skipped["not an object"] += 1
            return
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            self._skipped["without apiVersion/kind"] += 1
            return
        self._kinds[kind] += 1
        meta = as_dict(obj.get("metadata"))
        subject = subject_of(obj)  # as check and the webhook judge it: see core.subject
        findings = self._evaluate(subject, location)
        # A judged object is reported where it was judged (a hand-made dump's Pod without
        # a namespace is in `default`); anything else keeps its own: "" for a Node, say,
        # that owns mirror Pods.
        namespace = subject.namespace if findings is not None else namespace_of(obj)
        owner = _controller_uid(meta)
        is_pod = kind == "Pod" and api_version == "v1"
        if not is_pod and meta.get("uid"):
            ref = _ref(meta, api_version, kind, namespace)
            self._owners[ref.uid] = _Owner(ref, owner, location)
        self._usage.add(obj, namespace)
        jobs = self._jobs
        if is_pod and jobs is not None and meta.get("labels") is not None:
            self._rank(jobs, obj, meta, namespace, owner, location)
        if findings is None:
            return
        if is_pod and not findings:  # the common case, kept cheap: only counted
            key = (namespace, owner)
            self._passing_pods[key] = self._passing_pods.get(key, 0) + 1
        else:
            ref = _ref(meta, api_version, kind, namespace)
            self._records.append(_Record(ref, owner, findings, location))

    def _rank(
        self,
        jobs: _RunningJobs,
        obj: Mapping[str, Any],
        meta: Mapping[str, Any],
        namespace: str,
        owner: str,
        location: str,
    ) -> None:
        """A running rank of a job, kept to compare with the job's other ranks."""
        spec = as_dict(obj.get("spec"))
        node = spec.get("nodeName")
        if not isinstance(node, str) or as_dict(obj.get("status")).get("phase") in _ENDED:
            return
        if not jobs.policy.matches_object("Pod", namespace):
            return  # a namespace the policy leaves out (kube-system, the GPU operator's)
        member = member_of(meta, spec, known=jobs.known)
        if member is None:
            return
        is_gpu = jobs.params.reading.gpus.is_gpu
        gpus = tuple(sorted((r, n) for r, n in pod_requests(spec).items() if n and is_gpu(r)))
        if not gpus:
            return
        view = PodView(spec, ("spec",), {}, as_dict(meta.get("annotations")), ("metadata",))
        nics = nics_of(view, jobs.params.reading)
        rank = RunningRank(member, f"{namespace}/{meta.get('name')}", node, gpus, nics)
        self._ranks.append(_Rank(rank, _ref(meta, "v1", "Pod", namespace), owner, location))

    def _evaluate(self, subject: Subject, location: str) -> tuple[Finding, ...] | None:
        decision = evaluate(self.policy_set, subject, self.inventory, prefilter=self.prefilter)
        trouble = problem(decision, subject)
        if trouble is not None:  # invalid input or a bug on one object: exit 2, it goes on
            self.errors.append(f"{location}: {trouble}" if location else trouble)
            return None
        if decision.skipped is not None:
            self._skipped[decision.skipped] += 1
            return None
        self._evaluated += 1
        if not decision.findings:
            return ()
        return tuple(self._interned.setdefault(f, f) for f in decision.findings)

    def state(self) -> AuditState:
        """What this auditor gathered, without its policies and inventory: what a worker
        process sends back (see webhook.commands.auditdump)."""
        return AuditState(
            self._objects,
            self._evaluated,
            dict(self._skipped),
            dict(self._kinds),
            self._records,
            self._owners,
            self._passing_pods,
            self.errors,
            self._ranks,
            self._usage.parts(),
        )

    def absorb(self, state: AuditState, *, moved: Callable[[str], str]) -> None:
        """Another auditor's objects, as if fed here after everything fed so far;
        `moved` rewrites its locations (and the ones its errors start with)."""
        self._objects += state.objects
        self._evaluated += state.evaluated
        self._skipped.update(state.skipped)
        self._kinds.update(state.kinds)
        for r in state.records:
            self._records.append(_Record(r.ref, r.owner, r.findings, moved(r.location)))
        for uid, o in state.owners.items():
            self._owners[uid] = _Owner(o.ref, o.owner, moved(o.location))
        for key, count in state.passing_pods.items():
            self._passing_pods[key] = self._passing_pods.get(key, 0) + count
        self.errors.extend(moved(e) for e in state.errors)
        self._ranks += [_Rank(r.rank, r.ref, r.owner, moved(r.location)) for r in state.ranks]
        self._usage.absorb(state.usage)

    def report(self) -> AuditReport:
        folding = _Folding(self._owners)
        for record in sorted(self._records, key=lambda r: folding.top(r.owner) is not None):
            folding.add(record)
        if self._jobs is not None:
            for entry in self._jobs.entries(self._ranks, self.inventory, folding):
                folding.add_entry(entry)
        passed = folding.passed()
        for (namespace, owner), count in self._passing_pods.items():
            if folding.top(owner) is None:
                passed[namespace] += count
        return AuditReport(
            entries=tuple(sorted(folding.entries(), key=AuditEntry.sort_key)),
            objects=self._objects,
            evaluated=self._evaluated,
            skipped=dict(self._skipped),
            kinds=dict(self._kinds),
            passed=dict(passed),
            pods_affected=dict(folding.pods_affected),
            errors=tuple(self.errors),
            notes=tuple(self.notes),
            usage=self._usage.usage(),
        )


class _Folding:
    """Findings grouped per reported resource, keyed so that a Pod's and its template's
    finding on the same field are one entry."""

    def __init__(self, owners: Mapping[str, _Owner]) -> None:
        self._owners = owners
        self._groups: dict[ObjectRef, dict[tuple[Any, ...], AuditEntry]] = {}
        self._clean: dict[ObjectRef, None] = {}
        self.pods_affected: Counter[ObjectRef] = Counter()

    def top(self, owner: str) -> _Owner | None:
        """The highest owner in the audit above an object owned by `owner`."""
        found = self._owners.get(owner) if owner else None
        for _ in range(_MAX_OWNER_DEPTH):
            if found is None or found.owner not in self._owners:
                break
            found = self._owners[found.owner]
        return found

    def add(self, record: _Record) -> None:
        top = self.top(record.owner)
        if top is None:  # reported as itself
            group = self._groups.setdefault(record.ref, {})
            for f in record.findings:
                group.setdefault(
                    _merge_key(record.ref, f), AuditEntry(record.ref, f, record.location)
                )
            if not record.findings:
                self._clean[record.ref] = None
            return
        if not record.findings:
            return
        group = self._groups.setdefault(top.ref, {})
        is_pod = record.ref.kind == "Pod"
        for key, f in {_merge_key(record.ref, f): f for f in record.findings}.items():
            entry = group.get(key)
            if entry is None:
                entry = group[key] = AuditEntry(top.ref, f, top.location)
            entry.pods += is_pod
        self.pods_affected[top.ref] += is_pod

    def add_entry(self, entry: AuditEntry) -> None:
        group = self._groups.setdefault(entry.resource, {})
        group.setdefault(_merge_key(entry.resource, entry.finding), entry)
        self.pods_affected[entry.resource] += entry.pods

    def entries(self) -> Iterable[AuditEntry]:
        for group in self._groups.values():
            yield from group.values()

    def passed(self) -> Counter[str]:
        """Resources reported as themselves that nothing was found on."""
        passed: Counter[str] = Counter()
        for ref in self._clean:
            if not self._groups.get(ref):
                passed[ref.namespace] += 1
        return passed


_ENDED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class _RunningJobs:
    """The gpu-distributed policy's view of running jobs: which Pods are ranks of one job
    (the WorkloadKinds' Pod labels) and how ranks are read."""

    policy: Policy
    params: distributed.Params
    known: tuple[Identity, ...]

    @classmethod
    def of(cls, policy_set: PolicySet) -> _RunningJobs | None:
        for p in policy_set.policies:
            if isinstance(p.params, distributed.Params):
                return cls(p, p.params, identities(policy_set.custom_kinds))
        return None

    def entries(
        self, ranks: list[_Rank], inventory: Inventory, folding: _Folding
    ) -> Iterable[AuditEntry]:
        """One `ranks-differ` per job whose running ranks differ, under its top owner."""
        labels = {n.name: n.labels for n in inventory.nodes} if ranks else {}
        keys = self.params.product_labels

        def product(node: str) -> str:
            found = labels.get(node, {})
            return next((found[k] for k in keys if k in found), "")

        jobs: dict[tuple[str, ...], list[_Rank]] = {}
        for r in ranks:
            jobs.setdefault(r.rank.member.key, []).append(r)
        for group in jobs.values():
            message = running_ranks_differ([r.rank for r in group], product=product)
            if message is None:
                continue
            first, top = group[0], folding.top(group[0].owner)
            finding = Finding(self.policy.name, RULE, self.policy.action, message, ())
            resource = top.ref if top is not None else first.ref
            yield AuditEntry(resource, finding, top.location if top else first.location, len(group))


def _ref(meta: Mapping[str, Any], api_version: str, kind: str, namespace: str) -> ObjectRef:
    return ObjectRef(api_version, kind, namespace, shown_name(meta), str(meta.get("uid") or ""))


def _controller_uid(meta: Mapping[str, Any]) -> str:
    for owner in as_list(meta.get("ownerReferences")):
        owner = as_dict(owner)
        if owner.get("controller") is True and owner.get("uid"):
            return str(owner["uid"])
    return ""


def _merge_key(ref: ObjectRef, f: Finding) -> tuple[Any, ...]:
    return (f.policy, f.rule, f.action, _pod_relative(ref, f.path))


def _pod_relative(ref: ObjectRef, path: Path) -> Path:
    """`spec.template.spec.x` of a Deployment is `spec.x` of its Pods."""
    for prefix in BUILTIN_TEMPLATES.get((api_group(ref.api_version), ref.kind), ()):
        if path[: len(prefix)] == prefix:
            return path[len(prefix) :]
    return path
