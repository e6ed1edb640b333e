"""What a check is: a pure function from one target and its context to violations.

A check declares itself whole: its parameters, the rules it reports, the kinds of
target it judges and what it reads of each (webhook.core.engine.reads). The engine, the
pre-filter, the server's cache and the shells read these declarations; none of them
names a check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Protocol

from webhook.core.engine.context import Context
from webhook.core.engine.reads import Reads
from webhook.core.kit.violation import Violation
from webhook.core.workloads.targets import TARGET_KINDS, TargetKind


def camel(name: str) -> str:
    """A parameter's name in YAML: `device_list_mount_dir` -> `deviceListMountDir`."""
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


class ParamError(ValueError):
    """A parameter's value a check rejects (from its Params' `__post_init__`), with the
    parameter's YAML name: the error names that field and its line."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class CheckParams:
    """Parameters of a check: each check's Params is a frozen dataclass of them.

    Plain classes, not pydantic models: a policy set read back from the policy cache
    (webhook.sources.policy_cache) is built without importing pydantic, which costs
    more than the rest of a small `check` run. pydantic validates them when policy
    files are read (webhook.sources.policy_files), with this configuration: camelCase
    in YAML (snake_case accepted too), unknown keys rejected. A check's own rules on a
    value go in `__post_init__`, raising ParamError."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {
        "alias_generator": camel,
        "populate_by_name": True,
        "extra": "forbid",
    }

    def __getstate__(self) -> dict[str, Any]:
        # A check may cache what it derives from its parameters (functools.cached_property:
        # compiled matchers, the access rules); that is not state, and may not pickle.
        names = {f.name for f in fields(self)}  # type: ignore[arg-type]
        return {k: v for k, v in self.__dict__.items() if k in names}


class Run(Protocol):
    """`run(target, *, context, params)`: the target is one of the kinds the check
    judges (a PodView, a WorkloadView, a ClaimView, a NamespaceView)."""

    def __call__(self, target: Any, /, *, context: Context, params: Any) -> Iterable[Violation]: ...


# What a check judges and reads, given its parameters (a device-list variable a policy
# names is read): a module-level function, so a policy set pickles (the policy cache).
Judges = Callable[[Any], Mapping[TargetKind, Reads]]


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
    judges: Judges  # the kinds of target it judges, and what it reads of each
    # Derived once: the engine asks it for every finding when the inventory is stale.
    inventory_rules: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        used = frozenset(rule for rule, r in self.rules.items() if r.uses_inventory)
        object.__setattr__(self, "inventory_rules", used)

    def reads(self, params: CheckParams) -> Mapping[TargetKind, Reads]:
        """What the check judges and reads under these parameters, in target order."""
        declared = self.judges(params)
        unknown = set(declared) - set(TARGET_KINDS)
        if unknown:
            raise ValueError(f"check {self.name} judges unknown targets {sorted(unknown)}")
        return {kind: declared[kind] for kind in TARGET_KINDS if kind in declared}
