"""A running job's ranks compared where they really landed: the GPUs each holds, the GPU
product of its node, MIG or not, and its network attachments.

The admission check compares a job's templates (`ranks-differ`, webhook.core.jobs.ranks);
only a running job shows what the scheduler made of them: a template that pins no
product lands on whatever nodes had room, and one NCCL communicator over H100 and A100
ranks, or over ranks with and without an RDMA device, runs at the slowest rank's speed
or hangs in ncclCommInitRank. The audit reports it under the same rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from webhook.core.jobs.members import Member
from webhook.core.jobs.model import MULTUS_NETWORKS, Reading, multus_networks
from webhook.core.kit.text import listing
from webhook.core.workloads.pods import PodView

RULE = "ranks-differ"


@dataclass(frozen=True, slots=True)
class RunningRank:
    """A bound rank of a job: where it runs and what it holds and attaches."""

    member: Member
    pod: str  # namespace/name
    node: str
    gpus: tuple[tuple[str, int], ...]  # GPU resources it holds
    nics: tuple[str, ...]  # RDMA resources and Multus networks


def running_ranks_differ(
    ranks: Sequence[RunningRank], *, product: Callable[[str], str]
) -> str | None:
    """What the job's running ranks differ in, with who has which value; None when alike
    (or one rank). `product` names the GPU product of a node ("" if unknown)."""
    if len(ranks) < 2:
        return None
    aspects: list[tuple[str, Callable[[RunningRank], str]]] = [
        ("GPUs", lambda r: " and ".join(f"{n} {res}" for res, n in r.gpus)),
        ("GPU product", lambda r: product(r.node) or "unknown"),
        ("MIG", lambda r: "MIG" if any("/mig-" in res for res, _ in r.gpus) else "whole GPUs"),
        ("network attachments", lambda r: ", ".join(r.nics) or "none"),
    ]
    parts = [found for name, read in aspects if (found := _differs(name, ranks, read))]
    if not parts:
        return None
    return (
        f"{ranks[0].member.job}: its {len(ranks)} running ranks differ in "
        + "; ".join(parts)
        + ". Every rank joins one NCCL communicator, which runs at the slowest rank's "
        "speed or hangs in ncclCommInitRank; pin the product (nodeSelector on "
        "nvidia.com/gpu.product) and give every rank the same GPUs and networks"
    )


def _differs(
    name: str, ranks: Sequence[RunningRank], read: Callable[[RunningRank], str]
) -> str | None:
    by_value: dict[str, list[RunningRank]] = {}
    for r in ranks:
        by_value.setdefault(read(r), []).append(r)
    if len(by_value) < 2:
        return None
    groups = sorted(by_value.items(), key=lambda g: -len(g[1]))
    shown = [f"{value} on {_who(group)}" for value, group in groups[:3]]
    return f"{name}: " + " and ".join(shown)


def _who(group: Sequence[RunningRank]) -> str:
    names = [r.member.rank or r.pod.split("/", 1)[1] for r in group]
    nodes = sorted({r.node for r in group})
    return f"{listing(names, 3)} (node{'s' if len(nodes) > 1 else ''} {listing(nodes, 3)})"


def nics_of(view: PodView | None, reading: Reading) -> tuple[str, ...]:
    """The RDMA resources and Multus networks a rank asks for."""
    if view is None:
        return ()
    rdma = sorted({a.resource for a in view.amounts if a.amount and reading.is_rdma(a.resource)})
    return (*rdma, *multus_networks(view.annotations.get(MULTUS_NETWORKS)))
