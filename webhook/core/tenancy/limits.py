"""The tenancy limits: GPUs and GPU memory per Pod, and per job.

A job is the whole workload object: the sum over its roles of replicas x the Pod's use
(a Deployment's replicas, a Job's parallelism, a PyTorchJob's replica types; a bare Pod
is a job of one). A role whose Pod count the object does not fix (a DaemonSet: one per
eligible node) counts at least one Pod: over the limit with one, it is reported; else
what cannot be counted is a warning.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from fractions import Fraction
from typing import NamedTuple

from webhook.core.access.shares import memory_request
from webhook.core.kit.paths import Path
from webhook.core.kit.text import plural
from webhook.core.kit.violation import Violation
from webhook.core.supply.scheduling import candidates, node_listing, offered
from webhook.core.tenancy.judged import Judged
from webhook.core.tenancy.landing import fit_nodes, pin_fix
from webhook.core.tenancy.placement import NO_INVENTORY
from webhook.core.tenancy.tenants import Limit, Tenant
from webhook.core.tenancy.use import Memory, Use, device_memory, devices, gib, per_allocation, up
from webhook.core.workloads.kinds import Role, WorkloadView


class Unknown(NamedTuple):
    use: Use
    memory: Memory


class Totals(NamedTuple):
    """One Pod's use: its GPUs, and its GPU memory where every device's is known."""

    gpus: int
    memory: Fraction | None
    # 'container "x" asks 2 nvidia.com/mig-3g.40gb (2 x 39.5Gi = 79Gi, <where that is from>)'
    parts: tuple[str, ...]
    unknown: Unknown | None
    path: Path  # the first GPU request
    shown: Fraction = Fraction(0)  # the memory as the parts show it (use.up)


def totals(j: Judged, *, memory: bool) -> Totals:
    """`memory`: work out the memory too (only a tenant with a memory limit needs it)."""
    parts: list[str] = []
    total: Fraction | None = Fraction(0)
    shown = Fraction(0)
    unknown: Unknown | None = None
    for use in j.uses if memory else ():
        found = device_memory(j.pod, use, j.inventory, pinned=j.pinned)
        if found is None:  # no node can take it: nothing to add up
            continue
        if found.mib is None or found.unknown:
            unknown = unknown or Unknown(use, found)
        if found.mib is None:
            total = None
            continue
        amount = found.mib * use.devices
        shown += use.devices * up(found.mib)
        parts.append(
            f"{use.what} ({use.devices} x {gib(found.mib)} = {gib(use.devices * up(found.mib))}, "
            f"{found.source})"
        )
        total = total + amount if total is not None else None
    return Totals(devices(j.uses), total, tuple(parts), unknown, j.uses[0].path, shown)


# -- per Pod -------------------------------------------------------------------------------


def too_many_gpus_per_pod(j: Judged, t: Totals) -> Iterator[Violation]:
    cap = j.tenant.max_gpus_per_pod
    if cap is None or t.gpus <= cap:
        return
    asked = "; ".join(u.what for u in j.uses)
    yield Violation(
        "too-many-gpus-per-pod",
        t.path,
        f"tenant {j.tenant.name} may use at most {plural(cap, 'GPU')} per Pod; {j.who}{asked} "
        f"({plural(t.gpus, 'GPU')}). Ask for at most {cap}, or spread the work over more Pods.",
    )


def too_much_memory_per_pod(j: Judged, t: Totals) -> Iterator[Violation]:
    limit = j.tenant.max_memory_per_pod
    if limit is None:
        return
    head = f"tenant {j.tenant.name} may use at most {limit.text} of GPU memory per Pod"
    if t.memory is not None and t.memory > limit.mib:
        in_all = f", {gib(t.shown)} in all" if len(t.parts) > 1 else ""
        yield Violation(
            "too-much-gpu-memory-per-pod",
            t.path,
            f"{head}; {j.who}{'; '.join(t.parts)}{in_all}. {_memory_fix(j, limit)}",
        )
    elif t.unknown is not None:
        yield _unknown(j, t.unknown, head, "too-much-gpu-memory-per-pod")


def _memory_fix(j: Judged, limit: Limit) -> str:
    if len(j.uses) != 1:
        return f"Ask for fewer or smaller devices: at most {limit.text} in all."
    use = j.uses[0]
    if use.share is not None:
        mib = math.floor(limit.mib / use.devices)
        return f"Ask for at most {limit.text} ({memory_request(use.share, mib)})."
    if j.inventory.known:
        found = _pin_within(j, use, limit)
        if found is not None:
            return found
    memory = device_memory(j.pod, use, j.inventory, pinned=j.pinned)
    per = memory.mib if memory is not None else None
    fits = math.floor(limit.mib / per) if per else 0
    if fits >= 1:
        return f"Ask for at most {fits} {use.resource}, or spread the work over more Pods."
    return f"One {use.resource} alone is over the limit: ask for a smaller device."


def _pin_within(j: Judged, use: Use, limit: Limit) -> str | None:
    """Pin the Pod onto nodes where its devices stay within the limit (and pass the
    tenant's placement rules)."""
    good = fit_nodes(use.resource, j.inventory, tenant=j.tenant, labels=j.labels)
    within = 0
    for offer, bits in offered(use.resource, j.inventory).groups():
        mib = per_allocation(offer, None)
        if mib is not None and mib * use.devices <= limit.mib:
            within |= bits
    good &= within
    bad = candidates(j.pod, use.resource, j.inventory).bits & ~good
    found = pin_fix(j.pod, j.inventory, good=good, bad=bad) if good else None
    return f"{found[:1].upper()}{found[1:]}, where it stays within the limit." if found else None


def _unknown(j: Judged, unknown: Unknown, head: str, rule: str) -> Violation:
    use, memory = unknown
    if j.inventory.known:
        nodes = node_listing(j.inventory, memory.unknown)
        return Violation(
            rule,
            use.path,
            f"{head}, but {j.who}{use.what}, and its memory on node {nodes}, where it can "
            f"land, is not known (no memory label and no catalog entry), so the Pod's use "
            f"cannot be bounded. Label the nodes with nvidia.com/gpu.memory, or pin the pod "
            f"to nodes whose memory is known.",
        )
    return Violation(
        rule,
        use.path,
        f"{head}; {j.who}{use.what}, and the memory of one device is not known "
        f"({memory.source}), so what the Pod takes cannot be judged. Pin a GPU product with "
        f"nodeSelector {j.labels[0]}, or {NO_INVENTORY}.",
        advisory=True,
    )


# -- per job -------------------------------------------------------------------------------


class Member(NamedTuple):
    """A role of the workload and what each of its Pods uses."""

    role: Role
    judged: Judged
    totals: Totals


def per_job(
    tenant: Tenant, workload: WorkloadView, members: Sequence[Member]
) -> Iterator[Violation]:
    if tenant.max_gpus_per_job is not None:
        yield from _job_gpus(tenant, tenant.max_gpus_per_job, workload, members)
    if tenant.max_memory_per_job is not None:
        yield from _job_memory(tenant, tenant.max_memory_per_job, workload, members)


def _terms(workload: WorkloadView, each: Sequence[tuple[Member, str]]) -> str:
    """`role "Master" 1 Pod x 8 GPUs + role "Worker" 3 Pods x 8 GPUs`; a Pod is a job of one."""
    if workload.kind == "Pod":
        return f"the Pod is a job of its own: 1 Pod x {each[0][1]}"
    return " + ".join(
        f"{_name(workload, m.role)} runs {_pods(m.role)} x {per}"
        if len(each) == 1
        else f"{_name(workload, m.role)} {_pods(m.role)} x {per}"
        for m, per in each
    )


def _name(workload: WorkloadView, role: Role) -> str:
    return f'role "{role.name}"' if role.name else f"the {workload.kind}"


def _job_gpus(
    tenant: Tenant, cap: int, workload: WorkloadView, members: Sequence[Member]
) -> Iterator[Violation]:
    used = [m for m in members if m.totals.gpus]
    total = sum(
        (m.role.replicas if m.role.replicas is not None else 1) * m.totals.gpus for m in used
    )
    open_ = [m for m in used if m.role.replicas is None]
    head = f"tenant {tenant.name} may use at most {plural(cap, 'GPU')} per job"
    if total > cap:
        terms = _terms(workload, [(m, plural(m.totals.gpus, "GPU")) for m in used])
        least = "at least " if open_ else ""
        yield Violation(
            "too-many-gpus-per-job",
            used[0].totals.path,
            f"{head}; {terms} = {least}{plural(total, 'GPU')}. {_job_fix(cap, used, workload)}",
        )
    elif open_:
        m = open_[0]
        yield Violation(
            "too-many-gpus-per-job",
            m.totals.path,
            f"{head}, but {_name(workload, m.role)} runs a number of Pods the object does not "
            f"fix, each with {plural(m.totals.gpus, 'GPU')}, so the job's GPUs cannot be counted.",
            advisory=True,
        )


def _pods(role: Role) -> str:
    return plural(role.replicas, "Pod") if role.replicas is not None else "at least 1 Pod"


def _job_fix(cap: int, used: Sequence[Member], workload: WorkloadView) -> str:
    if len(used) == 1 and workload.kind != "Pod":
        fits = cap // used[0].totals.gpus
        if fits >= 1:
            return f"Run at most {plural(fits, 'Pod')} at once, or ask for fewer GPUs per Pod."
    if workload.kind == "Pod":
        return f"Ask for at most {cap}."
    return "Run fewer Pods, or ask for fewer GPUs per Pod."


def _job_memory(
    tenant: Tenant, limit: Limit, workload: WorkloadView, members: Sequence[Member]
) -> Iterator[Violation]:
    used = [m for m in members if m.totals.gpus]
    head = f"tenant {tenant.name} may use at most {limit.text} of GPU memory per job"
    unknown = next((m for m in used if m.totals.memory is None), None)
    if unknown is not None:
        if tenant.max_memory_per_pod is None and unknown.totals.unknown is not None:
            yield _unknown(
                unknown.judged, unknown.totals.unknown, head, "too-much-gpu-memory-per-job"
            )
        return
    total = shown = Fraction(0)
    for m in used:
        assert m.totals.memory is not None
        pods = m.role.replicas if m.role.replicas is not None else 1
        total += pods * m.totals.memory
        shown += pods * m.totals.shown
    open_ = [m for m in used if m.role.replicas is None]
    if total > limit.mib:
        terms = _terms(workload, [(m, gib(m.totals.shown)) for m in used])
        least = "at least " if open_ else ""
        yield Violation(
            "too-much-gpu-memory-per-job",
            used[0].totals.path,
            f"{head}; {terms} = {least}{gib(shown)}. "
            + (
                "Ask for devices with less memory."
                if workload.kind == "Pod"
                else "Run fewer Pods, or ask for less GPU memory per Pod."
            ),
        )
    elif open_:
        m = open_[0]
        yield Violation(
            "too-much-gpu-memory-per-job",
            m.totals.path,
            f"{head}, but {_name(workload, m.role)} runs a number of Pods the object does not "
            f"fix, each with {gib(m.totals.shown)}, so the job's GPU memory cannot be added up.",
            advisory=True,
        )
