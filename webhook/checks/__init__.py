"""Built-in checks: each a pure function from one pod view and the inventory to findings.

A check module defines its parameter model and `run`; `CHECKS` maps the name a policy
file uses (`spec.check`) to it. Checks never see kinds, files or requests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from webhook.inventory import Inventory
from webhook.workloads import PodView
from webhook.yamlsource import Path


class CheckParams(BaseModel):
    """Parameters of a check: camelCase in YAML, unknown keys rejected, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


@dataclass(frozen=True, slots=True)
class Violation:
    """What a check found: a rule id, the field that caused it, and the message."""

    rule: str
    path: Path
    message: str


Run = Callable[[PodView, Inventory, Any], Iterable[Violation]]


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    params: type[CheckParams]
    run: Run
    rules: dict[str, str]  # rule id -> one-line help (SARIF, docs)


def registry() -> dict[str, Check]:
    from webhook.checks import device_injection, memory_fit, resource_names, slo_class

    modules = (device_injection, resource_names, memory_fit, slo_class)
    return {m.CHECK.name: m.CHECK for m in modules}
