"""The evidence record: one per Pending Pod, as an operator's work record would hold it.

Time, target (the Pod, its owner, the nodes that could take it), the facts used
(labels, allocatable and allocated figures, holding Pods, the scheduler's words
verbatim), the verdict and the next action; whether the scheduler's FailedScheduling
message agrees. docs/diagnose.md describes each domain and next action.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

Domain = Literal[
    "name-not-advertised",
    "plugin-not-registered",
    "mig-reconfiguring",
    "capacity-exhausted",
    "excluded-by-placement",
    "node-unavailable",
    "exceeds-any-node",
    "dra-unallocatable",
    "gated",
    "gang-does-not-fit",
    "not-stuck",
]
DOMAINS: tuple[Domain, ...] = (
    "gated",
    "name-not-advertised",
    "plugin-not-registered",
    "mig-reconfiguring",
    "exceeds-any-node",
    "excluded-by-placement",
    "node-unavailable",
    "capacity-exhausted",
    "dra-unallocatable",
    "gang-does-not-fit",
    "not-stuck",
)
Agreement = Literal["agrees", "disagrees", "no-event"]


@dataclass(frozen=True, slots=True)
class Fact:
    """One observation: `node gpu-a` / `allocatable nvidia.com/gpu` / `8`."""

    about: str  # "node gpu-a", "Pod ml/train-0", "scheduler"
    name: str
    value: str

    def __str__(self) -> str:
        return (
            f"{self.about}: {self.name} = {self.value}"
            if self.value
            else (f"{self.about}: {self.name}")
        )


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """What a domain's judge found: the verdict, its facts, the next action."""

    domain: Domain
    verdict: str
    next_action: str
    facts: tuple[Fact, ...] = ()
    also: tuple[str, ...] = ()  # other causes that hold too, in words


@dataclass(frozen=True, slots=True)
class Evidence:
    time: datetime | None
    pod: str  # namespace/name
    owner: str  # Kind/name of its controller, "" if none
    domain: Domain
    verdict: str
    facts: tuple[Fact, ...]
    candidates: int  # nodes that have room in principle and that the Pod may go to
    candidate_nodes: tuple[str, ...]  # the first few of them, by name
    requests: Mapping[str, str]
    scheduler_message: str | None
    scheduler_time: datetime | None
    agreement: Agreement
    disagreement: str  # why the scheduler's message points elsewhere, "" if it does not
    next_action: str
    also: tuple[str, ...] = ()
    job: str = ""  # the job it is a rank of ("PyTorchJob ml/train"), "" if none
    commands: tuple[str, ...] = ()  # kubectl commands that show the facts

    @property
    def stuck(self) -> bool:
        return self.domain != "not-stuck"
