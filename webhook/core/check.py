"""What a check is: a pure function from one pod view and the inventory to violations."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from webhook.core.inventory import Inventory
from webhook.core.paths import Path
from webhook.core.workloads import PodView


class CheckParams(BaseModel):
    """Parameters of a check: camelCase in YAML, unknown keys rejected, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    def __getstate__(self) -> dict[Any, Any]:
        # A check may cache what it derives from its parameters (functools.cached_property:
        # compiled matchers, the access rules); that is not state, and may not pickle.
        state = super().__getstate__()
        fields = type(self).model_fields
        state["__dict__"] = {k: v for k, v in state["__dict__"].items() if k in fields}
        return state


@dataclass(frozen=True, slots=True)
class Violation:
    """What a check found: a rule id, the field that caused it, and the message."""

    rule: str
    path: Path
    message: str
    # What cannot be known at admission (an envFrom source that may set a device list):
    # reported at most as a warning, whatever the policy's action, never as an allow.
    advisory: bool = False


Run = Callable[[PodView, Inventory, Any], Iterable[Violation]]


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    params: type[CheckParams]
    run: Run
    rules: dict[str, str]  # rule id -> one-line help (SARIF, docs)
