"""Large inputs across processes: `check` by files, with the single-process output.

A pull request touches a few files: one process, no pool. A repository of thousands of
manifests is parsed (most of the cost: YAML) by one forked worker per CPU, each taking
contiguous runs of files in their order; the runs' results are put back in that order,
so findings, errors, counts and exit codes are those of `check_paths` on the same files.

Workers are forked (the policy set and the inventory are inherited, never pickled):
where fork is not available, or for stdin, everything runs in this process.
multiprocessing is imported only for a pool: a pull request's few files never need it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from webhook.commands.check import (
    CheckRun,
    check_paths,
    empty_inputs,
    merged_in_order,
    supply_objects,
    with_supply_objects,
)
from webhook.core.engine.policy import PolicySet
from webhook.core.supply.inventory import Inventory
from webhook.sources.files import expand_paths

if TYPE_CHECKING:
    from multiprocessing.pool import Pool

# Below this many files a pool costs more than it saves (measured with bench/peers.py:
# forking two workers and collecting their runs is ~30 ms, a file ~0.1-0.3 ms).
MIN_FILES = 400
_RUNS_PER_WORKER = 8  # smaller runs even out workers whose files differ in size
# From this many files the DRA pre-pass (a read of every file) runs on all CPUs too: at
# 20,000 files it takes ~0.4 s alone, at 2,000 less than forking another pool costs.
DRA_POOL_FILES = 5000

# What a forked worker judges with: set in the parent just before the pool forks.
_shared: tuple[PolicySet, Inventory] | None = None


def workers_available() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def check_files(
    paths: Sequence[str],
    *,
    policy_set: PolicySet,
    inventory: Inventory,
    workers: int | None = None,
    min_files: int = MIN_FILES,
) -> CheckRun:
    """`check_paths`, split across `workers` processes (default: one per CPU) when there
    are at least `min_files` files; the same CheckRun either way."""
    listed = {raw: list(expand_paths([raw])) for raw in paths}  # each directory walked once
    files = [name for raw in paths for name in listed[raw]]
    workers = workers_available() if workers is None else workers
    if workers < 2 or len(files) < min_files or "-" in files or not _can_fork():
        run = check_paths(
            files, policy_set=policy_set, inventory=inventory, expanded=True, dump_workers=workers
        )
    else:
        run = _in_parts(files, policy_set=policy_set, inventory=inventory, workers=workers)
    run.errors.extend(empty_inputs(paths, run, expanded=listed))  # the same on both paths
    return run


def _in_parts(
    files: list[str], *, policy_set: PolicySet, inventory: Inventory, workers: int
) -> CheckRun:
    runs = _chunks(files, workers * _RUNS_PER_WORKER)
    pooled = len(files) >= DRA_POOL_FILES
    found = _supply_in_parts(runs, workers) if pooled else supply_objects(files)
    global _shared
    _shared = (policy_set, with_supply_objects(inventory, found))  # references across parts
    try:
        with _fork_pool(workers) as pool:
            return merged_in_order(pool.map(_check_chunk, runs, chunksize=1))
    finally:
        _shared = None


def _supply_in_parts(runs: list[list[str]], workers: int) -> list[Mapping[str, Any]]:
    """The pre-pass for DRA objects (reading every file) on all CPUs too: a pool of its
    own, since the judging pool must inherit the inventory the pre-pass completes."""
    with _fork_pool(workers) as pool:
        return [obj for part in pool.map(supply_objects, runs, chunksize=1) for obj in part]


def _can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def _fork_pool(workers: int) -> Pool:
    import multiprocessing

    return multiprocessing.get_context("fork").Pool(workers)


def _chunks(files: list[str], count: int) -> list[list[str]]:
    size = -(-len(files) // count)
    return [files[i : i + size] for i in range(0, len(files), size)]


def _check_chunk(files: list[str]) -> CheckRun:
    assert _shared is not None, "a worker forked without the policy set"
    policy_set, inventory = _shared
    return check_paths(
        files, policy_set=policy_set, inventory=inventory, input_dra=False, expanded=True
    )
