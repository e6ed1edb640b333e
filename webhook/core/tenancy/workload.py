"""One workload judged for its tenant: every role's Pod by the placement and per-Pod
rules (a template several roles share, once), then the job by the per-job limits."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from webhook.core.access.gpuresources import GpuResources
from webhook.core.dra.model import parse_claim
from webhook.core.jobs.model import Reading, job_of
from webhook.core.kit.paths import Path
from webhook.core.kit.text import listing, shown
from webhook.core.kit.violation import Violation
from webhook.core.supply.inventory import Inventory
from webhook.core.tenancy.claims import asks_classes
from webhook.core.tenancy.judged import Judged
from webhook.core.tenancy.limits import (
    Member,
    per_job,
    too_many_gpus_per_pod,
    too_much_memory_per_pod,
    totals,
)
from webhook.core.tenancy.placement import (
    claim_class_not_allowed,
    dra_class_not_allowed,
    mig_profile_not_allowed,
    product_not_allowed,
    sharing_not_allowed,
    untrusted_on_shared_gpu,
)
from webhook.core.tenancy.tenants import Resolution, Tenant
from webhook.core.tenancy.use import pod_use
from webhook.core.workloads.kinds import Role, WorkloadView


class Reader(NamedTuple):
    """What the policy calls GPUs and GPU products."""

    gpus: GpuResources
    product_labels: tuple[str, ...]
    reading: Reading  # the job model's (webhook.core.jobs.model): products a Pod pins


def judge_workload(
    workload: WorkloadView,
    *,
    found: Resolution,
    inventory: Inventory,
    namespace: str,
    reader: Reader,
) -> Iterator[Violation]:
    members = _members(workload, found.tenant, inventory, reader)
    if not members and not _claims(workload, found, inventory):
        return
    if found.tenant is None:
        yield _undecided(workload, found, namespace, members)
        return
    tenant = found.tenant
    seen: set[int] = set()
    for member in members:
        j = member.judged
        if id(j.pod) in seen:
            continue
        seen.add(id(j.pod))
        if tenant.judges_placement:
            yield from product_not_allowed(j)
            yield from mig_profile_not_allowed(j)
            yield from sharing_not_allowed(j)
            yield from untrusted_on_shared_gpu(j)
        yield from too_many_gpus_per_pod(j, member.totals)
        yield from too_much_memory_per_pod(j, member.totals)
    if tenant.dra_classes:
        for role in _distinct(workload):
            j = Judged(
                role.pod, _who(workload, role), tenant, inventory, (), None, role.pod.path, ()
            )
            yield from dra_class_not_allowed(j, supply=inventory.dra, namespace=namespace)
    yield from per_job(tenant, workload, members)


def judge_claim(obj: Mapping[str, Any], *, tenant: Tenant, namespace: str) -> Iterator[Violation]:
    """A ResourceClaim or ResourceClaimTemplate object, by the classes it names."""
    claim = parse_claim(obj, namespace=namespace)
    template = claim.kind == "ResourceClaimTemplate"
    base: Path = ("spec", "spec", "devices") if template else ("spec", "devices")
    yield from claim_class_not_allowed(tenant, claim, base=base)


def _who(workload: WorkloadView, role: Role) -> str:
    if len(workload.roles) > 1 and role.name:
        return f'in role "{shown(role.name, 63)}", '
    return ""


def _members(
    workload: WorkloadView, tenant: Tenant | None, inventory: Inventory, reader: Reader
) -> list[Member]:
    """Every role whose Pod uses GPUs, with what each Pod uses (a template that several
    roles share is worked out once)."""
    pins = _pins(workload, tenant, reader) if not inventory.known else None
    memory = tenant is not None and (
        tenant.max_memory_per_pod is not None or tenant.max_memory_per_job is not None
    )
    out: list[Member] = []
    done: dict[int, Member] = {}
    for i, role in enumerate(workload.roles):
        uses = pod_use(role.pod, gpus=reader.gpus)
        if not uses:
            continue
        seen = done.get(id(role.pod))
        if seen is not None:
            out.append(Member(role, seen.judged, seen.totals))
            continue
        pinned, pinned_path = pins[i] if pins is not None else (None, role.pod.path)
        judged = Judged(
            role.pod,
            _who(workload, role),
            tenant or _NOBODY,
            inventory,
            uses,
            pinned,
            pinned_path,
            reader.product_labels,
        )
        member = done[id(role.pod)] = Member(role, judged, totals(judged, memory=memory))
        out.append(member)
    return out


_NOBODY = Tenant("", ("",), None)  # judges nothing: stands in where no tenant is known


def _pins(
    workload: WorkloadView, tenant: Tenant | None, reader: Reader
) -> list[tuple[frozenset[str] | None, Path]]:
    """Per role, the GPU products its nodeSelector (or required affinity) pins, as the
    job model reads them: what tells a product, and its memory, without nodes."""
    if tenant is None or not (
        tenant.products or tenant.max_memory_per_pod or tenant.max_memory_per_job
    ):
        return [(None, role.pod.path) for role in workload.roles]
    job = job_of(workload, reading=reader.reading)
    return [(rank.products, rank.products_path) for rank in job.ranks]


def _claims(workload: WorkloadView, found: Resolution, inventory: Inventory) -> bool:
    """Whether a Pod asks for DRA devices, where that matters to the tenant."""
    tenants = (found.tenant,) if found.tenant is not None else found.undecided
    if not any(t.dra_classes for t in tenants):
        return False
    return any(asks_classes(r.pod, supply=inventory.dra) for r in workload.roles)


def _distinct(workload: WorkloadView) -> list[Role]:
    """The first role of each distinct template, in order."""
    first: dict[int, Role] = {}
    for role in workload.roles:
        first.setdefault(id(role.pod), role)
    return list(first.values())


def _undecided(
    workload: WorkloadView, found: Resolution, namespace: str, members: list[Member]
) -> Violation:
    names = listing([t.name for t in found.undecided], 4)
    path = members[0].totals.path if members else workload.roles[0].pod.where("resourceClaims")
    return Violation(
        "unknown-tenant",
        path,
        f"namespace {shown(namespace, 63)} is named by no tenant, and its labels are not "
        f"known (no Namespace object in the inventory), so whether the namespaceSelector of "
        f"tenant {names} takes it cannot be told and its GPU use is not judged. Give the "
        f"Namespace with the checked files or the inventory (kubectl get namespaces -o yaml), "
        f"or name it in the tenant's namespaces.",
        advisory=True,
    )
