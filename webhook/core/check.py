"""What a check is: a pure function from one pod view and the inventory to violations."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
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
class Rule:
    """What a check says about one of its rules: SARIF and the docs show `help`."""

    help: str  # one line, ending in a full stop
    # The verdict rests on the node inventory (what nodes offer, which can take the pod):
    # when the server's inventory is too old, such findings follow --stale-inventory.
    uses_inventory: bool = False


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    params: type[CheckParams]
    run: Run
    rules: Mapping[str, Rule]  # rule id -> Rule; every rule `run` can report
    # Derived once: the engine asks it for every finding when the inventory is stale.
    inventory_rules: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        used = frozenset(rule for rule, r in self.rules.items() if r.uses_inventory)
        object.__setattr__(self, "inventory_rules", used)
