"""What a running server judges with: the policy set and the inventory, kept current.

Both are immutable snapshots swapped in whole, so a request reads one consistent pair
without locks. Reloads that fail keep the last good snapshot and record the error.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webhook.core.engine import StaleAction, Staleness
from webhook.core.inventory import Inventory
from webhook.core.policy import PolicySet
from webhook.errors import GpuAdmissionError
from webhook.serve import metrics
from webhook.serve.evalcache import EvaluationCache
from webhook.sources.files import read_inventory
from webhook.sources.policy_files import files_digest, load_policy_dir, policy_files, read_files

log = logging.getLogger("gpu_admission.state")


@dataclass
class Settings:
    policies_dir: str
    inventory_file: str | None = None
    inventory_max_age: float = 600.0
    stale_action: StaleAction = "warn"
    reload_interval: float = 5.0
    kubeconfig: str | None = None
    context: str | None = None
    body_timeout: float = 10.0  # a client that has not sent its body by then is cut off
    eval_cache_size: int = 2048  # decisions of identical objects remembered; 0: none


@dataclass
class State:
    """Current snapshots plus the health of the things that feed them."""

    settings: Settings
    policy_set: PolicySet
    inventory: Inventory = field(default_factory=Inventory.unknown)
    inventory_synced_at: float | None = None  # monotonic
    inventory_synced: bool = False
    policy_error: str | None = None
    inventory_error: str | None = None
    clock: Callable[[], float] = time.monotonic
    # A live Node watch reports its own last sync (events and bookmarks count too).
    last_sync: Callable[[], float | None] | None = None
    cache: EvaluationCache = field(default_factory=EvaluationCache)
    _policy_digest: str = ""
    _settling_digest: str | None = None  # changed content seen at the last check, not loaded yet
    _inventory_digest: str = ""

    @classmethod
    def start(cls, settings: Settings) -> State:
        """Load policies (and a file inventory); errors here stop `serve`."""
        state = cls(settings, load_policy_dir(settings.policies_dir))
        state.cache = EvaluationCache(settings.eval_cache_size)
        state._policy_digest = directory_digest(settings.policies_dir)
        if settings.inventory_file:
            state.reload_inventory_file(initial=True)
        return state

    def inventory_age(self) -> float | None:
        synced_at = self.last_sync() if self.last_sync is not None else self.inventory_synced_at
        return None if synced_at is None else self.clock() - synced_at

    def staleness(self) -> Staleness | None:
        """Only a live watch goes stale: a file inventory is as current as its file."""
        if self.settings.inventory_file:
            return None
        age = self.inventory_age()
        if age is None or age <= self.settings.inventory_max_age:
            return None
        return Staleness(age, self.settings.inventory_max_age, self.settings.stale_action)

    def set_nodes(self, nodes: Sequence[Mapping[str, Any]]) -> None:
        """Called by the Node watcher's thread; builds the snapshot, then swaps it in."""
        try:
            inventory = Inventory.from_nodes(nodes)
        except GpuAdmissionError as exc:
            self.inventory_error = str(exc)
            log.error("inventory from the cluster not usable: %s", exc)
            return
        self._swap_inventory(inventory)

    def _swap_inventory(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self.inventory_synced_at = self.clock()
        self.inventory_synced = True
        self.inventory_error = None
        metrics.INVENTORY_NODES.set(len(inventory.nodes))

    def reload_policies(self) -> bool:
        """Re-read the policy directory if its content changed and then held still for one
        check; True if a new set serves.

        A file caught in the middle of a write (truncated, then written) must not load: a
        prefix of a policy file often parses, as a policy with shorter lists. Waiting for
        the same content at two checks in a row lets a write in progress finish first.
        """
        digest = directory_digest(self.settings.policies_dir)
        if digest == self._policy_digest:
            self._settling_digest = None
            return False
        if digest != self._settling_digest:
            self._settling_digest = digest
            return False
        self._policy_digest = digest
        try:
            policy_set = load_policy_dir(self.settings.policies_dir)
        except GpuAdmissionError as exc:
            self.policy_error = str(exc)
            metrics.RELOADS.labels("error").inc()
            metrics.RELOAD_ERROR.set(1)
            log.error("policy reload failed, still serving %s: %s", self.policy_set.digest, exc)
            return False
        self.policy_set, self.policy_error = policy_set, None
        metrics.RELOADS.labels("success").inc()
        metrics.RELOAD_ERROR.set(0)
        log.info("policies reloaded: %s (%d policies)", policy_set.digest, len(policy_set.policies))
        return True

    def reload_inventory_file(self, *, initial: bool = False) -> bool:
        path = self.settings.inventory_file
        assert path is not None
        try:
            digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError as exc:
            return self._inventory_failed(f"{path}: {exc.strerror}", initial)
        if digest == self._inventory_digest:
            self.inventory_synced_at = self.clock()
            return False
        try:
            inventory = read_inventory(path)
        except GpuAdmissionError as exc:
            return self._inventory_failed(str(exc), initial)
        self._inventory_digest = digest
        self._swap_inventory(inventory)
        log.info("inventory loaded from %s: %d nodes", path, len(inventory.nodes))
        return True

    def _inventory_failed(self, error: str, initial: bool) -> bool:
        if initial:
            raise GpuAdmissionError(f"inventory did not load: {error}")
        self.inventory_error = error
        log.error("inventory reload failed, keeping the last one: %s", error)
        return False


def directory_digest(directory: str) -> str:
    """The content hash of the policy files as they are now; "" when they cannot be read
    (the load that follows then says why)."""
    root = Path(directory)
    try:
        return files_digest(read_files(policy_files(root), root))
    except OSError:
        return ""
