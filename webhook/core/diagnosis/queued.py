"""A job held by Kueue: its Workload not admitted, Kueue's own words read back into the
flavor and resource that lack quota, whether it can ever be admitted, and if not now,
who holds the quota and whether preemption could help.

Kueue keeps a queued job suspended (a Job's or JobSet's `spec.suspend`, the Pod
integration's scheduling gate `kueue.x-k8s.io/admission`) until its Workload
(kueue.x-k8s.io/v1beta2, owned by the job, labelled `kueue.x-k8s.io/job-uid`) has quota
reserved (condition QuotaReserved) and is admitted (Admitted). The scheduler writes why
not into QuotaReserved: `couldn't assign flavors to pod set main: insufficient unused
quota for nvidia.com/gpu in flavor a100, 4 more needed` (kubernetes-sigs/kueue v0.19.2
pkg/scheduler/flavorassigner; tests/data/kueue/FACTS.md h). "Never" is the queue model's
flavor assignment (webhook.core.queues.assign) in the words of gpu-queues'
quota-never-admits; "not now" names the admitted Workloads holding the flavor
(status.admission.podSetAssignments) and the ClusterQueue's use (status.flavorsUsage).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

from webhook.core.diagnosis.evidence import Fact
from webhook.core.diagnosis.facts import parse_time
from webhook.core.kit.dicts import as_dict, as_list, str_map
from webhook.core.kit.text import listing, plural
from webhook.core.queues.assign import Unassigned, first_unassigned
from webhook.core.queues.model import KUEUE_GROUP, ClusterQueue
from webhook.core.queues.podsets import PodSet, pod_sets
from webhook.core.queues.supply import QueueSupply
from webhook.core.queues.usage import QueueUse, queue_uses
from webhook.core.workloads.kinds import Role, WorkloadView
from webhook.core.workloads.pods import PodView
from webhook.core.workloads.shapes import KindShape
from webhook.core.workloads.targets import workload_of
from webhook.core.workloads.units import amount, shown

ADMISSION_GATE = "kueue.x-k8s.io/admission"  # pkg/controller/jobs/pod/constants
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"  # pkg/controller/constants JobUIDLabel
SHOWN_HOLDERS = 5
State = Literal["never", "not-now", "inadmissible", "deactivated"]
LackKind = Literal["max", "unused", "uncovered", "taint", "affinity", "missing"]
_NAME = r"([a-z0-9][-a-z0-9.]*[a-z0-9]|[a-z0-9])"  # a ResourceFlavor's name (DNS subdomain)
_RES = r"([A-Za-z0-9][-A-Za-z0-9./_]*)"
_QTY = r"([-+0-9.]+[A-Za-z]*)"
_POD_SET = re.compile(r"couldn't assign flavors to pod set ([^:;]+): ")
# Kueue's reasons for a flavor (flavorassigner.go fitsResourceQuota, checkFlavorForPodSets,
# findFlavorForPodSets), as Status.Message() joins them: sorted, ", " between.
_REASONS: tuple[tuple[LackKind, re.Pattern[str]], ...] = (
    (
        "max",
        re.compile(
            rf"insufficient quota for {_RES} in flavor {_NAME}, previously considered podsets "
            rf"requests \({_QTY}\) \+ current podset request \({_QTY}\) > maximum capacity "
            rf"\({_QTY}\)"
        ),
    ),
    ("unused", re.compile(rf"insufficient unused quota for {_RES} in flavor {_NAME}, {_QTY} more")),
    ("uncovered", re.compile(rf"resource {_RES} unavailable in ClusterQueue")),
    ("taint", re.compile(rf"untolerated taint \{{[^}}]*\}} in flavor {_NAME}")),
    ("affinity", re.compile(rf"flavor {_NAME} doesn't match node affinity")),
    ("missing", re.compile(rf"flavor {_NAME} not found")),
)
_BLOCKERS = ("doesn't exist", "is inactive", "not found", "doesn't match ClusterQueue selector")


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str
    since: datetime | None  # lastTransitionTime


@dataclass(frozen=True, slots=True)
class Lack:
    """One reason of Kueue's message: a flavor that lacks quota for a pod set, or that
    the pod set cannot use."""

    pod_set: str
    kind: LackKind
    resource: str  # "" for a flavor skipped for its taints, affinity or absence
    flavor: str  # "" for a resource no resource group covers
    needed: int | None  # unused: more needed now; max: over the most it can ever get
    words: str  # Kueue's reason, verbatim


@dataclass(frozen=True, slots=True)
class Held:
    """An admitted (quota-reserving) Workload and what it holds, per flavor and resource."""

    workload: str
    job: str
    cluster_queue: str
    priority: int
    created: str  # creationTimestamp (RFC 3339 sorts as text)
    usage: Mapping[tuple[str, str], int]


@dataclass(frozen=True, slots=True)
class Workload:
    """A Workload as the diagnosis reads it."""

    ref: str  # namespace/name
    owner: tuple[str, str, str]  # kind, name, uid of its job; ("", "", "") for none
    owners: tuple[str, ...]  # every owner's uid and the job-uid label: what points here
    queue: str  # spec.queueName
    priority: int
    active: bool
    created: str
    conditions: tuple[Condition, ...]
    held: Held | None  # its reservation, if it has one
    sets: tuple[PodSet, ...]  # spec.podSets

    @property
    def namespace(self) -> str:
        return self.ref.split("/", 1)[0]

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    def holds(self, kind: str) -> bool:
        found = self.condition(kind)
        return found is not None and found.status == "True"

    @property
    def job(self) -> str:
        kind, name, _ = self.owner
        return f"{kind} {self.namespace}/{name}" if kind else ""


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """What the queue model leaves out of a ClusterQueue: its preemption policy and status."""

    preemption: Mapping[str, Any]
    status: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class QueuedRecord:
    time: datetime | None
    workload: str
    job: str  # "Job ml/train", "" when the Workload has no owner
    namespace: str
    local_queue: str
    cluster_queue: str  # "" when unknown
    cohort: str
    state: State
    condition: Condition | None  # Kueue's QuotaReserved (else its newest) condition
    conditions: tuple[Condition, ...]
    requests: Mapping[str, str]  # the pod sets' total, as Kueue counts it
    lacking: tuple[Lack, ...]
    held_by: tuple[Held, ...]  # most of the lacking resources first
    quota: tuple[QueueUse, ...]
    preemption: str
    verdict: str
    next_action: str
    facts: tuple[Fact, ...]
    pods: tuple[str, ...]  # its Pending Pods, whose records point here
    commands: tuple[str, ...]

    @property
    def stuck(self) -> bool:
        return True  # a job Kueue holds does not run


def is_workload(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") == "Workload" and str(obj.get("apiVersion", "")).startswith(
        KUEUE_GROUP + "/"
    )


def parse_workload(obj: Mapping[str, Any]) -> Workload:
    meta, spec, status = (as_dict(obj.get(k)) for k in ("metadata", "spec", "status"))
    ref = f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"
    refs = [as_dict(o) for o in as_list(meta.get("ownerReferences"))]
    top = next((o for o in refs if o.get("controller") is True), refs[0] if refs else {})
    owner = (str(top.get("kind") or ""), str(top.get("name") or ""), str(top.get("uid") or ""))
    owners = [str(o.get("uid")) for o in refs if o.get("uid")]
    owners += [v for k, v in str_map(meta.get("labels")).items() if k == JOB_UID_LABEL]
    conditions = tuple(
        Condition(
            str(c.get("type") or ""),
            str(c.get("status") or ""),
            str(c.get("reason") or ""),
            str(c.get("message") or ""),
            parse_time(c.get("lastTransitionTime")),
        )
        for c in map(as_dict, as_list(status.get("conditions")))
    )
    priority = spec.get("priority")
    created = meta.get("creationTimestamp")
    found = Workload(
        ref,
        owner,
        tuple(owners),
        str(spec.get("queueName") or ""),
        priority if type(priority) is int else 0,
        spec.get("active") is not False,
        created if type(created) is str else "",
        conditions,
        None,
        own_pod_sets(obj),
    )
    admission = as_dict(status.get("admission"))
    if not admission or not found.holds("QuotaReserved") or found.holds("Finished"):
        return found
    queue = str(admission.get("clusterQueue") or "")
    held = Held(ref, found.job, queue, found.priority, found.created, _usage(admission))
    return replace(found, held=held)


def _usage(admission: Mapping[str, Any]) -> dict[tuple[str, str], int]:
    """What the admitted pod sets hold: resourceUsage (each pod set's total) per flavor."""
    out: dict[tuple[str, str], int] = {}
    for assignment in map(as_dict, as_list(admission.get("podSetAssignments"))):
        flavors = str_map(assignment.get("flavors"))
        for resource, raw in as_dict(assignment.get("resourceUsage")).items():
            value = amount(str(resource), raw)
            flavor = flavors.get(str(resource), "")
            if value:
                key = (flavor, str(resource))
                out[key] = out.get(key, 0) + value
    return out


def own_pod_sets(obj: Mapping[str, Any]) -> tuple[PodSet, ...]:
    """The Workload's spec.podSets as the queue model's pod sets (count defaults to 1)."""
    roles = []
    for i, raw in enumerate(as_list(as_dict(obj.get("spec")).get("podSets"))):
        item = as_dict(raw)
        template = as_dict(item.get("template"))
        meta = as_dict(template.get("metadata"))
        at = ("spec", "podSets", i, "template")
        labels, notes = str_map(meta.get("labels")), str_map(meta.get("annotations"))
        pod = PodView(
            as_dict(template.get("spec")), (*at, "spec"), labels, notes, (*at, "metadata")
        )
        count = item.get("count", 1)
        name = str(item.get("name") or "main")
        roles.append(Role(name, pod, count if type(count) is int and count >= 0 else 1, at[:3]))
    return pod_sets(
        WorkloadView(obj, "Workload", KUEUE_GROUP, tuple(roles), [r.pod for r in roles])
    )


def lacks_in(message: str) -> tuple[Lack, ...]:
    """Kueue's flavor-assignment message read back, pod set by pod set (joined by "; ")."""
    heads = list(_POD_SET.finditer(message))
    out: list[Lack] = []
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(message)
        text, pod_set = message[head.end() : end], head.group(1)
        found = []
        for kind, pattern in _REASONS:
            for m in pattern.finditer(text):
                found.append((m.start(), _lack(pod_set, kind, m)))
        out += [lack for _, lack in sorted(found, key=lambda f: f[0])]
    return tuple(out)


def _lack(pod_set: str, kind: LackKind, m: re.Match[str]) -> Lack:
    if kind == "max":
        resource, flavor = m.group(1), m.group(2)
        before, asked, most = (amount(resource, m.group(i)) or 0 for i in (3, 4, 5))
        return Lack(pod_set, kind, resource, flavor, before + asked - most, m.group(0))
    if kind == "unused":
        resource = m.group(1)
        needed = amount(resource, m.group(3))
        return Lack(pod_set, kind, resource, m.group(2), needed, m.group(0) + " needed")
    if kind == "uncovered":
        return Lack(pod_set, kind, m.group(1), "", None, m.group(0))
    return Lack(pod_set, kind, "", m.group(1), None, m.group(0))


def never_words(
    kind: str, queue_ref: str, queue: ClusterQueue, sets: tuple[PodSet, ...], unassigned: Unassigned
) -> str:
    """gpu-queues' words for a job no flavor of its ClusterQueue can ever take
    (webhook.checks.queues `_never`: resource-not-covered, no-flavor-matches,
    quota-never-admits), so `check` and `diagnose` say it alike."""
    pod_set, resource = unassigned.pod_set, unassigned.resource
    asked = f"{pod_set.count} x {shown(resource, pod_set.requests[resource])}"
    who = f"The {kind} (queue {queue_ref})"
    words = unassigned.kueue_words()
    if unassigned.group is None:
        covered = sorted({r for g in queue.groups for r in g.covered})
        return (
            f"{who}: pod set {pod_set.name} asks {resource} ({asked}), which ClusterQueue "
            f"{queue.name} does not cover (coveredResources: {listing(covered)}): Kueue can "
            f'never admit it ("{words}"). Add {resource} to a resource group of the '
            "ClusterQueue, or ask for a resource it covers."
        )
    if not unassigned.shortfalls:
        return (
            f"{who}: pod set {pod_set.name} can use no flavor of ClusterQueue {queue.name} for "
            f'{resource}: Kueue can never admit it ("{words}"). Tolerate the flavor\'s taints '
            "or drop the nodeSelector or affinity that excludes its labels."
        )
    total = sum(s.total(resource) for s in sets)
    gives = "; ".join(
        f"at most {shown(s.resource, s.most.most)} {s.resource} in flavor {s.flavor} "
        f"(nominal {shown(s.resource, s.most.nominal)}, cohort lends "
        f"{shown(s.resource, s.most.lent)})"
        for s in unassigned.shortfalls
    )
    return (
        f"{who} asks {shown(resource, total)} {resource} in all (pod set {pod_set.name}: "
        f"{asked}); ClusterQueue {queue.name} gives {gives}: Kueue can never admit it, "
        f'however long it waits ("{words}"). Ask for less, or raise the quota or what '
        "the cohort may lend."
    )


@dataclass(frozen=True)
class Queues:
    """The queues every record of a report is judged against."""

    supply: QueueSupply
    statuses: Mapping[str, QueueStatus]  # by ClusterQueue name: what the model leaves out
    uses: tuple[QueueUse, ...]  # every GPU quota's use (webhook.core.queues.usage)
    held: Sequence[Held]  # every admitted Workload's reservation
    is_gpu: Callable[[str], bool]


@dataclass(frozen=True)
class _Case:
    w: Workload
    sets: tuple[PodSet, ...]
    kind: str  # the job's kind, "Workload" for one without an owner
    queues: Queues
    queue: ClusterQueue | None  # the ClusterQueue it waits in, if read
    queue_name: str  # its name, "" when not known
    kueue: Condition | None  # QuotaReserved
    lacks: tuple[Lack, ...]

    @property
    def where(self) -> str:
        return f"queue {self.w.namespace}/{self.w.queue}"


@dataclass(frozen=True)
class _Found:
    state: State
    verdict: str
    next_action: str
    held: tuple[Held, ...] = ()
    quota: tuple[QueueUse, ...] = ()
    preemption: str = ""


def queued_record(
    w: Workload,
    *,
    sets: tuple[PodSet, ...],
    kind: str,
    queues: Queues,
    pods: tuple[str, ...],
    now: datetime | None,
) -> QueuedRecord:
    """The record of one Workload Kueue has not admitted; `sets` are its job's pod sets
    (the job's own, where it was read, else the Workload's)."""
    supply = queues.supply
    local = supply.local_queues.get((w.namespace, w.queue))
    name = w.held.cluster_queue if w.held else (local.cluster_queue if local else "")
    kueue = w.condition("QuotaReserved")
    lacks = lacks_in(kueue.message) if kueue is not None and kueue.status != "True" else ()
    queue = supply.cluster_queues.get(name)
    case = _Case(w, sets, kind or "Workload", queues, queue, name, kueue, lacks)
    found = _judge(case)
    shown_condition = kueue or max(w.conditions, key=lambda c: c.since or _EPOCH, default=None)
    return QueuedRecord(
        time=now,
        workload=w.ref,
        job=w.job,
        namespace=w.namespace,
        local_queue=w.queue,
        cluster_queue=name,
        cohort=case.queue.cohort if case.queue else "",
        state=found.state,
        condition=shown_condition,
        conditions=w.conditions,
        requests=_requests(sets),
        lacking=lacks,
        held_by=found.held,
        quota=found.quota,
        preemption=found.preemption,
        verdict=found.verdict,
        next_action=found.next_action,
        facts=tuple(_facts(case, found)),
        pods=pods,
        commands=_commands(case, found),
    )


_EPOCH = datetime.min.replace(tzinfo=UTC)


def _judge(c: _Case) -> _Found:
    w, supply = c.w, c.queues.supply
    if not w.active:
        evicted = w.condition("Evicted")
        why = f" (Evicted: {evicted.reason}: {evicted.message})" if evicted else ""
        return _Found(
            "deactivated",
            f"The Workload is deactivated (spec.active: false): Kueue does not admit it{why}.",
            f"fix what deactivated it, then reactivate it: kubectl patch workload -n "
            f"{w.namespace} {w.ref.split('/', 1)[1]} --type=merge -p "
            '\'{"spec":{"active":true}}\'',
        )
    if supply.kueue:
        blocked = _blocked(c)
        if blocked is not None:
            return blocked
        assert c.queue is not None  # _blocked found it
        unassigned = first_unassigned(supply, c.queue, c.sets)
        if unassigned is not None:
            words = never_words(c.kind, f"{w.namespace}/{w.queue}", c.queue, c.sets, unassigned)
            return _Found("never", words, _raise(c.queue.name, unassigned.resource, c.lacks))
    if c.kueue is not None and (
        c.kueue.reason == "Inadmissible" or any(b in c.kueue.message for b in _BLOCKERS)
    ):
        return _Found(
            "inadmissible",
            f"Kueue finds the {c.kind}'s Workload inadmissible: {c.kueue.message}.",
            "fix the LocalQueue or ClusterQueue Kueue names (kubectl get localqueues,"
            f"clusterqueues -n {w.namespace})",
        )
    if not supply.kueue and _never_by_kueue(c.lacks):
        return _Found(
            "never",
            f"The {c.kind} ({c.where}) can never be admitted, by Kueue's own account "
            f'("{c.kueue.message if c.kueue else ""}"). Ask for less, or raise the quota or what '
            "the cohort may lend.",
            _raise(c.queue_name, c.lacks[0].resource, c.lacks),
        )
    return _not_now(c)


def _never_by_kueue(lacks: tuple[Lack, ...]) -> bool:
    """Some pod set's every flavor fails for good (no quota ever, a taint, no resource group)."""
    hard: dict[str, bool] = {}
    for lack in lacks:
        hard[lack.pod_set] = hard.get(lack.pod_set, True) and lack.kind != "unused"
    return any(hard.values())


def _blocked(c: _Case) -> _Found | None:
    """What keeps Kueue from trying the Workload at all: its queues (gpu-queues' words)."""
    w, supply = c.w, c.queues.supply
    ns, named = w.namespace, w.queue
    local = supply.local_queues.get((ns, named))
    why = supply.why_unreadable("LocalQueue", named, ns)
    if local is None and why:
        return _Found(
            "inadmissible",
            f"LocalQueue {ns}/{named} could not be read ({why}).",
            "fix the LocalQueue",
        )
    if local is None:
        here = sorted(n for n_ns, n in supply.local_queues if n_ns == ns)
        there = f"LocalQueues there: {listing(here)}" if here else "it has no LocalQueue"
        return _Found(
            "inadmissible",
            f"The {c.kind} names LocalQueue {named!r}, which does not exist in namespace {ns} "
            f"({there}): Kueue keeps its Workload inadmissible (\"LocalQueue {named} doesn't "
            'exist"). Name one of them, or create it.',
            f"set the job's kueue.x-k8s.io/queue-name label to a LocalQueue of {ns}"
            + (f" ({listing(here)})" if here else "")
            + f", or create LocalQueue {ns}/{named}",
        )
    if c.queue is None:
        names = sorted(supply.cluster_queues)
        known = f"ClusterQueues: {listing(names)}" if names else "there is no ClusterQueue"
        return _Found(
            "inadmissible",
            f"LocalQueue {ns}/{named} points to ClusterQueue {local.cluster_queue!r}, which does "
            f"not exist ({known}): Kueue keeps the Workload inadmissible.",
            "fix the LocalQueue's spec.clusterQueue, or create the ClusterQueue",
        )
    status = c.queues.statuses.get(c.queue.name)
    conditions = map(as_dict, as_list(status.status.get("conditions") if status else None))
    active = next((x for x in conditions if x.get("type") == "Active"), {})
    if active.get("status") == "False":
        return _Found(
            "inadmissible",
            f"ClusterQueue {c.queue.name} is inactive ({active.get('reason')}: "
            f"{active.get('message')}): Kueue admits nothing through it.",
            "fix what its Active condition names (a missing ResourceFlavor: create it; a "
            "stopPolicy: clear it)",
        )
    if c.queue.namespace_selector is None:
        return _Found(
            "inadmissible",
            f"ClusterQueue {c.queue.name} has no namespaceSelector, which selects no namespace: "
            f"it admits nothing, from {ns} or anywhere (kueue: a null selector is a nothing "
            "selector). Give it a namespaceSelector that takes this namespace.",
            f"set ClusterQueue {c.queue.name}'s spec.namespaceSelector",
        )
    return None


def _raise(queue: str, resource: str, lacks: tuple[Lack, ...]) -> str:
    flavor = next((lack.flavor for lack in lacks if lack.resource == resource), "")
    where = f" in flavor {flavor}" if flavor else ""
    named = f"ClusterQueue {queue}'s" if queue else "its ClusterQueue's"
    return f"ask for less {resource}, or raise {named} nominalQuota for it{where} or what its " + (
        "cohort may lend"
    )


def _not_now(c: _Case) -> _Found:
    w = c.w
    unused = [lack for lack in c.lacks if lack.kind == "unused"]
    pairs = list(dict.fromkeys((lack.flavor, lack.resource) for lack in unused)) or _pairs(c)
    tree = _tree(c)
    held = sorted(
        (h for h in c.queues.held if h.cluster_queue in tree and h.workload != w.ref),
        key=lambda h: (-sum(h.usage.get(p, 0) for p in pairs), h.workload),
    )
    held = [h for h in held if any(h.usage.get(p) for p in pairs)]
    quota = tuple(
        u for u in c.queues.uses if u.queue == c.queue_name and (u.flavor, u.resource) in pairs
    )
    preemption, helps = _preemption(c, held, unused)
    if unused:
        need = "; ".join(
            f"{shown(r, lack.needed or 0)} more {r} in flavor {f}"
            for (f, r), lack in {(x.flavor, x.resource): x for x in unused}.items()
        )
        lacking = f"Kueue needs {need} than is unused now"
    elif c.kueue is not None:
        lacking = f"Kueue has not reserved quota ({c.kueue.reason}: {c.kueue.message})"
    else:
        lacking = "Kueue has not tried it yet (no QuotaReserved condition: a StrictFIFO queue "
        lacking += "tries only its head)"
    fits = "fits" if c.queue is not None else "waits for"
    verdict = f"The {c.kind} ({c.where}) {fits} ClusterQueue {c.queue_name or '(unknown)'}"
    verdict += "'s quota, but not now: " if c.queue is not None else ": "
    verdict += lacking + ". " + _holders_text(held, pairs, c.queue_name) + " " + preemption
    if helps:
        action = "wait: Kueue preempts the lower-priority Workloads named for it"
    else:
        first = _and([h.workload for h in held[:2]]) or "the admitted Workloads"
        flavor, resource = pairs[0] if pairs else ("", "its GPUs")
        action = f"wait for {first} to finish, or raise ClusterQueue {c.queue_name}'s "
        action += f"nominalQuota for {resource}" + (f" in flavor {flavor}" if flavor else "")
        if preemption.startswith("Preemption is off"):
            action += (
                "; to let an urgent job go first, set the ClusterQueue's "
                "spec.preemption.withinClusterQueue: LowerPriority and give the job a higher "
                "WorkloadPriorityClass"
            )
    return _Found("not-now", verdict, action, tuple(held), quota, preemption)


def _pairs(c: _Case) -> list[tuple[str, str]]:
    """(flavor, resource) of the ClusterQueue's quotas for the GPUs the job asks for."""
    if c.queue is None:
        return []
    wanted = {r for s in c.sets for r, v in s.requests.items() if v > 0 and c.queues.is_gpu(r)}
    return [
        (fq.flavor, r)
        for g in c.queue.groups
        for fq in g.flavors
        for r in fq.resources
        if r in wanted
    ]


def _tree(c: _Case) -> frozenset[str]:
    """The ClusterQueues that share quota with its own: its cohort tree's."""
    supply = c.queues.supply
    if c.queue is None or not c.queue.cohort:
        return frozenset({c.queue_name})
    root = _root(supply, c.queue.cohort)
    return frozenset(
        n for n, q in supply.cluster_queues.items() if q.cohort and _root(supply, q.cohort) == root
    )


def _root(supply: QueueSupply, cohort: str) -> str:
    seen: set[str] = set()
    while cohort not in seen and len(seen) < 64:
        seen.add(cohort)
        found = supply.cohorts.get(cohort)
        if found is None or not found.parent:
            break
        cohort = found.parent
    return cohort


def _holders_text(held: list[Held], pairs: list[tuple[str, str]], queue: str) -> str:
    if not held:
        return "No admitted Workload that was read holds it."
    shown_ = []
    for h in held:
        text = h.workload + (f" ({h.job})" if h.job else "") + f" {_amounts(h, pairs)}"
        shown_.append(
            text + (f" in ClusterQueue {h.cluster_queue}" if h.cluster_queue != queue else "")
        )
    verb = "holds" if len(held) == 1 else "hold"
    return f"{plural(len(held), 'admitted Workload')} {verb} it: {listing(shown_, SHOWN_HOLDERS)}."


def _amounts(h: Held, pairs: list[tuple[str, str]]) -> str:
    flavors = len({f for f, _ in pairs}) > 1
    return ", ".join(
        f"{shown(r, h.usage[(f, r)])} {r}" + (f" in flavor {f}" if flavors else "")
        for f, r in pairs
        if h.usage.get((f, r))
    )


def _preemption(c: _Case, held: list[Held], unused: list[Lack]) -> tuple[str, bool]:
    """In words, whether Kueue's preemption could make room now (an upper bound: Kueue
    also weighs the order of candidates and, to reclaim, that the job fits its nominal
    quota); and whether it could."""
    status = c.queues.statuses.get(c.queue_name)
    policy = status.preemption if status else {}
    within = str(policy.get("withinClusterQueue") or "Never")
    reclaim = str(policy.get("reclaimWithinCohort") or "Never")
    borrow = str(as_dict(policy.get("borrowWithinCohort")).get("policy") or "Never")
    text = f"withinClusterQueue {within}, reclaimWithinCohort {reclaim}"
    text += f", borrowWithinCohort {borrow}" if borrow != "Never" else ""
    if within == reclaim == borrow == "Never":
        default = "" if policy else ", Kueue's default"
        return (
            f"Preemption is off in ClusterQueue {c.queue_name} ({text}{default}): the job "
            "waits until the Workloads holding the quota finish.",
            False,
        )
    borrowing = {u.queue for u in c.queues.uses if u.borrowed > 0}
    rules = (c.queue_name, within, reclaim, borrow)
    victims = [h for h in held if _may_evict(c.w, h, rules, borrowing)]
    names = _and([v.workload for v in victims]) or "none of them"
    for lack in unused:
        pair = (lack.flavor, lack.resource)
        freed = sum(v.usage.get(pair, 0) for v in victims)
        if lack.needed is not None and freed >= lack.needed:
            return (
                f"Preemption could make room ({text}): Kueue may evict {names}, which hold "
                f"{shown(lack.resource, freed)} {lack.resource} in flavor {lack.flavor}, for the "
                f"{shown(lack.resource, lack.needed)} more needed.",
                True,
            )
    first = unused[0] if unused else None
    if first is None or first.needed is None:
        return f"Preemption is allowed ({text}); the Workloads it may evict: {names}.", False
    r = first.resource
    freed = sum(v.usage.get((first.flavor, r), 0) for v in victims)
    return (
        f"Preemption cannot make room ({text}): the Workloads it may evict hold "
        f"{shown(r, freed)} of the {shown(r, first.needed)} {r} more needed in flavor "
        f"{first.flavor}: the job waits until others finish.",
        False,
    )


def _and(names: list[str]) -> str:
    """`a, b and c`; a long list is cut as `listing` cuts it."""
    if len(names) <= 1 or len(names) > SHOWN_HOLDERS:
        return listing(names, SHOWN_HOLDERS)
    return ", ".join(names[:-1]) + " and " + names[-1]


def _may_evict(w: Workload, h: Held, rules: tuple[str, str, str, str], borrowing: set[str]) -> bool:
    """Whether Kueue's classical preemption may evict `h` for `w` (the policies' API docs,
    apis/kueue/v1beta2 clusterqueue_types.go ClusterQueuePreemption)."""
    queue, within, reclaim, borrow = rules
    lower = h.priority < w.priority
    if h.cluster_queue == queue:
        newer = h.priority == w.priority and h.created > w.created
        return (within == "LowerPriority" and lower) or (
            within == "LowerOrNewerEqualPriority" and (lower or newer)
        )
    reclaims = reclaim == "Any" or (reclaim == "LowerPriority" and lower)
    if h.cluster_queue in borrowing and reclaims:
        return True
    return borrow == "LowerPriority" and lower


def _requests(sets: tuple[PodSet, ...]) -> dict[str, str]:
    total: dict[str, int] = {}
    for s in sets:
        for r in s.requests:
            total[r] = total.get(r, 0) + s.total(r)
    return {r: shown(r, n) for r, n in total.items() if n}


def _facts(c: _Case, found: _Found) -> list[Fact]:
    w = c.w
    about = f"Workload {w.ref}"
    out = [
        Fact(about, f"condition {k.type}", f"{k.status}, {k.reason}: {k.message}")
        for k in w.conditions
    ]
    for s in c.sets:
        gpus = [f"{shown(r, n)} {r}" for r, n in s.requests.items() if c.queues.is_gpu(r) and n]
        if gpus:
            out.append(Fact(about, f"pod set {s.name}", f"{s.count} x {' and '.join(gpus)}"))
    for u in found.quota:
        r = u.resource
        out.append(
            Fact(
                f"ClusterQueue {u.queue}",
                f"{r} in flavor {u.flavor}",
                f"{shown(r, u.used)} used ({shown(r, u.borrowed)} borrowed) of nominal "
                f"{shown(r, u.nominal)}, at most {shown(r, u.most)} with its cohort: {u.state}",
            )
        )
    for h in found.held[:SHOWN_HOLDERS]:
        used = [(f, r, n) for (f, r), n in h.usage.items() if c.queues.is_gpu(r)]
        held = ", ".join(f"{shown(r, n)} {r} in flavor {f}" for f, r, n in used)
        value = f"{held} (priority {h.priority}" + (f", {h.job})" if h.job else ")")
        out.append(Fact(f"Workload {h.workload}", f"admitted to {h.cluster_queue}", value))
    status = c.queues.statuses.get(c.queue_name)
    pending = status.status.get("pendingWorkloads") if status is not None else None
    if found.state == "not-now" and isinstance(pending, int):
        out.append(Fact(f"ClusterQueue {c.queue_name}", "pending Workloads", str(pending)))
    return out


def _commands(c: _Case, found: _Found) -> tuple[str, ...]:
    ns, name = c.w.ref.split("/", 1)
    out = [f"kubectl get workloads -n {ns}", f"kubectl describe workload -n {ns} {name}"]
    if found.state == "inadmissible":
        out.append(f"kubectl get localqueues -n {ns}")
    if c.queue_name:
        out.append(f"kubectl get clusterqueue {c.queue_name} -o yaml")
    for h in found.held[:2]:
        hns, hname = h.workload.split("/", 1)
        out.append(f"kubectl describe workload -n {hns} {hname}")
    kind, job, _ = c.w.owner
    if kind:
        out.append(f"kubectl describe {kind.lower()} -n {ns} {job}")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class _Suspended:
    """A suspended job (Kueue suspends a job until its Workload is admitted)."""

    owner: str  # its controller's uid: a JobSet's Job points to the JobSet
    obj: Mapping[str, Any]


class KueueCollector:
    """Workloads, ClusterQueues' preemption and status, suspended jobs and the Pending
    Pods' uids, fed one by one in any order; `records` judges the Workloads not admitted."""

    __slots__ = ("_held", "_jobs", "_pods", "_statuses", "_waiting", "latest")

    def __init__(self) -> None:
        self._waiting: dict[str, Workload] = {}
        self._held: dict[str, Held] = {}
        self._statuses: dict[str, QueueStatus] = {}
        self._jobs: dict[str, _Suspended] = {}
        self._pods: dict[str, tuple[str, str]] = {}  # Pending Pod -> its uid, its owner's
        self.latest: datetime | None = None  # the newest time a Workload carries

    def add(self, obj: Mapping[str, Any]) -> bool:
        """Take a Workload (True), or note a ClusterQueue's status or a suspended job."""
        if is_workload(obj):
            self._workload(parse_workload(obj))
            return True
        meta, spec = as_dict(obj.get("metadata")), as_dict(obj.get("spec"))
        if obj.get("kind") == "ClusterQueue" and isinstance(meta.get("name"), str):
            preemption = as_dict(spec.get("preemption"))
            self._statuses[meta["name"]] = QueueStatus(preemption, as_dict(obj.get("status")))
        elif spec.get("suspend") is True or as_dict(spec.get("runPolicy")).get("suspend") is True:
            uid = meta.get("uid")
            if isinstance(uid, str) and uid:
                self._jobs[uid] = _Suspended(_controller_uid(meta), obj)
        return False

    def _workload(self, w: Workload) -> None:
        times = [t for t in (parse_time(w.created), *(c.since for c in w.conditions)) if t]
        self.latest = max([*times, *([self.latest] if self.latest else [])], default=None)
        if w.holds("Finished"):
            return
        if w.held is not None:
            self._held[w.ref] = w.held
        elif not w.holds("QuotaReserved"):
            self._waiting[w.ref] = w

    def pod(self, ref: str, meta: Mapping[str, Any]) -> None:
        """A Pending Pod under diagnosis: its Workload may name it, or its job."""
        self._pods[ref] = (str(meta.get("uid") or ""), _controller_uid(meta))

    def records(
        self,
        *,
        supply: QueueSupply,
        is_gpu: Callable[[str], bool],
        kinds: Sequence[KindShape],
        now: datetime | None,
        namespace: str | None = None,
        only: bool = False,
    ) -> tuple[list[QueuedRecord], dict[str, QueuedRecord]]:
        """The records of the GPU Workloads not admitted, and each Pending Pod's record
        by Pod (`only`: just the Workloads of the Pods under diagnosis)."""
        statuses = {n: s.status for n, s in self._statuses.items()}
        uses = queue_uses(supply, statuses, is_gpu=is_gpu)
        queues = Queues(supply, self._statuses, uses, list(self._held.values()), is_gpu)
        links = self._links()
        pods: dict[str, list[str]] = {}
        for pod, ref in sorted(links.items()):
            pods.setdefault(ref, []).append(pod)
        out: dict[str, QueuedRecord] = {}
        for ref, w in sorted(self._waiting.items()):
            if (namespace is not None and w.namespace != namespace) or (only and ref not in pods):
                continue
            sets, kind = self._sets(w, kinds)
            if any(is_gpu(r) and v > 0 for s in sets for r, v in s.requests.items()):
                found = tuple(pods.get(ref, ()))
                out[ref] = queued_record(
                    w, sets=sets, kind=kind, queues=queues, pods=found, now=now
                )
        return list(out.values()), {p: out[r] for p, r in links.items() if r in out}

    def _links(self) -> dict[str, str]:
        """Pending Pod -> the Workload that holds it: one naming the Pod (Kueue's Pod
        integration), its job, or the job that owns its job (a JobSet's Job)."""
        by_owner = {uid: ref for ref, w in self._waiting.items() for uid in w.owners}
        out = {}
        for pod, (uid, owner) in self._pods.items():
            job = self._jobs.get(owner)
            found = by_owner.get(uid) or by_owner.get(owner)
            found = found or (by_owner.get(job.owner) if job is not None else None)
            if found:
                out[pod] = found
        return out

    def _sets(self, w: Workload, kinds: Sequence[KindShape]) -> tuple[tuple[PodSet, ...], str]:
        """The job's own pod sets where it was read (what `check` judges), else the
        Workload's; and the job's kind."""
        job = self._jobs.get(w.owner[2])
        view = workload_of(job.obj, custom=kinds) if job is not None else None
        if view is not None and view.roles:
            return pod_sets(view), view.kind
        return w.sets, w.owner[0] or "Workload"


def _controller_uid(meta: Mapping[str, Any]) -> str:
    refs = [as_dict(o) for o in as_list(meta.get("ownerReferences"))]
    return next((str(o.get("uid") or "") for o in refs if o.get("controller") is True), "")
