"""Tenants: named groups of namespaces, each with what its workloads may use of GPUs.

A namespace belongs to the first tenant whose `namespaces` (names or globs) holds its
name; failing that, to the first whose `namespaceSelector` (a metav1.LabelSelector)
selects its labels. Names win over selectors so that a namespace a tenant names is
judged by that tenant even where the Namespace's labels are not known (admission,
`check` without the Namespace object). Labels come from the inventory's Namespaces
(webhook.core.dra.model DraSupply.namespaces), with `kubernetes.io/metadata.name`,
which the apiserver sets on every Namespace since 1.21 (NamespaceDefaultLabelName).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple

from webhook.core.kit.selectors import selects
from webhook.core.kit.text import glob_matcher
from webhook.core.supply.nodes import SharingMode

NAME_LABEL = "kubernetes.io/metadata.name"
# Shared with others on one device: time-slicing and MPS replicas, vGPU shares. MIG is
# hardware isolation (its own memory, cache and SMs: NVIDIA MIG user guide), and is not.
SHARED_MODES: frozenset[SharingMode] = frozenset({"time-slicing", "mps", "vgpu"})


@dataclass(frozen=True, slots=True)
class Limit:
    """A memory limit: MiB, and the quantity as the policy writes it (`40Gi`)."""

    mib: Fraction
    text: str


@dataclass(frozen=True, slots=True)
class Tenant:
    name: str
    namespaces: tuple[str, ...]  # names or globs
    selector: Mapping[str, Any] | None  # a metav1.LabelSelector, as written
    products: tuple[str, ...] = ()  # globs; empty: any
    mig_profiles: tuple[str, ...] = ()  # globs over profile names (1g.10gb); empty: any
    sharing: tuple[SharingMode, ...] = ()  # empty: any
    dra_classes: tuple[str, ...] = ()  # globs over DeviceClass names; empty: any
    max_gpus_per_pod: int | None = None
    max_gpus_per_job: int | None = None
    max_memory_per_pod: Limit | None = None
    max_memory_per_job: Limit | None = None
    trusted: bool = True

    def allows_product(self, product: str) -> bool:
        return not self.products or glob_matcher(self.products)(product)

    def allows_profile(self, profile: str) -> bool:
        return not self.mig_profiles or glob_matcher(self.mig_profiles)(profile)

    def allows_class(self, name: str) -> bool:
        return not self.dra_classes or glob_matcher(self.dra_classes)(name)

    def allows_mode(self, mode: SharingMode) -> bool:
        return not self.sharing or mode in self.sharing

    def accepts_mode(self, mode: SharingMode) -> bool:
        """Allowed by `sharing`, and not shared with others where the tenant is untrusted."""
        return self.allows_mode(mode) and (self.trusted or mode not in SHARED_MODES)

    @property
    def judges_placement(self) -> bool:
        """Whether anything about where its Pods land is restricted."""
        return bool(self.products or self.mig_profiles or self.sharing or not self.trusted)


class Resolution(NamedTuple):
    """The tenant of a namespace, or why none can be named: the tenants whose selector
    could have taken it, had its labels been known."""

    tenant: Tenant | None
    undecided: tuple[Tenant, ...] = ()


NOBODY = Resolution(None)


def tenant_of(
    namespace: str, *, tenants: tuple[Tenant, ...], labels: Mapping[str, str] | None
) -> Resolution:
    """The tenant of `namespace`; `labels`: the Namespace's, None when not known."""
    for tenant in tenants:
        if tenant.namespaces and glob_matcher(tenant.namespaces)(namespace):
            return Resolution(tenant)
    if labels is not None and NAME_LABEL not in labels:
        labels = {**labels, NAME_LABEL: namespace}
    undecided: list[Tenant] = []
    for tenant in tenants:
        if tenant.selector is None:
            continue
        if _empty(tenant.selector):  # selects every namespace, whatever its labels
            return Resolution(tenant) if not undecided else Resolution(None, (*undecided, tenant))
        if labels is None:
            undecided.append(tenant)
        elif not undecided and selects(tenant.selector, labels):
            return Resolution(tenant)
    return Resolution(None, tuple(undecided)) if undecided else NOBODY


def _empty(selector: Mapping[str, Any]) -> bool:
    return not selector.get("matchLabels") and not selector.get("matchExpressions")
