"""Built-in checks: each a pure function from one pod view and the inventory to findings.

A check module defines its parameter model and `run`; `CHECKS` maps the name a policy
file uses (`spec.check`) to it. Checks never see kinds, files or requests.
"""

from __future__ import annotations

from webhook.core.engine.check import Check


def registry() -> dict[str, Check]:
    from webhook.checks import (
        device_injection,
        distributed,
        dra_claims,
        dra_guardrails,
        memory_fit,
        queues,
        resource_names,
        slo_class,
        tenancy,
    )

    modules = (
        device_injection,
        resource_names,
        memory_fit,
        slo_class,
        dra_claims,
        dra_guardrails,
        distributed,
        queues,
        tenancy,
    )
    return {m.CHECK.name: m.CHECK for m in modules}
