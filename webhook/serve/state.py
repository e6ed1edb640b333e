"""What a running server judges with: the policy set and the inventory, kept current.

Both are immutable snapshots swapped in whole, so a request reads one consistent pair
without locks. Reloads that fail keep the last good snapshot and record the error.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webhook.core.dra.match import warm
from webhook.core.dra.model import CLAIM_KINDS, ClaimSpec, DraSupply
from webhook.core.engine.evaluation import StaleAction, Staleness
from webhook.core.engine.policy import PolicySet
from webhook.core.queues.supply import TABLES as QUEUE_TABLES
from webhook.core.queues.supply import QueueSupply
from webhook.core.supply.inventory import Inventory, Node, parse_node
from webhook.errors import GpuAdmissionError, InventoryError
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
    _unparsable: dict[str, str] = field(default_factory=dict)  # node name -> why
    # The Node watch and the DRA watches run in threads of their own; each builds the
    # next inventory from the current one, so the read-modify-write is serialised.
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # DRA kinds whose first list has not arrived; readiness waits for them (the live
    # watches set it; a file inventory has none to wait for).
    dra_pending: set[str] = field(default_factory=set)

    @property
    def ready(self) -> bool:
        return self.inventory_synced and not self.dra_pending

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
        """Called by the Node watcher's thread after a (re-)list: builds the snapshot,
        then swaps it in. A Node that does not parse is left out and named in
        `inventory_error` (the apiserver validates Nodes, so this is a bug of ours)."""
        self._unparsable = {}

        def parsed() -> Iterator[Node]:
            for i, obj in enumerate(nodes):
                try:
                    yield parse_node(obj, index=i)
                except InventoryError as exc:
                    self._unparsable[_name(obj, i)] = str(exc)

        with self._lock:
            try:
                read = self.policy_set.profile.node_facts
                inventory = (
                    Inventory.from_parsed(parsed(), read=read)
                    .with_dra(self.inventory.dra)
                    .with_queues(self.inventory.queues)
                )
            except GpuAdmissionError as exc:
                self.inventory_error = str(exc)
                log.error("inventory from the cluster not usable: %s", exc)
                return
            self._swap_inventory(inventory)

    def update_nodes(self, changed: Mapping[str, Mapping[str, Any] | None]) -> None:
        """Called by the Node watcher's thread with the Nodes one batch of events
        changed (None: deleted). Costs what those nodes cost; when nothing a check
        reads changed (heartbeats, conditions, resourceVersion, managedFields, the GFD
        timestamp) the inventory stays the same object, and so do the caches on it."""
        with self._lock:
            self._update_nodes(changed)

    def _update_nodes(self, changed: Mapping[str, Mapping[str, Any] | None]) -> None:
        inventory = self.inventory
        for name, obj in changed.items():
            self._unparsable.pop(name, None)
            try:
                node = None if obj is None else parse_node(obj)
            except InventoryError as exc:
                self._unparsable[name] = str(exc)
                node = None
            inventory = (
                inventory.without_node(name) if node is None else inventory.with_parsed(node)
            )
        if inventory is self.inventory:
            self.inventory_synced_at = self.clock()
            self._report_unparsable()
        else:
            self._swap_inventory(inventory)

    def set_dra(self, kind: str, objects: Sequence[Mapping[str, Any]]) -> None:
        """Called by a DRA watcher's thread after a (re-)list of `kind` (DeviceClass,
        ResourceSlice, ResourceClaimTemplate, ResourceClaim; none when the cluster does
        not serve resource.k8s.io/v1): that kind's objects become these."""
        with self._lock:
            dra = self.inventory.dra
            given = {_dra_key(o) for o in objects}
            for namespace, name in _dra_keys(dra, kind):
                if (namespace, name) not in given:
                    dra = dra.without(kind, name, namespace)
            for obj in objects:
                namespace, name = _dra_key(obj)
                dra = self._put_dra(dra, kind, f"{namespace}/{name}", obj)
            claims = [c for c in dra.claims.values() if c.kind == kind]
            self._swap_dra(dra, claims)
            self.dra_pending.discard(kind)

    def update_dra(self, kind: str, changed: Mapping[str, Mapping[str, Any] | None]) -> None:
        """Called by a DRA watcher's thread with the objects one batch of events changed
        (keyed `name` or `namespace/name`; None: deleted). Costs what they cost: a
        ResourceSlice event re-evaluates selectors on that slice only."""
        with self._lock:
            dra = self.inventory.dra
            for key, obj in changed.items():
                if obj is None:
                    namespace, _, name = key.rpartition("/")
                    dra = dra.without(kind, name, namespace)
                else:
                    dra = self._put_dra(dra, kind, key, obj)
            claims: list[ClaimSpec] = []
            if kind in CLAIM_KINDS:
                for key in changed:
                    namespace, _, name = key.rpartition("/")
                    claim = dra.claims.get((kind, namespace, name))
                    claims += [claim] if claim is not None else []
            self._swap_dra(dra, claims)

    def set_queues(self, kind: str, objects: Sequence[Mapping[str, Any]]) -> None:
        """Called by a queue watcher's thread after a (re-)list of `kind` (a Kueue kind or
        ResourceQuota; none where the cluster does not serve it): that kind's objects
        become these."""
        with self._lock:
            queues = self.inventory.queues
            given = {_dra_key(o) for o in objects}
            for namespace, name in _queue_keys(queues, kind):
                if (namespace, name) not in given:
                    queues = queues.without(kind, name, namespace)
            for obj in objects:
                queues = _put_queue(queues, obj)
            self.inventory = self.inventory.with_queues(queues)
            self.dra_pending.discard(kind)

    def update_queues(self, kind: str, changed: Mapping[str, Mapping[str, Any] | None]) -> None:
        """Called by a queue watcher's thread with the objects one batch of events changed
        (keyed `name` or `namespace/name`; None: deleted): the cost of those objects. An
        event that changes nothing a rule reads (status, usage) keeps the same supply."""
        with self._lock:
            queues = self.inventory.queues
            for key, obj in changed.items():
                if obj is None:
                    namespace, _, name = key.rpartition("/")
                    queues = queues.without(kind, name, namespace)
                else:
                    queues = _put_queue(queues, obj)
            self.inventory = self.inventory.with_queues(queues)

    def _put_dra(self, dra: DraSupply, kind: str, key: str, obj: Mapping[str, Any]) -> DraSupply:
        where = f"{kind} {key.lstrip('/')}"
        self._unparsable.pop(where, None)
        namespace, name = _dra_key(obj)
        if _generated_claim(obj):  # one per Pod, named by no Pod spec: not kept
            return dra.without(kind, name, namespace)
        try:
            return dra.with_object(obj)
        except (GpuAdmissionError, ValueError) as exc:
            self._unparsable[where] = str(exc)
            return dra.without(kind, name, namespace)

    def _swap_dra(self, dra: DraSupply, claims: Sequence[ClaimSpec]) -> None:
        if dra is not self.inventory.dra:
            # The device matches requests will ask for are worked out here, on the watch
            # thread, before requests see this supply: the first evaluation of a
            # (class, selectors) pair at 10,000 devices takes most of a second.
            warm(dra, previous=self.inventory.dra, claims=claims)
            self.inventory = self.inventory.with_dra(dra)
        self._report_unparsable()

    def _swap_inventory(self, inventory: Inventory) -> None:
        if inventory.dra is not self.inventory.dra:  # a file inventory (re)loaded
            warm(inventory.dra, previous=self.inventory.dra)
        # Offers as the policy set's cluster profile reads nodes (one build when it
        # differs; updates then keep it).
        self.inventory = inventory.reading(self.policy_set.profile.node_facts)
        self.inventory_synced_at = self.clock()
        self.inventory_synced = True
        self._report_unparsable()
        metrics.INVENTORY_NODES.set(inventory.node_count)

    def _report_unparsable(self) -> None:
        errors = list(self._unparsable.values())
        if not errors:
            self.inventory_error = None
            return
        error = "; ".join(errors[:3]) + (f"; and {len(errors) - 3} more" if len(errors) > 3 else "")
        if error != self.inventory_error:
            log.error("nodes left out of the inventory: %s", error)
        self.inventory_error = error

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
        with self._lock:  # the Node watcher swaps snapshots under it too
            self.policy_set, self.policy_error = policy_set, None
            self.inventory = self.inventory.reading(policy_set.profile.node_facts)
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
            inventory = read_inventory(path, read=self.policy_set.profile.node_facts)
        except GpuAdmissionError as exc:
            return self._inventory_failed(str(exc), initial)
        self._inventory_digest = digest
        self._swap_inventory(inventory)
        log.info("inventory loaded from %s: %d nodes", path, inventory.node_count)
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


# The resourceclaim controller marks the claims it makes from a Pod's template
# (k8s.io/kubernetes pkg/controller/resourceclaim: podResourceClaimAnnotation).
GENERATED_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


def _generated_claim(obj: Mapping[str, Any]) -> bool:
    if obj.get("kind") != "ResourceClaim":
        return False
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return isinstance(annotations, Mapping) and GENERATED_CLAIM_ANNOTATION in annotations


def _dra_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _dra_keys(dra: DraSupply, kind: str) -> list[tuple[str, str]]:
    """(namespace, name) of every object of `kind` the supply holds."""
    if kind == "DeviceClass":
        return [("", name) for name in dra.classes]
    if kind == "ResourceSlice":
        return [("", name) for name in dra.slices]
    if kind == "Namespace":
        return [("", name) for name in dra.namespaces]
    return [(ns, name) for k, ns, name in dra.claims if k == kind]


def _queue_keys(queues: QueueSupply, kind: str) -> list[tuple[str, str]]:
    """(namespace, name) of every object of `kind` the queue supply holds, readable or not."""
    table: Mapping[Any, Any] = getattr(queues, QUEUE_TABLES[kind])
    keys = [k if isinstance(k, tuple) else ("", k) for k in table]
    return keys + [(ns, name) for k, ns, name in queues.unreadable if k == kind]


def _put_queue(queues: QueueSupply, obj: Mapping[str, Any]) -> QueueSupply:
    """The object read into the supply; one that cannot be read is kept as unreadable (the
    jobs it would judge say so), never dropped as if it did not exist."""
    try:
        return queues.with_object(obj)
    except InventoryError as exc:
        log.error("queue object not usable: %s", exc)
        return queues.with_unreadable(obj, str(exc))


def _name(obj: object, index: int) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) and name else f"item {index}"
