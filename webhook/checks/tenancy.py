"""gpu-tenancy: each tenant's workloads use only the GPUs, sharing modes and amounts it
is allowed (docs/tenancy.md).

It judges the `workload` target (every role with its replica count: the per-job limits
add up all of them) and, where a tenant limits DeviceClasses, DRA claim objects. A
namespace belongs to a tenant by name or by namespaceSelector (webhook.core.tenancy.tenants);
a namespace of no tenant is not judged. The model and the rules are webhook.core.tenancy.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from webhook.core.access.gpuresources import DEVICE_PLUGIN_GPUS, GpuResources, gpu_resources
from webhook.core.access.shares import SHARE_ANNOTATIONS
from webhook.core.engine.check import Check, CheckParams, ParamError, Rule, camel
from webhook.core.engine.context import Context
from webhook.core.engine.policy import LabelSelector
from webhook.core.engine.reads import Reads
from webhook.core.jobs.model import Reading
from webhook.core.kit.quantity import to_mib
from webhook.core.kit.text import glob_matcher, shown
from webhook.core.kit.violation import Violation
from webhook.core.supply import mig_catalog
from webhook.core.supply.inventory import SHARING_MODES
from webhook.core.tenancy.landing import PRODUCT_LABELS
from webhook.core.tenancy.tenants import Limit, Tenant, tenant_of
from webhook.core.tenancy.workload import Reader, judge_claim, judge_workload
from webhook.core.workloads.kinds import WorkloadView
from webhook.core.workloads.targets import ClaimView, TargetKind
from webhook.errors import QuantityError


@dataclass(frozen=True)
class TenantParams(CheckParams):
    """One tenant as the policy writes it."""

    name: str
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    products: tuple[str, ...] = ()
    mig_profiles: tuple[str, ...] = ()
    sharing: tuple[str, ...] = ()
    dra_classes: tuple[str, ...] = ()
    max_gpus_per_pod: int | None = None
    max_gpus_per_job: int | None = None
    max_gpu_memory_per_pod: str | None = None
    max_gpu_memory_per_job: str | None = None
    trust: Literal["trusted", "untrusted"] = "trusted"

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ParamError("name", "a tenant needs a name: findings and messages quote it")
        if not self.namespaces and self.namespace_selector is None:
            raise ParamError(
                "namespaces",
                f"tenant {self.name!r} has neither namespaces nor a namespaceSelector: it "
                f"would match no namespace",
            )
        _check_selector(self.namespace_selector)
        unknown = [m for m in self.sharing if m not in SHARING_MODES]
        if unknown:
            raise ParamError(
                "sharing",
                f"unknown sharing mode {unknown[0]!r}; use some of: {', '.join(SHARING_MODES)}",
            )
        for profile in self.mig_profiles:
            _check_profile(profile)
        for name in ("max_gpus_per_pod", "max_gpus_per_job"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ParamError(camel(name), f"{value} is below zero: write a count of GPUs")
        for name in ("max_gpu_memory_per_pod", "max_gpu_memory_per_job"):
            _limit(getattr(self, name), camel(name))

    @cached_property
    def model(self) -> Tenant:
        selector = self.namespace_selector
        return Tenant(
            name=self.name,
            namespaces=self.namespaces,
            selector=None if selector is None else _selector_dict(selector),
            products=self.products,
            mig_profiles=tuple(p.replace(".me", "+me") for p in self.mig_profiles),
            sharing=tuple(m for m in SHARING_MODES if m in self.sharing),
            dra_classes=self.dra_classes,
            max_gpus_per_pod=self.max_gpus_per_pod,
            max_gpus_per_job=self.max_gpus_per_job,
            max_memory_per_pod=_limit(self.max_gpu_memory_per_pod, "maxGpuMemoryPerPod"),
            max_memory_per_job=_limit(self.max_gpu_memory_per_job, "maxGpuMemoryPerJob"),
            trusted=self.trust == "trusted",
        )


def _check_selector(selector: LabelSelector | None) -> None:
    for req in selector.matchExpressions if selector is not None else ():
        wants = req.operator in ("In", "NotIn")
        if wants != bool(req.values):
            need = "needs values" if wants else "takes no values"
            raise ParamError(
                "namespaceSelector",
                f"matchExpressions key {req.key!r}: operator {req.operator} {need} "
                f"(metav1.LabelSelector)",
            )


def _check_profile(profile: str) -> None:
    if any(c in profile for c in "*?["):
        return
    if not mig_catalog.PROFILE_RE.match(profile.replace(".me", "+me")):
        raise ParamError(
            "migProfiles",
            f"{profile!r} is not a MIG profile: write it as nvidia-smi does, e.g. 1g.10gb or "
            f"3g.40gb (not the resource name nvidia.com/mig-1g.10gb)",
        )


def _limit(raw: str | None, field: str) -> Limit | None:
    if raw is None:
        return None
    text = raw.strip()
    try:
        mib = to_mib(text)
    except QuantityError:
        raise ParamError(
            field, f"{shown(raw)!r} is not a Kubernetes quantity: write e.g. 40Gi or 80G"
        ) from None
    if text.isdigit():
        raise ParamError(
            field, f"{text!r} has no unit, so it means {text} bytes: write e.g. {text}Gi"
        )
    if mib <= 0:
        raise ParamError(field, f"{shown(raw)!r} is not above zero")
    return Limit(mib, text)


def _selector_dict(selector: LabelSelector) -> dict[str, object]:
    return {
        "matchLabels": dict(selector.matchLabels),
        "matchExpressions": [
            {"key": r.key, "operator": r.operator, "values": list(r.values)}
            for r in selector.matchExpressions
        ],
    }


@dataclass(frozen=True)
class Params(CheckParams):
    tenants: tuple[TenantParams, ...] = ()
    gpu_resources: tuple[str, ...] = DEVICE_PLUGIN_GPUS
    product_labels: tuple[str, ...] = PRODUCT_LABELS

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for tenant in self.tenants:
            if tenant.name in seen:
                raise ParamError("tenants", f"tenant {tenant.name!r} is given twice")
            seen.add(tenant.name)
        if not self.product_labels:
            raise ParamError("productLabels", "name at least one node label of GPU products")

    @cached_property
    def model(self) -> tuple[Tenant, ...]:
        return tuple(t.model for t in self.tenants)

    @cached_property
    def gpus(self) -> GpuResources:
        return gpu_resources(include=self.gpu_resources)

    @cached_property
    def reader(self) -> Reader:
        reading = Reading(self.gpus, self.product_labels, glob_matcher(()), frozenset())
        return Reader(self.gpus, self.product_labels, reading)


def run(
    target: WorkloadView | ClaimView, *, context: Context, params: Params
) -> Iterator[Violation]:
    namespace = context.namespace
    labels = context.inventory.dra.namespaces.get(namespace)
    found = tenant_of(namespace, tenants=params.model, labels=labels)
    if found.tenant is None and not found.undecided:
        return  # a namespace of no tenant: nearly every object, one pass over the tenants
    if type(target) is ClaimView:
        if found.tenant is not None:
            yield from judge_claim(target.obj, tenant=found.tenant, namespace=namespace)
        return
    assert type(target) is WorkloadView
    yield from judge_workload(
        target,
        found=found,
        inventory=context.inventory,
        namespace=namespace,
        reader=params.reader,
    )


def judges(params: Params) -> Mapping[TargetKind, Reads]:
    """Nothing until a tenant is configured; then GPU requests and shares (KAI's by
    annotation), DRA claims where a tenant limits DeviceClasses, and the inventory's
    Namespaces and claims where a tenant selects namespaces by label or limits classes."""
    if not params.tenants:
        return {}
    classes = any(t.dra_classes for t in params.tenants)
    supply = classes or any(t.namespace_selector is not None for t in params.tenants)
    reads: dict[TargetKind, Reads] = {
        "workload": Reads(
            extended_resources=True,
            claims=classes,
            annotations=SHARE_ANNOTATIONS,
            dra_supply=supply,
        )
    }
    if classes:
        reads["claim"] = Reads(dra_supply=supply)
    return reads


CHECK = Check(
    name="tenancy",
    params=Params,
    run=run,
    judges=judges,
    rules={
        "product-not-allowed": Rule(
            "A GPU request that can land on a GPU product the tenant may not use.",
            uses_inventory=True,
        ),
        "mig-profile-not-allowed": Rule(
            "A MIG slice of a profile the tenant may not use.", uses_inventory=True
        ),
        "sharing-not-allowed": Rule(
            "A GPU request that can land on a GPU in a sharing mode the tenant may not use.",
            uses_inventory=True,
        ),
        "untrusted-on-shared-gpu": Rule(
            "An untrusted tenant's GPU request that can land on a GPU shared with others "
            "(time-slicing, MPS, vGPU).",
            uses_inventory=True,
        ),
        "dra-class-not-allowed": Rule("A DRA claim for a DeviceClass the tenant may not use."),
        "too-many-gpus-per-pod": Rule("A Pod with more GPUs than its tenant allows per Pod."),
        "too-many-gpus-per-job": Rule(
            "A workload whose Pods together hold more GPUs than its tenant allows per job."
        ),
        "too-much-gpu-memory-per-pod": Rule(
            "A Pod whose GPUs hold more memory than its tenant allows per Pod.",
            uses_inventory=True,
        ),
        "too-much-gpu-memory-per-job": Rule(
            "A workload whose Pods' GPUs hold more memory than its tenant allows per job.",
            uses_inventory=True,
        ),
        "unknown-tenant": Rule(
            "A GPU workload in a namespace whose tenant cannot be told: no tenant names it "
            "and its labels are not known (reported, never allowed)."
        ),
    },
)
