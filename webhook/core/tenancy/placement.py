"""The tenancy rules on where a Pod's GPUs come from: product, MIG profile, sharing mode
(and, for an untrusted tenant, any GPU shared with others), DRA DeviceClass.

With an inventory, a Pod is judged by every candidate node it can land on (any one that
breaks a rule is enough: the scheduler may pick it). Without one, by what the request
says: MIG resource names, `.shared` names, a product or sharing strategy its
nodeSelector pins; what cannot be told so is reported as a warning (advisory), never
allowed in silence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from webhook.core.access.shares import Share
from webhook.core.dra.model import ClaimSpec, DraSupply
from webhook.core.kit.dicts import as_dict
from webhook.core.kit.paths import Path, format_path
from webhook.core.kit.text import listing
from webhook.core.kit.violation import Violation
from webhook.core.supply import mig_catalog
from webhook.core.supply.inventory import SHARING_MODES, SharingMode
from webhook.core.supply.scheduling import candidates, node_listing
from webhook.core.tenancy.claims import ClassAsk, claim_classes, pod_classes
from webhook.core.tenancy.judged import Judged
from webhook.core.tenancy.landing import (
    by_mode,
    fit_nodes,
    modes_text,
    pin_fix,
    product_name,
    products_split,
    single_profile,
)
from webhook.core.tenancy.tenants import SHARED_MODES, Tenant
from webhook.core.tenancy.use import Use
from webhook.core.workloads.pods import PodView

NO_INVENTORY = "pass --inventory to judge the real nodes"


def either(items: Sequence[str], limit: int = 4) -> str:
    """`a, b or c`; past `limit` items, `a, b, c, d or 2 more`."""
    shown = [*items[:limit], f"{len(items) - limit} more"] if len(items) > limit else list(items)
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


# -- product -----------------------------------------------------------------------------


def product_not_allowed(j: Judged) -> Iterator[Violation]:
    t = j.tenant
    if not t.products:
        return
    head = f"tenant {t.name} may use only {either(t.products)} GPUs"
    if not j.inventory.known:
        yield from _pinned_product(j, head)
        return
    inventory = j.inventory
    for use in j.uses:
        offers = candidates(j.pod, use.resource, inventory)
        if not offers:
            continue  # no node can take it: resource-names says so
        split = products_split(
            offers.bits, use.resource, inventory, allowed=t.allows_product, labels=j.labels
        )
        if not split.bad and not split.unknown:
            continue
        fix = pin(j, use) or f"No node of the inventory offers {use.resource} on one of them."
        if split.bad:
            found = f"which is {split.text(inventory)}, where it can land"
        else:
            found = (
                f"and the GPU product of node {node_listing(inventory, split.unknown)}, "
                f"where it can land, is not known (no {j.labels[0]} label), so it cannot be "
                f"shown to be one of them"
            )
        yield Violation(
            "product-not-allowed", use.path, f"{head}, but {j.who}{use.what}, {found}. {fix}"
        )


def _pinned_product(j: Judged, head: str) -> Iterator[Violation]:
    t = j.tenant
    if j.pinned is not None:
        bad = sorted(p for p in j.pinned if not t.allows_product(product_name(p)))
        if bad:
            yield Violation(
                "product-not-allowed",
                j.pinned_path,
                f"{head}, but {j.who}the pod is pinned to {listing(bad)} "
                f"({format_path(j.pinned_path)}). Pin it to {either(t.products)}.",
            )
        return
    use = j.uses[0]
    yield Violation(
        "product-not-allowed",
        use.path,
        f"{head}; {j.who}{use.what}, and without an inventory nothing says which GPU product "
        f"it lands on (the pod pins none). Pin it with nodeSelector {j.labels[0]}, or "
        f"{NO_INVENTORY}.",
        advisory=True,
    )


# -- MIG profile ---------------------------------------------------------------------------


def mig_profile_not_allowed(j: Judged) -> Iterator[Violation]:
    t = j.tenant
    if not t.mig_profiles:
        return
    head = f"tenant {t.name} may use only MIG profiles {either(t.mig_profiles)}"
    fix = _profile_fix(t)
    for use in j.uses:
        profile = mig_catalog.profile_for_resource(use.resource) if use.share is None else None
        if profile is not None:
            if not t.allows_profile(profile):
                yield Violation(
                    "mig-profile-not-allowed",
                    use.path,
                    f"{head}, but {j.who}{use.what}, a {profile} slice. {fix}",
                )
        elif use.share is None and j.inventory.known:
            yield from _single_strategy(j, use, head, fix)


def _single_strategy(j: Judged, use: Use, head: str, fix: str) -> Iterator[Violation]:
    """nvidia.com/gpu on nodes of MIG single strategy: each device is a slice."""
    bad: dict[str, int] = {}
    for offer, bits in candidates(j.pod, use.resource, j.inventory).groups():
        profile = single_profile(offer)
        if profile is not None and not j.tenant.allows_profile(profile):
            bad[profile] = bad.get(profile, 0) | bits
    if bad:
        where = listing(
            f"a {p} slice on node {node_listing(j.inventory, bits)}" for p, bits in bad.items()
        )
        yield Violation(
            "mig-profile-not-allowed",
            use.path,
            f"{head}, but {j.who}{use.what}, which is {where} (MIG single strategy), where it "
            f"can land. {fix}",
        )


def _profile_fix(t: Tenant) -> str:
    plain = [p for p in t.mig_profiles if mig_catalog.PROFILE_RE.match(p)]
    if not plain:
        return f"Request a MIG slice of profile {either(t.mig_profiles)}."
    names = " or ".join(mig_catalog.resource_for_profile(p) for p in plain[:3])
    return f"Request {names} instead."


# -- sharing -------------------------------------------------------------------------------

_WHY: dict[SharingMode, str] = {
    "time-slicing": "time-sliced replicas share the GPU's memory and compute with no isolation",
    "mps": "MPS clients share the GPU's compute and fault domain",
    "vgpu": "vGPU shares split one GPU with only software limits between tenants",
}


def share_mode(share: Share) -> SharingMode:
    """A share's sharing mode: a vGPU scheduler's (HAMi, Volcano vGPU) is `vgpu`, KAI's and
    Volcano's GPU share time-slicing or MPS, any share in MIG mode `mig`."""
    if share.mode == "mig":
        return "mig"
    if share.mechanism in ("HAMi", "Volcano vGPU"):
        return "vgpu"
    return share.mode


def sharing_not_allowed(j: Judged) -> Iterator[Violation]:
    """A mode the tenant does not list (the shared ones are untrusted-on-shared-gpu's
    for an untrusted tenant)."""
    t = j.tenant
    if not t.sharing:
        return
    shared = SHARED_MODES if not t.trusted else frozenset()
    head = f"tenant {t.name} may use only {either(t.sharing)} GPUs"

    def rejects(mode: SharingMode) -> bool:
        return not t.allows_mode(mode) and mode not in shared

    yield from _modes(j, "sharing-not-allowed", head, rejects)


def untrusted_on_shared_gpu(j: Judged) -> Iterator[Violation]:
    t = j.tenant
    if t.trusted:
        return
    head = f"tenant {t.name} is untrusted, so its Pods may not run on a GPU shared with others"
    yield from _modes(j, "untrusted-on-shared-gpu", head, SHARED_MODES.__contains__)


def _modes(
    j: Judged, rule: str, head: str, rejects: Callable[[SharingMode], bool]
) -> Iterator[Violation]:
    inventory = j.inventory
    for use in j.uses:
        if use.share is not None:
            mode = share_mode(use.share)
            if rejects(mode):
                why = f": {_WHY[mode]}" if mode in _WHY else ""
                yield Violation(
                    rule, use.path, f"{head}, but {j.who}{use.what}, {mode} wherever it lands{why}."
                )
            continue
        if not inventory.known:
            yield from _by_name(j, use, rule, head, rejects)
            continue
        offers = candidates(j.pod, use.resource, inventory)
        bad = by_mode(offers.groups(), rejects)
        if not bad:
            continue
        why = "; ".join(_WHY[o.sharing] for o, _ in bad if o.sharing in _WHY)
        yield Violation(
            rule,
            use.path,
            f"{head}, but {j.who}{use.what}, which is {modes_text(inventory, bad)}, where it can "
            f"land{': ' + why if why else ''}. {_mode_fix(j, use, rejects)}",
        )


def _mode_fix(j: Judged, use: Use, rejects: Callable[[SharingMode], bool]) -> str:
    found = pin(j, use)
    if found is not None:
        return found
    mig = mig_catalog.profile_for_resource(use.resource) is not None
    if not rejects("mig") and use.resource.startswith("nvidia.com/") and not mig:
        if j.tenant.mig_profiles:
            return _profile_fix(j.tenant)
        return "Request a MIG slice (nvidia.com/mig-<profile>) instead."
    return f"No node of the inventory offers {use.resource} in a mode allowed here."


def pin(j: Judged, use: Use) -> str | None:
    """`Pin the pod with nodeSelector k: v.`: onto the nodes where the request passes every
    placement rule of the tenant (one fix for all its findings), if a label says so."""
    good = fit_nodes(use.resource, j.inventory, tenant=j.tenant, labels=j.labels)
    bad = candidates(j.pod, use.resource, j.inventory).bits & ~good
    found = pin_fix(j.pod, j.inventory, good=good, bad=bad)
    return _sentence(found) if found is not None else None


# Without an inventory, what a resource name or a pinned sharing strategy says.
_STRATEGY = "nvidia.com/gpu.sharing-strategy"
_PINNED: dict[str, frozenset[SharingMode]] = {
    "none": frozenset({"exclusive", "mig"}),
    "time-slicing": frozenset({"time-slicing"}),
    "mps": frozenset({"mps"}),
}


def name_modes(pod: PodView, resource: str) -> frozenset[SharingMode] | None:
    """The sharing modes a resource can be in by its name (or the sharing strategy the
    pod's nodeSelector pins); None: any."""
    if mig_catalog.profile_for_resource(resource) is not None:
        return frozenset({"time-slicing" if resource.endswith(".shared") else "mig"})
    if resource.endswith(".shared"):
        return frozenset({"time-slicing", "mps"})
    pinned = as_dict(pod.spec.get("nodeSelector")).get(_STRATEGY)
    return _PINNED.get(pinned) if isinstance(pinned, str) else None


def _told_by(resource: str) -> str:
    if resource.endswith(".shared") or mig_catalog.profile_for_resource(resource):
        return "by its name"
    return f"by the pod's nodeSelector {_STRATEGY}"


def _by_name(
    j: Judged, use: Use, rule: str, head: str, rejects: Callable[[SharingMode], bool]
) -> Iterator[Violation]:
    possible = name_modes(j.pod, use.resource)
    modes = possible if possible is not None else frozenset(SHARING_MODES)
    rejected = [m for m in SHARING_MODES if m in modes and rejects(m)]
    if not rejected:
        return
    if possible is not None and len(rejected) == len(possible):
        yield Violation(
            rule,
            use.path,
            f"{head}, but {j.who}{use.what}, {either(rejected)} {_told_by(use.resource)}.",
        )
        return
    yield Violation(
        rule,
        use.path,
        f"{head}; {j.who}{use.what}, which may be {either(rejected)}: without an "
        f"inventory its sharing mode is not known. Pin it with nodeSelector {_STRATEGY}, or "
        f"{NO_INVENTORY}.",
        advisory=True,
    )


# -- DRA classes ---------------------------------------------------------------------------


def dra_class_not_allowed(j: Judged, *, supply: DraSupply, namespace: str) -> Iterator[Violation]:
    t = j.tenant
    if not t.dra_classes:
        return
    found, unresolved = pod_classes(j.pod, supply=supply, namespace=namespace)
    yield from _classes(t, found, j.who)
    for u in unresolved:
        yield Violation(
            "dra-class-not-allowed",
            u.path,
            f"{_class_head(t)}, but {j.who}{u.what} is not in the inventory, so the classes "
            f"it asks for cannot be judged. Give it with the checked files, or in the inventory.",
            advisory=True,
        )


def claim_class_not_allowed(t: Tenant, claim: ClaimSpec, *, base: Path) -> Iterator[Violation]:
    if t.dra_classes:
        yield from _classes(t, claim_classes(claim, base=base), "")


def _class_head(t: Tenant) -> str:
    return f"tenant {t.name} may use only DeviceClass {either(t.dra_classes)}"


def _classes(t: Tenant, found: list[ClassAsk], who: str) -> Iterator[Violation]:
    for ask in found:
        if not t.allows_class(ask.device_class):
            yield Violation(
                "dra-class-not-allowed",
                ask.path,
                f"{_class_head(t)}, but {who}{ask.what}. Ask for one of those classes.",
            )
