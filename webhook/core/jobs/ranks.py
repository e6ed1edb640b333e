"""Rank rules: the ranks of one job must ask for the same thing, and start no more
processes than their Pod has GPUs.

Data-parallel and tensor-parallel training (NCCL, RCCL) runs the same step on every
rank and waits at each collective for the slowest: ranks with fewer GPUs, another
product, MIG slices (no P2P; NCCL does not support communication across MIG instances)
or another network path (a rank on TCP while the others use InfiniBand: the ring
falls to sockets, or `ncclCommInitRank` hangs on mismatched transports) stall or break
the whole job. A Pod that starts more processes than it has GPUs gives the extra
local ranks no device of their own (`torch.cuda.set_device(local_rank)`: "invalid
device ordinal").
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from webhook.core.jobs.model import Job, Rank
from webhook.core.kit.paths import Path
from webhook.core.kit.text import listing, plural
from webhook.core.kit.violation import Violation


def _products(rank: Rank) -> str:
    return "any GPU product" if rank.products is None else " or ".join(sorted(rank.products))


def _networks(rank: Rank) -> str:
    parts = [f"RDMA {', '.join(rank.rdma)}"] if rank.rdma else []
    if rank.networks:
        parts.append(f"networks {', '.join(rank.networks)}")
    return " and ".join(parts) or "no RDMA resource and no extra network (TCP only)"


# What ranks must share: a key, how to say it, where the second rank sets it, and why.
_ASPECTS: tuple[tuple[str, Callable[[Rank], Hashable], Callable[[Rank], str], str], ...] = (
    (
        "GPU count",
        lambda r: r.gpus,
        lambda r: plural(r.gpus, "GPU"),
        "each collective waits for the rank with the fewest GPUs, and a tensor- or "
        "pipeline-parallel layout that assumes one count breaks",
    ),
    (
        "GPU product",
        lambda r: r.products,
        _products,
        "the ranks on the slower product set the pace of every step, and memory sized "
        "for one product overflows on the other",
    ),
    (
        "MIG-ness",
        lambda r: r.mig,
        lambda r: "MIG slices" if r.mig else "whole GPUs",
        "a MIG slice has no P2P and NCCL does not communicate across MIG instances",
    ),
    (
        "network attachments",
        lambda r: (r.rdma, r.networks),
        _networks,
        "ranks on different transports make NCCL fall back to sockets for every rank or "
        "hang in ncclCommInitRank",
    ),
)


def _where(aspect: str, first: Rank, rank: Rank) -> Path:
    if aspect == "GPU product":  # the pin, where one rank has it and the other not
        return first.products_path if rank.products is None else rank.products_path
    if aspect == "network attachments" and rank.networks and not rank.rdma:
        return (*rank.role.pod.metadata_path, "annotations")
    return rank.gpu_path


def ranks_differ(job: Job) -> list[Violation]:
    """GPU roles of one job kind that differ in GPUs, product, MIG-ness or network."""
    if job.shape is None or not job.shape.ranks_alike:
        return []
    # Ranks whose GPUs come from DRA claims are counted by their claims, not here.
    ranks = [r for r in job.gpu_ranks if r.claims == 0]
    if len(ranks) < 2:
        return []
    out: list[Violation] = []
    first = ranks[0]
    for aspect, key, say, why in _ASPECTS:
        other = next((r for r in ranks[1:] if key(r) != key(first)), None)
        if other is None:
            continue
        out.append(
            Violation(
                "ranks-differ",
                _where(aspect, first, other),
                f"the ranks of the {job.kind} differ in {aspect}: {first.name} has "
                f"{say(first)}, {other.name} {say(other)}. One job's ranks run in lockstep: "
                f"{why}. Give every rank the same {aspect}.",
            )
        )
    return out


def nproc_exceeds_gpus(job: Job) -> list[Violation]:
    """A role whose Pods start more processes than they have GPUs."""
    out: list[Violation] = []
    for rank in job.ranks:
        nproc = rank.nproc
        if nproc is None or rank.claims or rank.gpus == 0 or nproc.value <= rank.gpus:
            continue
        out.append(
            Violation(
                "nproc-exceeds-gpus",
                nproc.path,
                f"{rank.name}: {nproc.source} starts {nproc.value} processes in each Pod, "
                f"but the Pod requests {plural(rank.gpus, 'GPU')} "
                f"({listing(rank.resources)}): local ranks {rank.gpus}..{nproc.value - 1} "
                "find no GPU of their own (torch.cuda.set_device: invalid device ordinal) "
                "or share one. Start as many processes as the Pod has GPUs "
                f"({rank.gpus}), or request {nproc.value}.",
            )
        )
    return out


def nproc_unequal(job: Job) -> list[Violation]:
    """Roles of one job that run ranks with different processes per Pod."""
    ranks = [r for r in job.ranks if r.nproc is not None and r.asks_gpus]
    if job.shape is None or len(ranks) < 2:
        return []
    first = ranks[0]
    assert first.nproc is not None
    for other in ranks[1:]:
        assert other.nproc is not None
        if other.nproc.value != first.nproc.value:
            return [
                Violation(
                    "nproc-unequal",
                    other.nproc.path,
                    f"the {job.kind}'s ranks start different process counts per Pod: "
                    f"{first.name} {first.nproc.value} ({first.nproc.source}), {other.name} "
                    f"{other.nproc.value} ({other.nproc.source}). torchrun computes the "
                    "world size as nnodes x nproc-per-node and every node must agree, so "
                    "the rendezvous fails or waits for ranks that never come. Start the "
                    "same number on every node.",
                )
            ]
    return []
