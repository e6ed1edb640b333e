"""The kube-scheduler's FailedScheduling message, read back into reasons and domains.

The message is `0/<n> nodes are available: <count> <reason>, ... .` followed by what
the PostFilter plugins said (`preemption: 0/<n> nodes are available: ...`), as
`framework.FitError.Error()` writes it (kubernetes pkg/scheduler/framework/types.go).
Each node counts once, under the first filter plugin that rejected it (NodeUnschedulable,
NodeName, TaintToleration, NodeAffinity, ..., NodeResourcesFit, ..., DynamicResources),
so a message names the first obstacle of each node, not every obstacle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from webhook.core.diagnosis.evidence import Domain

_HEAD = re.compile(r"^0/(\d+) nodes are available: ")
_COUNTED = re.compile(r"^(\d+) (.+)$")
_RESOURCE_DOMAINS: frozenset[Domain] = frozenset(
    {
        "name-not-advertised",
        "plugin-not-registered",
        "mig-reconfiguring",
        "capacity-exhausted",
        "exceeds-any-node",
        # a rank of a gang: in the group's scheduling cycle its fellow ranks are placed
        # first, tentatively, and take the room (kubernetes pkg/scheduler/
        # schedule_one_podgroup.go, v1.36/v1.37; seen in tests/e2e/test_gang_cluster.py)
        "gang-does-not-fit",
    }
)
# Reason text (a prefix of it) -> the domains it is evidence for.
_REASONS: tuple[tuple[str, frozenset[Domain]], ...] = (
    ("Insufficient ", _RESOURCE_DOMAINS),
    ("Too many pods", frozenset({"capacity-exhausted"})),
    # The GangScheduling plugin holding a group's ranks back: "pod group is
    # unschedulable, minCount (3) cannot be satisfied: ..." (v1.37.2), "... waiting for
    # minCount pods from a gang to be scheduled ..." (v1.36.3).
    ("pod group is unschedulable", frozenset({"gang-does-not-fit"})),
    ("node(s) didn't match Pod's node affinity/selector", frozenset({"excluded-by-placement"})),
    ("node(s) didn't satisfy plugin(s)", frozenset({"excluded-by-placement"})),
    ("node(s) had untolerated taint", frozenset({"excluded-by-placement", "node-unavailable"})),
    ("node(s) were unschedulable", frozenset({"node-unavailable"})),
    ("node(s) had volume node affinity conflict", frozenset()),
    ("cannot allocate all claims", frozenset({"dra-unallocatable"})),
    ("resourceclaim", frozenset({"dra-unallocatable"})),
    # DynamicResources' PreFilter fails the Pod on every node at once, in words of its
    # own: "request gpu: device class gpu.nvidia.co does not exist" (v1.36.3, seen in
    # tests/e2e/test_diagnose_cluster.py), "waiting for resource claim ... to be created".
    ("device class", frozenset({"dra-unallocatable"})),
    ("resource claim", frozenset({"dra-unallocatable"})),
)


@dataclass(frozen=True, slots=True)
class SchedulerMessage:
    nodes: int | None  # the n of "0/n nodes are available", None if not that form
    reasons: tuple[tuple[int, str], ...]
    preemption: tuple[tuple[int, str], ...]

    def domains(self) -> frozenset[Domain]:
        """The domains the message is evidence for (empty: none this tool judges)."""
        found: set[Domain] = set()
        for _, reason in self.reasons:
            found |= reason_domains(reason)
        return frozenset(found)

    def reason_text(self) -> str:
        return ", ".join(f"{n} {r}" for n, r in self.reasons)


def reason_domains(reason: str) -> frozenset[Domain]:
    lowered = reason.lower()
    for prefix, domains in _REASONS:
        if reason.startswith(prefix) or prefix in lowered:
            return domains
    return frozenset()


def parse_message(message: str) -> SchedulerMessage:
    head = _HEAD.match(message)
    if head is None:
        return SchedulerMessage(None, ((0, message.strip().rstrip(".")),) if message else (), ())
    rest = message[head.end() :]
    reasons, _, after = rest.partition(". ")  # resource names have dots, never ". "
    preemption: tuple[tuple[int, str], ...] = ()
    marker = after.find("preemption: ")
    if marker != -1:
        tail = _HEAD.sub("", after[marker + len("preemption: ") :])
        preemption = _counted(tail)
    return SchedulerMessage(int(head.group(1)), _counted(reasons), preemption)


def _counted(text: str) -> tuple[tuple[int, str], ...]:
    out = []
    for part in text.strip().rstrip(".").split(", "):
        found = _COUNTED.match(part.strip())
        if found:
            out.append((int(found.group(1)), found.group(2)))
        elif part.strip():
            out.append((0, part.strip()))
    return tuple(out)
