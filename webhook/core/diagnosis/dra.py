"""The `dra-unallocatable` domain: PLACEHOLDER until DRA claims are in the core.

Another change brings ResourceClaims, DeviceClasses and ResourceSlices into the core
(webhook.core, webhook.sources, webhook.kube). When it lands, `judge` below decides
whether a claim's class does not exist, its selectors match no device, or every
matching device is allocated, and returns that Finding. Until then a Pod whose only
remaining obstacle is its claims is reported as `dra-unallocatable` with the claims
named and an explicit "not evaluated" in its verdict, never as `not-stuck`.
"""

from __future__ import annotations

from webhook.core.diagnosis.case import Case
from webhook.core.diagnosis.evidence import Fact, Finding


def judge(case: Case) -> Finding | None:
    """The DRA verdict for the Pod's claims, or None when there is nothing to say.

    PLACEHOLDER: claims are not evaluated yet (see the module docstring)."""
    return None


def not_evaluated(case: Case) -> Finding:
    claims = case.pod.access.claims
    namespace = case.pod.ref.split("/", 1)[0]
    facts = tuple(
        Fact(
            f"Pod {case.pod.ref}", f"resourceClaims {c.name}", f"{c.source} {c.source_name}".strip()
        )
        for c in claims
    )
    verdict = (
        "everything but its DRA claims fits, and diagnose does not evaluate claims yet: "
        "the scheduler's message says what it found"
    )
    action = (
        f"inspect the claims: kubectl get resourceclaims -n {namespace} and kubectl describe "
        f"resourceclaim of each (its status.allocation and the DeviceClass it names)"
    )
    return Finding("dra-unallocatable", verdict, action, facts)
