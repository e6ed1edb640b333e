"""The `dra-unallocatable` domain: why a Pending Pod's DRA claims cannot be allocated.

Asked once everything else fits (classify.py): for each of the Pod's `resourceClaims`,
in order, the first of
- its ResourceClaim or ResourceClaimTemplate does not exist in the Pod's namespace;
- a request names a DeviceClass that does not exist (the scheduler: "device class X
  does not exist"), with the nearest class name;
- the class's and the request's CEL selectors match no published device (the
  scheduler: "cannot allocate all claims"), with the nearest attribute value;
- too few matching devices are left once those with a NoSchedule/NoExecute taint the
  request does not tolerate are set aside (KEP-5055; the same rule as the check's
  device-tainted, webhook.core.dra.findings);
- every matching device is allocated: a ResourceClaim's `status.allocation` holds it
  (k8s.io/api resource/v1 AllocationResult.Devices.Results: driver, pool, device);
  the claims holding them are named. All devices of one claim come from one node, so
  the count is compared per node.
Then, when each claim can be allocated alone: all of them together from one node (the
check's claims-exceed-node, webhook.core.dra.joint). A request with `firstAvailable` fails
only when every alternative fails; the last
one's reason is the verdict. The devices a (class, selectors) pair can get come from
webhook.core.dra.match, the same as the gpu-dra-claims check's.
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.core.access.grants import PodClaim
from webhook.core.diagnosis.case import SHOWN_HOLDERS, Case
from webhook.core.diagnosis.drafacts import DeviceKey, Holding
from webhook.core.diagnosis.evidence import Diagnosis, Fact
from webhook.core.dra.findings import Blocked, blocked_by_taints
from webhook.core.dra.joint import Ask, best_node
from webhook.core.dra.match import DeviceMatch, match, selector_hints
from webhook.core.dra.model import ClaimSpec, Device, DraSupply, ExactRequest
from webhook.core.dra.taints import describe
from webhook.core.kit.text import closest, listing, plural, shown
from webhook.core.supply.inventory import Inventory

SOURCES = {
    "resourceClaimName": "ResourceClaim",
    "resourceClaimTemplateName": "ResourceClaimTemplate",
}


def judge(case: Case, *, usable: int) -> Diagnosis | None:
    """The DRA verdict for the Pod's claims; None when every claim can be allocated.

    `usable`: the nodes that have room for the Pod's other requests now (node ids as
    bits): a free device elsewhere does not help it."""
    facts = case.cluster.dra
    if "DeviceClass" not in facts.read and "ResourceSlice" not in facts.read:
        return not_evaluated(case)
    inventory = case.cluster.inventory
    namespace = case.pod.ref.split("/", 1)[0]
    asks: list[Ask] = []
    for claim in case.pod.access.claims:
        kind = SOURCES.get(claim.source)
        if kind is None:
            continue
        spec = facts.supply.claims.get((kind, namespace, claim.source_name))
        if spec is None:
            if kind in facts.read:
                return _missing(case, claim, kind, namespace)
            continue  # that kind was not read: nothing to say about it
        if kind == "ResourceClaim" and f"{namespace}/{spec.name}" in facts.allocated:
            continue  # allocated already: it holds its devices
        for request in spec.requests:
            found = None
            for alt in request.alternatives:
                found = _alternative(case, inventory, claim, spec, alt, usable)
                if found is None:
                    break  # this way can be allocated
            if found is not None:
                return found
            if not request.first_available:  # the scheduler may take another alternative
                alt = request.alternatives[0]
                m = match(inventory.dra, facts.supply.classes[alt.device_class], alt.selectors)
                asks.append(Ask(f'claim "{claim.name}" request "{alt.name}"', alt, m))
    return _jointly(facts.supply, asks) if len(asks) > 1 else None


def _jointly(supply: DraSupply, asks: list[Ask]) -> Diagnosis | None:
    """Each claim can be allocated alone, and all of them from no one node: the
    scheduler takes every device of a Pod's claims from the node it picks (the same rule
    as the check's claims-exceed-node, webhook.core.dra.joint)."""
    found = best_node(supply, asks)
    if found is None:
        return None
    node, got, need = found
    parts = listing([f"{a.need} for {a.what}" for a in asks], 4)
    return Diagnosis(
        "dra-unallocatable",
        f"the Pod's claims ask for {plural(need, 'device')} in all ({parts}), and all of "
        f"them come from the one node the Pod lands on; the most one node can give them "
        f"at once is {got} ({node or 'no node'}), so the claims are never allocated together",
        f"ask for at most {got} devices across the Pod's claims, or split the work across Pods",
        tuple(Fact("cluster", f"devices {a.what} can take", str(len(a.usable()))) for a in asks),
    )


def _about(spec: ClaimSpec) -> str:
    return f"{spec.kind} {spec.namespace}/{spec.name}"


def _claim_facts(case: Case, claim: PodClaim, spec: ClaimSpec, alt: ExactRequest) -> list[Fact]:
    selectors = " && ".join(alt.selectors) or "(none)"
    return [
        Fact(f"Pod {case.pod.ref}", f"resourceClaims {claim.name}", f"{claim.source} {spec.name}"),
        Fact(_about(spec), f"request {alt.name}", f"deviceClassName {alt.device_class}"),
        Fact(_about(spec), f"request {alt.name} selectors", shown(selectors, 200)),
    ]


def _alternative(
    case: Case,
    inventory: Inventory,
    claim: PodClaim,
    spec: ClaimSpec,
    alt: ExactRequest,
    usable: int,
) -> Diagnosis | None:
    what = f'claim "{claim.name}" ({_about(spec)}) request "{alt.name}"'
    facts = _claim_facts(case, claim, spec, alt)
    supply = case.cluster.dra.supply
    device_class = supply.classes.get(alt.device_class)
    if device_class is None:
        return _class_missing(what, facts, spec, alt, sorted(supply.classes))
    m = match(inventory.dra, device_class, alt.selectors)
    if m.broken is not None:
        return None  # cannot be evaluated here: the scheduler's message is the evidence
    if m.errors:
        expression, device, error = m.errors[0]
        return Diagnosis(
            "dra-unallocatable",
            f"{what}: the selector {shown(expression, 80)!r} fails with a CEL runtime error on "
            f"{plural(len(m.errors), 'device')} ({device.label}: {shown(error, 80)}), and the "
            f"scheduler stops at such an error, so the claim is never allocated",
            f"guard the attribute lookup in {_about(spec)} with .?name.orValue(...) or an "
            f"`in` test",
            tuple(facts),
        )
    if not m.devices:
        return _matches_nothing(inventory, what, facts, spec, alt, m)
    blocked = blocked_by_taints(alt, m)
    if blocked is not None:
        return _tainted(what, facts, spec, blocked)
    return _allocated(case, what, facts, spec, alt, m, usable)


def _tainted(what: str, facts: list[Fact], spec: ClaimSpec, blocked: Blocked) -> Diagnosis:
    """KEP-5055: the scheduler allocates a device with a NoSchedule/NoExecute taint only
    to a request that tolerates it; the scheduler's message says only "cannot allocate"."""
    for device, taints in blocked.devices[:8]:
        facts.append(Fact(f"device {device.label}", "taints", ", ".join(map(describe, taints))))
    n = len(blocked.devices)
    return Diagnosis(
        "dra-unallocatable",
        f"{what}: {plural(n, 'device')} it matches {'carries' if n == 1 else 'carry'} "
        f"taints it does not tolerate ({blocked.taints_shown()}), leaving {blocked.left()} "
        f"for {plural(blocked.need, 'device')}, so the scheduler never allocates the claim",
        f"repair or replace the tainted devices (the driver lifts a gpu-lost or XID taint "
        f"once the GPU is healthy again), or tolerate in {_about(spec)} only a taint known "
        f"to be harmless",
        tuple(facts),
    )


def _class_missing(
    what: str, facts: list[Fact], spec: ClaimSpec, alt: ExactRequest, names: list[str]
) -> Diagnosis:
    near = closest(alt.device_class, names)
    facts.append(Fact("cluster", "DeviceClasses", listing(names, 6) if names else "(none)"))
    if near:
        action = f"fix the DeviceClass name to {' or '.join(near)} in {_about(spec)}"
    elif names:
        action = f"name one of the DeviceClasses ({listing(names, 6)}) in {_about(spec)}"
    else:
        action = "install the DRA driver that creates the DeviceClass (no DeviceClass exists)"
    return Diagnosis(
        "dra-unallocatable",
        f"{what} names DeviceClass {alt.device_class}, which does not exist"
        + (f" (did you mean {' or '.join(near)}?)" if near else ""),
        action,
        tuple(facts),
    )


def _matches_nothing(
    inventory: Inventory,
    what: str,
    facts: list[Fact],
    spec: ClaimSpec,
    alt: ExactRequest,
    m: DeviceMatch,
) -> Diagnosis:
    device_class = inventory.dra.classes[alt.device_class]
    of_class = len(match(inventory.dra, device_class, ()).devices)
    hints = selector_hints(inventory.dra, device_class, alt.selectors)
    facts.append(Fact("cluster", f"devices of class {alt.device_class}", str(of_class)))
    facts.append(Fact("cluster", "devices published", str(m.total)))
    facts.extend(Fact("cluster", "published devices", h) for h in hints)
    action = (
        f"fix the selector in {_about(spec)}: {'; '.join(hints)}"
        if hints
        else f"fix the selectors in {_about(spec)}, or add devices that match (kubectl get "
        f"resourceslices -o yaml shows their attributes)"
    )
    return Diagnosis(
        "dra-unallocatable",
        f"{what}: no device of class {alt.device_class} matches its selectors "
        f"({plural(of_class, 'device')} of the class, {plural(m.total, 'device')} published)",
        action,
        tuple(facts),
    )


def _key(device: Device) -> DeviceKey:
    return device.driver, device.pool, device.name


def _allocated(
    case: Case,
    what: str,
    facts: list[Fact],
    spec: ClaimSpec,
    alt: ExactRequest,
    m: DeviceMatch,
    usable: int,
) -> Diagnosis | None:
    use = _use(case, alt, m)
    taken, free, claims = use.taken, use.free, use.claims
    ids = _node_ids(case)
    # A slice without a node name (allNodes, a nodeSelector) serves any node.
    here = {n: k for n, k in free.items() if not n or (n in ids and usable >> ids[n] & 1)}
    need = alt.count if alt.mode == "ExactCount" else 1
    node, most = use.most
    if need > most:
        facts.append(Fact("cluster", f"most matching devices on one node ({node})", str(most)))
        return Diagnosis(
            "dra-unallocatable",
            f"{what} asks for {plural(need, 'device')} of class {alt.device_class}; the most "
            f"that match on one node is {most} ({node or 'no node-local slice'}), and all "
            f"devices of a claim come from one node",
            f"ask for at most {most} devices in {_about(spec)}, or add nodes with more",
            tuple(facts),
        )
    if max(here.values(), default=0) >= need:
        return None
    elsewhere = sorted(n for n, k in free.items() if k >= need and n not in here)
    if elsewhere:
        return _elsewhere(what, facts, alt, need, elsewhere)
    for d, h in taken[:SHOWN_HOLDERS]:
        owner = f" (Pod {h.pod})" if h.pod else ""
        facts.append(Fact(f"device {d.label}", "allocated to", f"ResourceClaim {h.claim}{owner}"))
    if len(taken) > SHOWN_HOLDERS:
        rest = str(len(taken) - SHOWN_HOLDERS)
        facts.append(Fact("cluster", "allocated devices not listed here", rest))
    return Diagnosis(
        "dra-unallocatable",
        f"{what} asks for {plural(need, 'device')} of class {alt.device_class}; "
        f"{plural(len(m.devices), 'device')} match, {len(taken)} of them allocated (to "
        f"ResourceClaims {listing(claims)}), and no node has {need} free",
        f"wait for the claims holding the devices to be released ({listing(claims)}: their "
        f"Pods must end and the claims be deallocated), or add devices",
        tuple(facts),
    )


@dataclass(frozen=True, slots=True)
class _Use:
    taken: list[tuple[Device, Holding]]  # matching devices other claims hold
    free: dict[str, int]  # free matching devices per node
    claims: list[str]  # the claims holding them, sorted
    most: tuple[str, int]  # the node with the most matching devices, and how many


def _use(case: Case, alt: ExactRequest, m: DeviceMatch) -> _Use:
    """Once per (class, selectors) for every Pending Pod but those whose own claims hold
    devices: a thousand Pods waiting for one class cost what one does."""
    cluster, pod = case.cluster, case.pod.ref
    owners: frozenset[str] | None = cluster.memo("dra-owners")
    if owners is None:
        owners = cluster.remember("dra-owners", frozenset(h.pod for h in cluster.dra.held.values()))
    key = ("dra-free", alt.device_class, alt.selectors, pod if pod in owners else "")
    found: _Use | None = cluster.memo(key)
    if found is None:
        held = cluster.dra.held
        taken = [
            (d, h)
            for d in m.devices
            if not d.shared and (h := held.get(_key(d))) is not None and h.pod != pod
        ]
        taken_keys = {_key(d) for d, _ in taken}
        free: dict[str, int] = {}
        for d in m.devices:
            if _key(d) not in taken_keys:
                free[d.node] = free.get(d.node, 0) + 1
        claims = sorted({h.claim for _, h in taken})
        found = cluster.remember(key, _Use(taken, free, claims, m.most_on_one_node))
    return found


def _node_ids(case: Case) -> dict[str, int]:
    ids: dict[str, int] | None = case.cluster.memo("node-ids")
    if ids is None:
        ids = case.cluster.remember(
            "node-ids", {n.name: i for i, n in enumerate(case.cluster.nodes)}
        )
    return ids


def _elsewhere(
    what: str, facts: list[Fact], alt: ExactRequest, need: int, elsewhere: list[str]
) -> Diagnosis:
    facts.append(Fact("cluster", "nodes with enough free matching devices", listing(elsewhere)))
    return Diagnosis(
        "dra-unallocatable",
        f"{what} asks for {plural(need, 'device')} of class {alt.device_class}; the nodes "
        f"with enough free ones ({listing(elsewhere)}) cannot take the Pod (its placement, "
        f"cordoned or not Ready, or no room for its other requests)",
        f"let the Pod onto {listing(elsewhere)} (its nodeSelector, affinity and tolerations), "
        f"or free room there",
        tuple(facts),
    )


def _missing(case: Case, claim: PodClaim, kind: str, namespace: str) -> Diagnosis:
    claims = case.cluster.dra.supply.claims
    names = sorted(n for k, ns, n in claims if k == kind and ns == namespace)
    near = closest(claim.source_name, names)
    facts = (
        Fact(
            f"Pod {case.pod.ref}",
            f"resourceClaims {claim.name}",
            f"{claim.source} {claim.source_name}",
        ),
        Fact(f"namespace {namespace}", f"{kind}s", listing(names, 6) if names else "(none)"),
    )
    action = (
        f"fix {claim.source} to {' or '.join(near)}"
        if near
        else f"create {kind} {namespace}/{claim.source_name}"
    )
    return Diagnosis(
        "dra-unallocatable",
        f'claim "{claim.name}": {kind} {claim.source_name} does not exist in namespace '
        f"{namespace}, so no claim can be allocated for it",
        action,
        facts,
    )


def not_evaluated(case: Case) -> Diagnosis:
    """No DeviceClass or ResourceSlice was read: the claims cannot be judged."""
    claims = case.pod.access.claims
    namespace = case.pod.ref.split("/", 1)[0]
    facts = tuple(
        Fact(
            f"Pod {case.pod.ref}", f"resourceClaims {c.name}", f"{c.source} {c.source_name}".strip()
        )
        for c in claims
    )
    verdict = (
        "everything but its DRA claims fits, and no DeviceClass or ResourceSlice was read "
        "(the cluster does not serve resource.k8s.io/v1, or the dump holds none), so the "
        "claims are not evaluated: the scheduler's message says what it found"
    )
    action = (
        f"inspect the claims: kubectl get resourceclaims -n {namespace} and kubectl describe "
        f"resourceclaim of each (its status.allocation and the DeviceClass it names); to "
        f"diagnose them, add kubectl get deviceclasses,resourceslices,resourceclaims,"
        f"resourceclaimtemplates -A -o json to the dump"
    )
    return Diagnosis("dra-unallocatable", verdict, action, facts)
