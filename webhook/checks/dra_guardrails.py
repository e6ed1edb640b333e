"""gpu-dra-guardrails: who may turn on DRA admin access, and who may pass a GPU through.

The apiserver lets a claim set `adminAccess` (every device, even one in use by others)
only in a Namespace labelled `resource.kubernetes.io/admin-access: "true"`, but anyone
allowed to update their own Namespace can set that label: a self-service escalation.
At admission, the request's userInfo says who sets it; `check` and `audit` have no
request, and judge where the label is instead.

`check` and `audit` read `adminAccess` on claims too: the apiserver refuses it in a
Namespace without the label, which the input (or the inventory) may show; when it
shows no such Namespace, that is a warning.

A passthrough (VFIO) device class hands a whole GPU to a VM or to a workload that
drives it itself (NVIDIA's DRA driver: DeviceClass `vfio.gpu.nvidia.com`, selecting
`type == 'vfio'`): outside the namespaces allowed it, a claim for one is denied.

Sources: k8s.io/api resource/v1 types.go (DeviceRequestAllocationMode, AdminAccess and
the admin-access label); KEP-4214 / kubernetes/kubeadm#2414 (kubeadm's admin.conf user
is in group kubeadm:cluster-admins since 1.29, super-admin.conf in system:masters);
NVIDIA k8s-dra-driver-gpu (the vfio.gpu.nvidia.com class).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.dra.model import ADMIN_ACCESS_LABEL, ClaimSpec, DraSupply, parse_claim
from webhook.core.engine.check import Check, CheckParams, Rule
from webhook.core.engine.context import Context
from webhook.core.engine.reads import Reads
from webhook.core.kit.dicts import as_dict
from webhook.core.kit.paths import Path
from webhook.core.kit.text import listing, shown
from webhook.core.kit.violation import Violation
from webhook.core.workloads.pods import PodView
from webhook.core.workloads.targets import ClaimView, NamespaceView, TargetKind

_VFIO = re.compile(r"""\.type\s*==\s*['"]vfio['"]""")


@dataclass(frozen=True)
class Params(CheckParams):
    # Groups (userInfo.groups) and users allowed to set the admin-access label.
    admin_access_groups: tuple[str, ...] = ("system:masters", "kubeadm:cluster-admins")
    admin_access_users: tuple[str, ...] = ()
    # Namespaces expected to carry the label: what check and audit compare against.
    admin_access_namespaces: tuple[str, ...] = ()
    # DeviceClasses that pass a device through (besides any whose selector asks for
    # `type == 'vfio'`), and the namespaces allowed them.
    passthrough_classes: tuple[str, ...] = ("vfio.gpu.nvidia.com",)
    passthrough_namespaces: tuple[str, ...] = ()


def run(
    target: PodView | ClaimView | NamespaceView, *, context: Context, params: Params
) -> Iterator[Violation]:
    if type(target) is PodView:
        items = target.spec.get("resourceClaims")
        if type(items) is not list or not items:
            return  # nearly every pod: one lookup
        yield from _pod_claims(target, items, context, params)
    elif type(target) is NamespaceView:
        if target.labels.get(ADMIN_ACCESS_LABEL) == "true":
            yield from _admin_label(target, context, params)
    elif type(target) is ClaimView:
        claim = parse_claim(target.obj, namespace=context.namespace)
        base: Path = ("spec", "spec") if claim.kind == "ResourceClaimTemplate" else ("spec",)
        yield from _claim(claim, context, params, base, "")


def _pod_claims(
    pod: PodView, items: list[Any], context: Context, params: Params
) -> Iterator[Violation]:
    supply = context.inventory.dra
    for index, item in enumerate(items):
        item = as_dict(item)
        for field, kind in (
            ("resourceClaimTemplateName", "ResourceClaimTemplate"),
            ("resourceClaimName", "ResourceClaim"),
        ):
            claim = supply.claims.get((kind, context.namespace, str(item.get(field))))
            if claim is not None:
                where = f'pod claim "{shown(item.get("name"))}": '
                path = pod.where("resourceClaims", index, field)
                yield from _claim(claim, context, params, path, where)


def _claim(
    claim: ClaimSpec, context: Context, params: Params, path: Path, where: str
) -> Iterator[Violation]:
    """A claim (or the one a pod names, said `where`): passthrough and admin access."""
    if context.namespace not in params.passthrough_namespaces:
        yield from _passthrough(claim, context.inventory.dra, params, path, where)
    if not context.at_admission:
        yield from _admin_access(claim, context.inventory.dra, path, where)


def _admin_access(
    claim: ClaimSpec, supply: DraSupply, path: Path, where: str
) -> Iterator[Violation]:
    """adminAccess in a claim, where no request says who creates it (check, audit).

    The apiserver admits a ResourceClaim or ResourceClaimTemplate with adminAccess only in
    a Namespace labelled resource.kubernetes.io/admin-access: "true" (kubernetes
    pkg/registry/resource/resourceclaim/strategy.go Validate calls
    resourceutils.AuthorizedForAdmin, at 0021a864; KEP-5018). The strategy validates
    before any validating webhook is called, so at admission a claim that reaches us was
    allowed: only check and audit judge it here. The label itself is judged on the
    Namespace (rule admin-access-label)."""
    asks = [alt for request in claim.requests for alt in request.alternatives if alt.admin_access]
    if not asks:
        return  # nearly every claim
    labels = supply.namespaces.get(claim.namespace)
    if labels is not None and labels.get(ADMIN_ACCESS_LABEL) == "true":
        return
    name, ns = shown(claim.name), shown(claim.namespace)
    for alt in asks:
        at = path if where else (*path, "devices", *alt.path, "adminAccess")
        what = f'{where}{claim.kind} "{name}" request "{shown(alt.name)}" sets adminAccess'
        if labels is None:
            yield Violation(
                "admin-access-claim",
                at,
                f"{what} (every matching device, even one in use by others); the apiserver "
                f'admits it only in a namespace labelled {ADMIN_ACCESS_LABEL}: "true", and '
                f"namespace {ns} is neither in the input nor in the inventory, so whether it "
                f"is cannot be told here. Add the Namespace to the input (or --inventory), "
                f"or drop adminAccess.",
                advisory=True,
            )
            continue
        yield Violation(
            "admin-access-claim",
            at,
            f'{what}, but namespace {ns} does not carry {ADMIN_ACCESS_LABEL}: "true": the '
            f"apiserver refuses the claim. Drop adminAccess, or have a cluster admin (one of "
            f"adminAccessGroups) label the namespace.",
        )


def _admin_label(namespace: NamespaceView, context: Context, params: Params) -> Iterator[Violation]:
    name = shown(namespace.name)
    path: Path = ("metadata", "labels", ADMIN_ACCESS_LABEL)
    if not context.at_admission:  # check, audit: no request says who set it
        if name not in params.admin_access_namespaces:
            allowed = listing(list(params.admin_access_namespaces)) or "none"
            yield Violation(
                "admin-access-label",
                path,
                f'Namespace {name} carries {ADMIN_ACCESS_LABEL}: "true", so every claim in it '
                f"may take any device with adminAccess, even devices in use by others; it is "
                f"not among the namespaces allowed the label ({allowed}). Who set it is "
                f"judged at admission.",
                advisory=True,
            )
        return
    old_labels = as_dict(as_dict((context.old or {}).get("metadata")).get("labels"))
    if old_labels.get(ADMIN_ACCESS_LABEL) == "true":
        return  # the label was already there: only setting it is judged
    user = context.user or {}
    username = user.get("username") if isinstance(user.get("username"), str) else ""
    raw = user.get("groups")
    groups = [g for g in raw if isinstance(g, str)] if isinstance(raw, list) else []
    if username in params.admin_access_users or set(groups) & set(params.admin_access_groups):
        return
    allowed = listing(list(params.admin_access_groups)) or "none"
    yield Violation(
        "admin-access-label",
        path,
        f"user {shown(username) or '(unknown)'} (groups: {listing(groups) or 'none'}) sets "
        f'{ADMIN_ACCESS_LABEL}: "true" on Namespace {name}, which lets every claim in it take '
        f"any device with adminAccess, even devices in use by others; only the groups "
        f"{allowed} may set it (parameter adminAccessGroups).",
    )


def _passthrough(
    claim: ClaimSpec, supply: DraSupply, params: Params, path: Path, where: str
) -> Iterator[Violation]:
    for request in claim.requests:
        for alt in request.alternatives:
            why = _passthrough_reason(alt.device_class, alt.selectors, supply, params)
            if why is None:
                continue
            allowed = listing(list(params.passthrough_namespaces)) or "none"
            yield Violation(
                "passthrough-class",
                path if where else (*path, "devices", *alt.path),
                f'{where}{claim.kind} "{shown(claim.name)}" request "{alt.name}" asks for a '
                f"passthrough (VFIO) device ({why}) in namespace {claim.namespace}: the GPU "
                f"leaves the host driver's control (no isolation, health or memory checks "
                f"apply); only the namespaces {allowed} may (parameter "
                f"passthroughNamespaces).",
            )


def _passthrough_reason(
    class_name: str, selectors: tuple[str, ...], supply: DraSupply, params: Params
) -> str | None:
    if class_name in params.passthrough_classes:
        return f"DeviceClass {class_name}"
    device_class = supply.classes.get(class_name)
    class_selectors = device_class.selectors if device_class is not None else ()
    for expression in (*class_selectors, *selectors):
        if _VFIO.search(expression):
            owner = "DeviceClass " + class_name if expression in class_selectors else "selector"
            return f"{owner} {shown(expression, 80)!r}"
    return None


def judges(params: Params) -> Mapping[TargetKind, Reads]:
    """Pods' claims and claim objects against the passthrough classes; a Namespace's
    admin-access label, and who sets it."""
    return {
        "pod": Reads(claims=True, dra_supply=True),
        "claim": Reads(dra_supply=True, names=True),
        "namespace": Reads(labels=frozenset({ADMIN_ACCESS_LABEL}), requester=True, names=True),
    }


CHECK = Check(
    name="dra-guardrails",
    params=Params,
    run=run,
    judges=judges,
    rules={
        "admin-access-label": Rule(
            "Setting the DRA admin-access label on a Namespace, by someone not allowed to."
        ),
        "passthrough-class": Rule(
            "A claim for a passthrough (VFIO) device class outside the namespaces allowed it."
        ),
        "admin-access-claim": Rule(
            "A claim (or a pod's) with adminAccess in a namespace without the admin-access "
            "label, which the apiserver refuses; a warning when the Namespace is not known."
        ),
    },
)
