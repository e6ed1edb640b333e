"""Decisions of identical workloads, remembered for one policy set and one inventory.

The apiserver asks about many objects that differ only in their names: every Pod of a
ReplicaSet or a Job, the same Deployment applied again. `evaluate` is pure, so an
object that matches an earlier one in everything a check can read (kind, namespace,
labels, annotations, spec) gets the earlier Decision. The cache empties itself when
the policy set or the inventory snapshot is swapped, and is bounded twice: by entries
(`--eval-cache-size`) and by bytes (MAX_BYTES of keys and findings, oldest dropped
first). A key or a decision over MAX_ENTRY_BYTES is never kept: a tenant's 250 KB env
value makes each of its Pods distinct, and would otherwise fill the cache with them.

What "everything a check can read" is comes from the checks' own declarations
(webhook.core.engine.reads), for the kinds of target the object makes: a check that
judges by who asks (a Namespace's admin-access label) keeps its objects out of the
cache, and one whose findings quote the object's name gets the name into the key.

One mutation would defeat it: the ServiceAccount admission plugin, which runs before
any validating webhook, gives every Pod a projected token volume with a random name
(`kube-api-access-x7k2p`) and mounts it in each container. The key uses one name for
all of them; a Decision that names such a volume in a message is not kept, so a hit
never carries another Pod's name.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

import orjson

from webhook.core.engine.evaluation import Decision, Finding, Staleness, Subject, evaluate
from webhook.core.engine.policy import PolicySet
from webhook.core.engine.reads import Reads
from webhook.core.supply.inventory import Inventory
from webhook.core.workloads.targets import target_kinds

_TOKEN_VOLUME = re.compile(r"kube-api-access-[a-z0-9]{5}")
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
# What of an object's metadata a check can see; names, uids, owners and times differ
# between replicas and change nothing.
_METADATA_READ = ("labels", "annotations")
_METADATA_NAMED = (*_METADATA_READ, "name", "generateName")
MAX_BYTES = 8 << 20  # keys and decisions held in all (about 4 KB an entry when full)
MAX_ENTRY_BYTES = 64 << 10  # a larger key or decision is judged each time, never kept
_ENTRY_OVERHEAD = 400  # dict slot, Decision and tuple headers, bytes object header
_FINDING_OVERHEAD = 200  # a Finding tuple, its strings' headers and its path tuple


class EvaluationCache:
    def __init__(self, max_entries: int = 2048, max_bytes: int = MAX_BYTES) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self.bytes = 0  # what the entries held now take, as entry_bytes counts it
        self._entries: dict[bytes, tuple[Decision, int]] = {}
        # The keys oldest first: `next(iter(dict))` after many pops from the front scans
        # the holes they leave (about a microsecond a miss at 2048 entries).
        self._order: deque[bytes] = deque()
        self._for: tuple[PolicySet, Inventory] | None = None

    def evaluate(
        self,
        policy_set: PolicySet,
        subject: Subject,
        inventory: Inventory,
        *,
        stale: Staleness | None = None,
    ) -> Decision:
        if stale is not None or self.max_entries <= 0:
            return evaluate(policy_set, subject, inventory, stale=stale)
        if self._for is None or self._for[0] is not policy_set or self._for[1] is not inventory:
            self._entries.clear()
            self._order.clear()
            self.bytes = 0
            self._for = (policy_set, inventory)
        reads = policy_set.reads_of(target_kinds(subject.obj, custom=policy_set.custom_kinds))
        key = fingerprint(subject, reads)
        if key is None or len(key) > MAX_ENTRY_BYTES:
            return evaluate(policy_set, subject, inventory)
        entry = self._entries.get(key)
        if entry is not None:
            self.hits += 1
            return entry[0]
        self.misses += 1
        decision = evaluate(policy_set, subject, inventory)
        if decision.error is not None or any(
            _TOKEN_VOLUME.search(f.message) for f in decision.findings
        ):
            return decision  # a fault is answered anew each time; a token name is one Pod's
        self._keep(key, decision)
        return decision

    def _keep(self, key: bytes, decision: Decision) -> None:
        size = entry_bytes(key, decision.findings)
        if size > MAX_ENTRY_BYTES or size > self.max_bytes:
            return
        while self._entries and (
            len(self._entries) >= self.max_entries or self.bytes + size > self.max_bytes
        ):
            self.bytes -= self._entries.pop(self._order.popleft())[1]
        # A copy of exactly its length: orjson's output can keep the capacity of an
        # earlier, larger one (a 30 KB key held 250 KB after a 250 KB object).
        kept = bytes(memoryview(key))
        self._entries[kept] = (decision, size)
        self._order.append(kept)
        self.bytes += size


def entry_bytes(key: bytes, findings: tuple[Finding, ...]) -> int:
    """What one entry holds: its key, and its findings' messages and paths (UTF-8 aside,
    a character is counted as a byte), with fixed allowances for the objects around them."""
    size = len(key) + _ENTRY_OVERHEAD
    for f in findings:
        size += _FINDING_OVERHEAD + len(f.message) + len(f.policy) + len(f.rule)
        size += sum(len(step) if type(step) is str else 8 for step in f.path)
    return size


def fingerprint(subject: Subject, reads: Reads) -> bytes | None:
    """Everything of the subject the checks can read, as bytes; None if it must not come
    from the cache (a check reads who asks) or will not encode."""
    obj = subject.obj
    if reads.requester:
        return None  # judged by who asks (a Namespace label change): never from the cache
    trimmed: dict[str, Any] = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
    spec = trimmed.get("spec")
    if obj.get("kind") == "Pod" and isinstance(spec, dict):
        trimmed["spec"] = _one_token_volume_name(spec)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        # No pod check's findings name the Pod (the response does), so a ReplicaSet's Pods
        # share an entry; a check that quotes a claim's name declares it, and gets it.
        read = _METADATA_NAMED if reads.names else _METADATA_READ
        trimmed["metadata"] = {k: meta.get(k) for k in read}
        if reads.owners:  # a Pod its controller made is judged with its owner, not alone
            owners = meta.get("ownerReferences")
            trimmed["owners"] = (
                [(o.get("apiVersion"), o.get("kind")) for o in owners if isinstance(o, dict)]
                if isinstance(owners, list)
                else None
            )
    try:
        return orjson.dumps([subject.namespace, trimmed])
    except TypeError:  # integers past 64 bits and the like: judge without the cache
        return None


def _one_token_volume_name(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with every projected kube-api-access-<random> volume named alike."""
    volumes = spec.get("volumes")
    if not isinstance(volumes, list):
        return spec
    generated = {
        v["name"]
        for v in volumes
        if isinstance(v, dict)
        and "projected" in v
        and isinstance(v.get("name"), str)
        and _TOKEN_VOLUME.fullmatch(v["name"])
    }
    if not generated:
        return spec
    out = dict(spec)
    out["volumes"] = [_renamed(v, generated) for v in volumes]
    for field in _CONTAINER_LISTS:
        containers = spec.get(field)
        if isinstance(containers, list):
            out[field] = [_mounts_renamed(c, generated) for c in containers]
    return out


def _renamed(item: Any, generated: set[str]) -> Any:
    if isinstance(item, dict) and item.get("name") in generated:
        return {**item, "name": "kube-api-access-*"}
    return item


def _mounts_renamed(container: Any, generated: set[str]) -> Any:
    if not isinstance(container, dict) or not isinstance(container.get("volumeMounts"), list):
        return container
    mounts = [_renamed(m, generated) for m in container["volumeMounts"]]
    return {**container, "volumeMounts": mounts}
