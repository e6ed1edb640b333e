"""gpu-resource-names: every GPU resource a pod asks for exists, in a count some node has.

The apiserver accepts any well-formed name, so a typo (`nvidia.com/mig-1g.10g`) or a
profile no node has leaves the Pod Pending forever. In a PR there is no apiserver yet,
so what it would reject (fractions, requests without limits) is reported here too.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

from webhook.core.access.model import GpuResources, gpu_amounts, gpu_requests, gpu_resources
from webhook.core.dra.match import extended_classes, extended_match
from webhook.core.engine.check import Check, CheckParams, Rule
from webhook.core.engine.context import Context
from webhook.core.engine.reads import Reads
from webhook.core.kit.dicts import as_dict
from webhook.core.kit.paths import Path, format_path
from webhook.core.kit.quantity import quantity_or_none
from webhook.core.kit.text import PLACEHOLDER, closest, is_placeholder, listing, plural, shown
from webhook.core.kit.violation import Violation
from webhook.core.supply import mig_catalog
from webhook.core.supply.inventory import Inventory
from webhook.core.supply.nearlabels import selector_hint
from webhook.core.supply.scheduling import (
    candidates,
    first_offers,
    listed,
    placement_spec,
    rejection,
)
from webhook.core.workloads.pods import PodView, ResourceAmount
from webhook.core.workloads.requests import Count
from webhook.core.workloads.targets import TargetKind


@dataclass(frozen=True)
class Params(CheckParams):
    vendor_prefixes: tuple[str, ...] = ("nvidia.com/", "amd.com/", "gpu.intel.com/")
    # Network devices NVIDIA's network operator advertises under the same nvidia.com/
    # prefix: its SR-IOV and RDMA device plugins take the prefix from the operator
    # (Mellanox/network-operator deployment/network-operator/values.yaml
    # `sriov-network-operator.operator.resourcePrefix: "nvidia.com"`, and
    # `resourcePrefix: "nvidia.com"` for the RDMA shared device plugin in
    # example/crs/mellanox.com_v1alpha1_nicclusterpolicy_cr-full.yaml, both at
    # b06827e0) and the name from the platform's config: `sriovlegacy`
    # (example/sriov-network/sriov-network-node-policy-legacy.yaml), `sriov_rdma_vf`
    # (scripts/sosreport/kubectl-netop_sosreport), `rdma_shared_device_a`
    # (config/samples), `hostdev` (HostDeviceNetwork), `mlnxnics` (infiniband example);
    # OCI's add-on names its VFs `rdma-vf`. Names are free, so these are families
    # by the operator's own naming; a platform adds its own here.
    network_resources: tuple[str, ...] = (
        "nvidia.com/sriov*",
        "nvidia.com/rdma*",
        "nvidia.com/hostdev*",
        "nvidia.com/mlnxnics*",
    )
    # Names under a vendor prefix that are not GPU counts: HAMi's memory and core shares
    # (its scheduler reads them; no node advertises them as allocatable).
    ignored_resources: tuple[str, ...] = (
        "nvidia.com/gpumem",
        "nvidia.com/gpumem-percentage",
        "nvidia.com/gpucores",
    )
    # Accepted without an inventory besides the NVIDIA catalog names.
    known_without_inventory: tuple[str, ...] = (
        "amd.com/gpu",
        "gpu.intel.com/i915",
        "gpu.intel.com/xe",
    )

    @cached_property
    def gpus(self) -> GpuResources:
        return gpu_resources(
            prefixes=self.vendor_prefixes, exclude=self.network_resources + self.ignored_resources
        )


def _apiserver_rules(pod: PodView, amounts: Sequence[ResourceAmount]) -> Iterator[Violation]:
    for a in amounts:
        resources = as_dict(a.container.spec.get("resources"))
        limits, requests = as_dict(resources.get("limits")), as_dict(resources.get("requests"))
        whole = a.amount is not None and a.amount.denominator == 1 and a.amount >= 0
        if (
            whole
            and a.resource in limits
            and (
                a.resource not in requests
                or _same(requests[a.resource], limits[a.resource])
                or not _quantity_differs(requests[a.resource], limits[a.resource])
            )
        ):
            continue  # the common case, without building any message text
        where = f"{a.container.label} ({format_path(a.path)})"
        if is_placeholder(a.raw):
            yield Violation(
                "non-integer-count",
                a.path,
                f'{where} asks for "{shown(a.raw)}" {a.resource}: {PLACEHOLDER}.',
            )
        elif a.amount is None or a.amount.denominator != 1 or a.amount < 0:
            yield Violation(
                "non-integer-count",
                a.path,
                f'{where} asks for "{shown(a.raw)}" {a.resource}: extended resources must be '
                f"whole numbers, so the apiserver rejects the Pod. Request a whole count, or a "
                f"smaller unit such as a MIG or shared resource.",
            )
        elif a.resource not in limits:
            yield Violation(
                "request-without-limit",
                a.path,
                f"{where} requests {a.resource} without a limit: the apiserver rejects extended "
                f"resources without limits. Set resources.limits[{a.resource}] to the same count "
                f"(a limit alone is enough; the request defaults to it).",
            )
        elif a.resource in requests and is_placeholder(requests[a.resource]):
            yield Violation(
                "request-limit-mismatch",
                a.path,
                f'{where} requests "{shown(requests[a.resource])}" {a.resource}: {PLACEHOLDER}.',
            )
        elif a.resource in requests and _quantity_differs(requests[a.resource], limits[a.resource]):
            yield Violation(
                "request-limit-mismatch",
                a.path,
                f"{where} requests {shown(requests[a.resource])} but limits "
                f"{shown(limits[a.resource])} {a.resource}: extended resources cannot be "
                f"overcommitted, so the apiserver rejects the Pod. Make them equal.",
            )


def _same(a: object, b: object) -> bool:
    # The same text (nearly always "1" and "1"): the same count, without parsing it. Of
    # one type only: True == 1 in Python, but true is no quantity.
    return type(a) is str and type(b) is str and a == b


def _quantity_differs(a: object, b: object) -> bool:
    return quantity_or_none(a) != quantity_or_none(b)


_SUGGESTIONS = 8  # unknown names per pod that get a "did you mean"


@lru_cache(maxsize=16)
def _names_without_inventory(extra: tuple[str, ...]) -> frozenset[str]:
    return frozenset(mig_catalog.catalog_resource_names() | set(extra))


def _unknown_names(
    pod: PodView, inventory: Inventory, amounts: Sequence[ResourceAmount], params: Params
) -> Iterator[Violation]:
    known: Collection[str] = (
        inventory.offers
        if inventory.known
        else _names_without_inventory(params.known_without_inventory)
    )
    if all(a.resource in known for a in amounts):
        return
    if inventory.known:
        scope = f"no node in the inventory ({plural(inventory.node_count, 'node')}) advertises"
    else:
        scope = "is not a name any GPU device plugin advertises"
    reported: set[str] = set()
    for a in amounts:
        if a.resource in known or a.resource in reported:
            continue
        reported.add(a.resource)
        if extended_classes(inventory.dra, a.resource):
            continue  # KEP-5004: a DeviceClass serves it through DRA (see _dra_capacity)
        vendor = next(p for p in params.vendor_prefixes if a.resource.startswith(p))
        names = sorted(n for n in known if n.startswith(vendor))
        # A suggestion costs a fuzzy match per advertised name: a few typos get one, a
        # pod with thousands of made-up names does not make the request that slow.
        close = closest(a.resource, names) if len(reported) <= _SUGGESTIONS else []
        hint = (
            f"did you mean {' or '.join(close)}?"
            if close
            else f"advertised {vendor} resources: {listing(names, 6)}."
            if names
            else f"no node advertises any {vendor} resource."
        )
        if is_placeholder(a.resource):
            yield Violation(
                "unknown-resource",
                a.path,
                f'{a.container.label} requests "{shown(a.resource)}" ({format_path(a.path)}): '
                f"the resource name is {PLACEHOLDER}.",
            )
            continue
        yield Violation(
            "unknown-resource",
            a.path,
            f"{a.container.label} requests {a.resource} ({format_path(a.path)}), which {scope}: "
            f"the Pod would stay Pending forever (Insufficient {a.resource}); {hint}",
        )


def _capacity(
    pod: PodView, inventory: Inventory, amounts: Sequence[ResourceAmount]
) -> Iterator[Violation]:
    first_path: dict[str, Path] = {}
    for a in amounts:
        first_path.setdefault(a.resource, a.path)
    for resource, wanted in pod.effective_requests.items():
        if resource not in first_path or wanted <= 0:
            continue
        if resource not in inventory.offers:
            yield from _dra_capacity(resource, wanted, inventory, first_path[resource])
            continue
        offers = candidates(pod, resource, inventory)
        if not offers:
            yield _no_candidate(pod, resource, inventory, first_path[resource])
            continue
        best = offers.largest()
        if wanted > best.count:
            yield Violation(
                "insufficient-capacity",
                first_path[resource],
                f"the pod requests {_n(wanted)} {resource} in all "
                f"({format_path(first_path[resource])}; the larger of its biggest init "
                f"container and the sum of its containers); the "
                f"most any node that can take this pod offers is {best.count} (node "
                f"{best.node.name}), so it would stay Pending forever. Request at most "
                f"{best.count}, or split the work across Pods.",
            )


def _dra_capacity(
    resource: str, wanted: Count, inventory: Inventory, path: Path
) -> Iterator[Violation]:
    """An extended resource that a DeviceClass maps to DRA devices (KEP-5004): the
    scheduler allocates that many devices of the class on one node."""
    found = extended_match(inventory.dra, resource)
    if found is None or found.broken is not None or found.errors:
        return  # not DRA-backed, or a selector only the dra-claims check can word
    node, most = found.most_on_one_node
    if wanted > most:
        classes = ", ".join(c.name for c in extended_classes(inventory.dra, resource))
        where = f" (node {node})" if node else ""
        yield Violation(
            "insufficient-capacity",
            path,
            f"the pod requests {_n(wanted)} {resource} in all ({format_path(path)}), which "
            f"DeviceClass {classes} serves through DRA; the most devices of that class on "
            f"one node is {most}{where}, of {plural(found.total, 'published device')}, so it "
            f"would stay Pending forever. Request at most {most}.",
        )


def _no_candidate(pod: PodView, resource: str, inventory: Inventory, path: Path) -> Violation:
    # The message names the first three nodes and counts the rest: only those three
    # are asked why.
    advertisers = inventory.index.resources[resource].bits
    total = advertisers.bit_count()
    hint = selector_hint(pod.spec, inventory.index)
    reasons = [
        f"{o.node.name}: {rejection(placement_spec(pod), o.node)}"
        for o in first_offers(inventory, resource, 3)
    ]
    return Violation(
        "no-candidate-node",
        path,
        f"the pod requests {resource} ({format_path(path)}), but "
        f"{_advertisers(total)} ({listed(reasons, total)}), "
        f"so it would stay Pending forever{hint}{'' if hint else '.'} Fix the "
        f"nodeSelector/affinity"
        f"{', or add a toleration for the taint' if any('taint' in r for r in reasons) else ''}.",
    )


def _advertisers(n: int) -> str:
    if n == 1:
        return "the one node that advertises it cannot take this pod"
    return f"none of the {n} nodes that advertise it can take this pod"


def _n(value: Count) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"


def run(pod: PodView, *, context: Context, params: Params) -> Iterator[Violation]:
    inventory = context.inventory
    amounts = gpu_amounts(pod, gpus=params.gpus)  # zero and malformed ones too
    if not amounts:
        return
    yield from _apiserver_rules(pod, amounts)
    # A zero count asks for nothing: the scheduler skips it (NodeResourcesFit), so a
    # name only matters when the count is above zero.
    requests = gpu_requests(pod, gpus=params.gpus)
    yield from _unknown_names(pod, inventory, requests, params)
    if inventory.known:
        yield from _capacity(pod, inventory, requests)


def judges(params: Params) -> Mapping[TargetKind, Reads]:
    """GPU resource names, against what nodes advertise and DRA classes map (KEP-5004)."""
    return {"pod": Reads(extended_resources=True, dra_supply=True)}


CHECK = Check(
    name="resource-names",
    params=Params,
    run=run,
    judges=judges,
    rules={
        "unknown-resource": Rule(
            "A GPU resource no node advertises (a typo or a missing profile).", uses_inventory=True
        ),
        "insufficient-capacity": Rule(
            "More of a GPU resource than any node that can take the pod has.", uses_inventory=True
        ),
        "no-candidate-node": Rule(
            "No node that advertises the resource can take the pod.", uses_inventory=True
        ),
        "non-integer-count": Rule("An extended resource count that is not a whole number."),
        "request-without-limit": Rule("An extended resource requested without a limit."),
        "request-limit-mismatch": Rule(
            "An extended resource whose request differs from its limit."
        ),
    },
)
