"""Which nodes could ever run a pod: nodeSelector, required node affinity, taints.

Only the hard constraints count; preferences and resources in use do not, because an
admission decision must hold for any moment the scheduler might pick.

`candidates` answers from the inventory's indexes (webhook.core.supply.selection) and
memoises per snapshot, keyed by a digest of the pod's constraints; `rejection` is the
same rule for one node, which says why a node is out and is the reference the indexed
answer is tested against. `pin_selector` finds a nodeSelector that would keep a pod
on the good nodes from per-label counts.
"""

from __future__ import annotations

import hashlib
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from webhook.core.kit.dicts import as_dict, as_list
from webhook.core.kit.idsets import Membership, as_bits, first, lowest
from webhook.core.kit.text import listing, shown
from webhook.core.kit.tolerations import BLOCKING, tolerates
from webhook.core.supply.inventory import Inventory, Node, Offer, Taint
from webhook.core.supply.nodeindex import NodeIndex
from webhook.core.supply.profiles import placement_spec
from webhook.core.supply.selection import allowed
from webhook.core.workloads.pods import PodView


class Candidates:
    """The offers of one resource on the nodes a pod may be scheduled to, as a set of
    node ids, with what the checks ask of them answered per offer shape."""

    __slots__ = ("_groups", "_largest", "_offers", "bits", "index", "resource")

    def __init__(self, index: NodeIndex, resource: str, bits: int) -> None:
        self.index, self.resource, self.bits = index, resource, bits
        self._offers: tuple[Offer, ...] | None = None
        self._groups: tuple[tuple[Offer, int], ...] | None = None
        self._largest: Offer | None = None

    def __bool__(self) -> bool:
        return bool(self.bits)

    def __len__(self) -> int:
        return self.bits.bit_count()

    @property
    def offers(self) -> tuple[Offer, ...]:
        """Every candidate offer, in node order (materialised on first use)."""
        if self._offers is None:
            self._offers = tuple(self.index.offers_in(self.resource, self.bits))
        return self._offers

    def groups(self) -> tuple[tuple[Offer, int], ...]:
        """(the first offer of a shape, the candidates of that shape) for every offer
        shape among the candidates, in node order: offers of one shape are judged
        alike, and a cluster has a handful of shapes however many nodes it has."""
        if self._groups is None:
            found = self.index.resources.get(self.resource)
            groups = []
            for nodes in found.shapes.values() if found is not None else ():
                bits = as_bits(nodes) & self.bits
                if bits:
                    groups.append((first(bits), bits))
            self._groups = tuple(
                (self.index.offer(self.resource, i), bits) for i, bits in sorted(groups)
            )
        return self._groups

    def first(self, bits: int) -> Offer:
        """The offer of the first node (in node order) of `bits`."""
        return self.index.offer(self.resource, first(bits))

    def largest(self) -> Offer:
        """The first offer with the largest count."""
        if self._largest is None:
            found = self.index.resources[self.resource]
            for count in sorted(found.counts.keys(), reverse=True):
                bits = as_bits(found.counts[count]) & self.bits
                if bits:
                    self._largest = self.first(bits)
                    break
            else:
                raise ValueError("no candidates")
        return self._largest


def candidates(pod: PodView, resource: str, inventory: Inventory) -> Candidates:
    """The offers of `resource` on nodes this pod may be scheduled to (with the
    tolerations the cluster profile adds at admission)."""
    digest = pod.memo.get("constraints")
    if digest is None:
        digest = pod.memo["constraints"] = _constraints_digest(placement_spec(pod))
    key = (resource, digest)
    found = inventory.memo(key)
    if found is None:
        index = inventory.index
        ok = allowed_nodes(pod, inventory)
        ri = index.resources.get(resource)
        found = Candidates(index, resource, ok & ri.bits if ri is not None else 0)
        inventory.remember(key, found, _weight(found, index))
    return found  # type: ignore[no-any-return]


def allowed_nodes(pod: PodView, inventory: Inventory) -> int:
    """The nodes this pod may be scheduled to, whatever it requests (a node-id bitset)."""
    digest = pod.memo.get("constraints")
    if digest is None:
        digest = pod.memo["constraints"] = _constraints_digest(placement_spec(pod))
    ok = inventory.memo(digest)
    if ok is None:
        ok = allowed(placement_spec(pod), inventory.index)
        inventory.remember(digest, ok, sys.getsizeof(ok) + 64)
    return ok  # type: ignore[no-any-return]


def offered(resource: str, inventory: Inventory) -> Candidates:
    """Every offer of `resource` in the inventory, as Candidates."""
    key = ("offered", resource)
    found = inventory.memo(key)
    if found is None:
        index = inventory.index
        ri = index.resources.get(resource)
        found = Candidates(index, resource, ri.bits if ri is not None else 0)
        inventory.remember(key, found, _weight(found, index))
    return found  # type: ignore[no-any-return]


def candidate_offers(pod: PodView, resource: str, inventory: Inventory) -> tuple[Offer, ...]:
    """The offers of `resource` on nodes this pod may be scheduled to, in node order."""
    return candidates(pod, resource, inventory).offers


def _weight(found: Candidates, index: NodeIndex) -> int:
    # What a Candidates may come to hold: its set, one set per shape, and the offers.
    ri = index.resources.get(found.resource)
    sets = 2 + (len(ri.shapes) if ri is not None else 0)
    return sys.getsizeof(found.bits) * sets + 8 * len(found) + 256


def _constraints_digest(spec: Mapping[str, Any]) -> bytes:
    # Pods of one workload share these fields; a digest of their repr is a small key.
    fields: Sequence[str] = ("nodeSelector", "affinity", "tolerations")
    text = repr([spec.get(f) for f in fields]).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(text, digest_size=16).digest()


def _raw(bits: int) -> bytes:
    return bits.to_bytes((bits.bit_length() + 7) >> 3, "little")


def _digest(*parts: bytes) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.digest()


# -- one node: the reference, and the reason for a message ------------------------------


def rejection(spec: Mapping[str, Any], node: Node) -> str | None:
    """Why the pod cannot land on the node, or None if it can."""
    selector = as_dict(spec.get("nodeSelector"))
    for key, value in selector.items():
        if node.labels.get(key) != str(value):
            return f"nodeSelector {shown(key, 80)}={shown(value)}"
    affinity = as_dict(
        as_dict(as_dict(spec.get("affinity")).get("nodeAffinity")).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    )
    if affinity:
        terms = as_list(affinity.get("nodeSelectorTerms"))
        if not any(_term_matches(as_dict(t), node) for t in terms):
            return "required node affinity"
    taints = untolerated_taints(spec, node)
    return f"taint {taint_text(taints[0])}" if taints else None


def untolerated_taints(spec: Mapping[str, Any], node: Node) -> tuple[Taint, ...]:
    """The node's NoSchedule/NoExecute taints that the pod does not tolerate."""
    tolerations = [as_dict(t) for t in as_list(spec.get("tolerations"))]
    return tuple(
        taint
        for taint in node.taints
        if taint.effect in BLOCKING and not any(tolerates(t, taint) for t in tolerations)
    )


def taint_text(taint: Taint) -> str:
    return f"{taint.key}={taint.value}:{taint.effect}"


def _term_matches(term: Mapping[str, Any], node: Node) -> bool:
    expressions = as_list(term.get("matchExpressions"))
    fields = as_list(term.get("matchFields"))
    if not expressions and not fields:
        return False  # an empty term matches no node
    field_values = {"metadata.name": node.name}
    return all(_expression_matches(as_dict(e), node.labels) for e in expressions) and all(
        _expression_matches(as_dict(f), field_values) for f in fields
    )


def _expression_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op = str(expr.get("key", "")), expr.get("operator")
    values = [str(v) for v in as_list(expr.get("values"))]
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


# -- what a message says about many nodes ---------------------------------------------


def listed(names: list[str], total: int, limit: int = 3) -> str:
    """`text.listing` of `total` items of which only the first `limit` are at hand."""
    if total <= limit:
        return listing(names, limit)
    return ", ".join(names[:limit]) + f" and {total - limit} more"


def node_listing(inventory: Inventory, bits: int) -> str:
    """`listing(sorted(names))` of the nodes in `bits`, without sorting them all."""
    names, total = inventory.index.smallest_names(bits, 3)
    return listed(names, total)


def first_offers(inventory: Inventory, resource: str, count: int) -> list[Offer]:
    """The offers of the first `count` nodes (in node order) that offer `resource`."""
    ri = inventory.index.resources.get(resource)
    if ri is None:
        return []
    return [inventory.index.offer(resource, i) for i in lowest(ri.bits, count)]


def untolerated_among(spec: Mapping[str, Any], inventory: Inventory, bits: int) -> list[str]:
    """The texts of the taints of the nodes in `bits` the pod does not tolerate, in the
    order a walk over those nodes (and each node's taints) would first meet them."""
    index = inventory.index
    tolerations = [as_dict(t) for t in as_list(spec.get("tolerations"))]
    seen: list[tuple[int, int, str]] = []
    for taint, nodes in index.taints.items():
        if taint.effect not in BLOCKING or any(tolerates(t, taint) for t in tolerations):
            continue
        on = as_bits(nodes) & bits
        if on:
            i = first(on)
            seen.append((i, index.node(i).taints.index(taint), taint_text(taint)))
    return list(dict.fromkeys(text for _, _, text in sorted(seen)))


# -- a nodeSelector that would keep a pod on the good nodes ----------------------------

# Labels that say most about a GPU node, tried first when suggesting a nodeSelector.
_PREFERRED_KEYS = (
    "nvidia.com/gpu.sharing-strategy",
    "nvidia.com/gpu.product",
    "nvidia.com/mig.strategy",
    # Without GFD, the clouds' own names of the GPU (webhook.core.supply.cloud_offers).
    "cloud.google.com/gke-accelerator",
    "karpenter.k8s.aws/instance-gpu-name",
)
_RANK = {k: i for i, k in enumerate(_PREFERRED_KEYS)}
_NODE_UNIQUE_KEYS = ("kubernetes.io/hostname",)
_FEW = 8  # up to this many good nodes, their own labels are counted


def _order(coverage: int, pair: tuple[str, str]) -> tuple[int, int, tuple[str, str]]:
    return (-coverage, _RANK.get(pair[0], len(_RANK)), pair)


def pinning_selector(good: Sequence[Node], bad: Sequence[Node]) -> tuple[str, str] | None:
    """The label that the most good nodes have and no bad node has: a nodeSelector fix.
    Ties go to the preferred keys, then to the smaller pair."""
    coverage = _coverage(good)
    taken = {pair for node in bad for pair in node.labels.items()}
    usable = [p for p in coverage if p not in taken]
    if not usable:
        return None
    return min(usable, key=lambda p: _order(coverage[p], p))


def _coverage(nodes: Iterable[Node]) -> Counter[tuple[str, str]]:
    return Counter(
        pair for node in nodes for pair in node.labels.items() if pair[0] not in _NODE_UNIQUE_KEYS
    )


def pin_selector(inventory: Inventory, *, good: int, bad: int) -> tuple[str, str] | None:
    """`pinning_selector` over the nodes in the bitsets `good` and `bad`, from the label
    index: per value, how many good nodes have it and whether a bad node does."""
    wanted = good.bit_count()
    if not wanted:
        return None
    # Every Pod of a workload that gets this suggestion asks it again.
    key = ("pin", _digest(_raw(good), _raw(bad)))
    found = inventory.memo(key)
    if found is None:
        index = inventory.index
        if wanted <= _FEW:
            found = (_counted_pair(index, good, bad),)
        else:
            found = (_best_pair(index, good, bad, wanted),)
        inventory.remember(key, found, 256)
    return found[0]  # type: ignore[no-any-return]


def _counted_pair(index: NodeIndex, good: int, bad: int) -> tuple[str, str] | None:
    # A few good nodes: count their own labels, best first, and take the first that
    # no bad node has.
    coverage = _coverage(index.nodes_in(good))
    for pair in sorted(coverage, key=lambda p: _order(coverage[p], p)):
        if not index.label_bits(*pair) & bad:
            return pair
    return None


def _best_pair(index: NodeIndex, good: int, bad: int, wanted: int) -> tuple[str, str] | None:
    # Keys by the most good nodes one of their values could cover; a key whose bound is
    # below the best coverage found cannot win, nor can a value with fewer nodes.
    keys = sorted(
        ((min(ki.max_size, wanted), key) for key, ki in index.labels.items()),
        reverse=True,
    )
    best: tuple[int, int, tuple[str, str]] | None = None
    floor = 1
    in_good: Membership | None = None
    in_bad: Membership | None = None
    for bound, key in keys:
        if bound < floor:
            break
        if key in _NODE_UNIQUE_KEYS:
            continue
        for value, nodes in index.labels[key].values.items():
            if isinstance(nodes, int):
                # Most values are on some bad node: that test is one AND, the count of
                # good nodes a popcount more.
                if nodes & bad:
                    continue
                covered = (nodes & good).bit_count()
            else:
                if len(nodes) < floor:
                    continue
                in_good = in_good or Membership(good)
                in_bad = in_bad or Membership(bad)
                if any(i in in_bad for i in nodes):
                    continue
                covered = in_good.count(nodes)
            if covered < floor:
                continue
            rank = _order(covered, (key, value))
            if best is None or rank < best:
                best, floor = rank, covered
    return best[2] if best is not None else None


__all__ = [
    "Candidates",
    "candidate_offers",
    "candidates",
    "first_offers",
    "listed",
    "node_listing",
    "offered",
    "pin_selector",
    "pinning_selector",
    "placement_spec",
    "rejection",
    "taint_text",
    "untolerated_among",
    "untolerated_taints",
]
