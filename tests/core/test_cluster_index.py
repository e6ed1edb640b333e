"""The indexed inventory against plain per-node references, on random small clusters.

Every answer the checks get from the indexes (candidates, their shapes and largest
offer, node listings, pin suggestions, the taints to tolerate) is compared with the
obvious walk over the nodes that the code did before the indexes; and an inventory
made by a random sequence of Node watch events with the one built from scratch.
Each property runs twice: with the real dense/sparse threshold (every set an int on a
small cluster) and with sets under three ids kept as frozensets.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.core.kit.idsets import bits_of
from webhook.core.kit.memo import Memo
from webhook.core.kit.text import listing
from webhook.core.supply import nodeindex
from webhook.core.supply.inventory import Inventory, Node, parse_node
from webhook.core.supply.scheduling import (
    candidates,
    listed,
    node_listing,
    pin_selector,
    pinning_selector,
    rejection,
    taint_text,
    untolerated_among,
    untolerated_taints,
)
from webhook.core.workloads.targets import pod_views

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RESOURCES = ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb")
KEYS = ("zone", "pool", "gpu.count", "nvidia.com/gpu.product", "nvidia.com/gpu.replicas")
VALUES = ("a", "b", "1", "2", "8", "-3", "x y", "")

label_maps = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=4)
taint = st.fixed_dictionaries(
    {
        "key": st.sampled_from(("nvidia.com/gpu", "dedicated", "zone")),
        "value": st.sampled_from(("present", "a", "")),
        "effect": st.sampled_from(("NoSchedule", "NoExecute", "PreferNoSchedule")),
    }
)
allocatable = st.dictionaries(
    st.sampled_from(RESOURCES), st.sampled_from(("0", "1", "2", "8", "16")), max_size=2
)


def node_obj(name: str, labels: dict[str, str], taints: list[Any], alloc: dict[str, str]) -> Any:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "resourceVersion": "1"},
        "spec": {"taints": taints},
        "status": {"allocatable": alloc},
    }


@st.composite
def node_objs(draw: st.DrawFn, name: str) -> Any:
    return node_obj(
        name,
        draw(label_maps),
        draw(st.lists(taint, max_size=2)),
        draw(allocatable),
    )


@st.composite
def clusters(draw: st.DrawFn) -> list[Any]:
    names = draw(st.lists(st.sampled_from([f"n{i}" for i in range(12)]), unique=True))
    return [draw(node_objs(name)) for name in names]


values = st.lists(st.sampled_from((*VALUES, "7", "n1", "n3")), max_size=3)
expression = st.fixed_dictionaries(
    {
        "key": st.sampled_from((*KEYS, "absent")),
        "operator": st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Is")),
        "values": values,
    }
)
field = st.fixed_dictionaries(
    {
        "key": st.sampled_from(("metadata.name", "spec.unschedulable")),
        "operator": st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist", "Gt")),
        "values": values,
    }
)
term = st.fixed_dictionaries(
    {},
    optional={
        "matchExpressions": st.lists(expression, max_size=3),
        "matchFields": st.lists(field, max_size=2),
    },
)
toleration = st.fixed_dictionaries(
    {},
    optional={
        "key": st.sampled_from(("nvidia.com/gpu", "dedicated", "")),
        "operator": st.sampled_from(("Exists", "Equal")),
        "value": st.sampled_from(("present", "a", "")),
        "effect": st.sampled_from(("NoSchedule", "NoExecute", "")),
    },
)
specs = st.fixed_dictionaries(
    {},
    optional={
        "nodeSelector": st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2),
        "affinity": st.builds(
            lambda terms: {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
                }
            },
            st.lists(term, max_size=3),
        ),
        "tolerations": st.lists(toleration, max_size=3),
    },
)


@contextmanager
def threshold(sparse_below: int | None) -> Iterator[None]:
    if sparse_below is None:
        yield
        return
    with mock.patch.object(nodeindex, "dense_at", lambda n: sparse_below):
        yield


DENSITY = pytest.mark.parametrize("sparse_below", [None, 3], ids=["real", "sparse"])


def view(spec: dict[str, Any]) -> Any:
    obj = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [], **spec}}
    (pod,) = pod_views(obj) or []
    return pod


@DENSITY
@PROPERTY
@given(cluster=clusters(), spec=specs, resource=st.sampled_from(RESOURCES))
def test_candidates_are_the_nodes_rejection_lets_through(
    sparse_below: int | None, cluster: list[Any], spec: dict[str, Any], resource: str
) -> None:
    with threshold(sparse_below):
        inventory = Inventory.from_nodes(cluster)
    offers = inventory.offers.get(resource, ())
    expected = [o for o in offers if rejection(spec, o.node) is None]
    found = candidates(view(spec), resource, inventory)
    assert found.offers == tuple(expected)
    if expected:
        assert found.largest() is max(expected, key=lambda o: o.count)
        for offer, bits in found.groups():
            same = [o for o in expected if o.shape == offer.shape]
            assert offer is same[0]
            assert bits == bits_of(inventory.index.ids[o.node.name] for o in same)
        names = sorted(o.node.name for o in expected)
        assert node_listing(inventory, found.bits) == listing(names)


def ids(inventory: Inventory, nodes: list[Node]) -> int:
    return bits_of(inventory.index.ids[n.name] for n in nodes)


@DENSITY
@PROPERTY
@given(cluster=clusters(), data=st.data())
def test_pin_selector_is_pinning_selector(
    sparse_below: int | None, cluster: list[Any], data: st.DataObject
) -> None:
    with threshold(sparse_below):
        inventory = Inventory.from_nodes(cluster)
    nodes = list(inventory.nodes)
    good = data.draw(
        st.lists(st.sampled_from(nodes), unique_by=lambda n: n.name) if nodes else st.just([])
    )
    rest = [n for n in nodes if n not in good]
    bad = data.draw(
        st.lists(st.sampled_from(rest), unique_by=lambda n: n.name) if rest else st.just([])
    )
    expected = pinning_selector(good, bad)
    assert pin_selector(inventory, good=ids(inventory, good), bad=ids(inventory, bad)) == expected


def many_nodes(count: int) -> list[Any]:
    return [
        node_obj(f"n{i:03d}", {"zone": "abc"[i % 3], "rack": str(i % 7)}, [], {})
        for i in range(count)
    ]


@pytest.mark.parametrize("good_count", [3, 9, 40])
def test_pin_selector_prunes_to_the_same_answer(good_count: int) -> None:
    # More good nodes than the few counted directly: the pruned search over the index.
    inventory = Inventory.from_nodes(many_nodes(60))
    nodes = list(inventory.nodes)
    for good, bad in [
        (nodes[:good_count], nodes[good_count:]),
        ([n for n in nodes if n.labels["zone"] == "a"][:good_count], nodes[-5:]),
        (nodes[::2][:good_count], nodes[1::2]),
    ]:
        bad = [n for n in bad if n not in good]
        expected = pinning_selector(good, bad)
        assert pin_selector(inventory, good=ids(inventory, good), bad=ids(inventory, bad)) == (
            expected
        )


@DENSITY
@PROPERTY
@given(cluster=clusters(), spec=specs, data=st.data())
def test_untolerated_among_walks_the_nodes_in_order(
    sparse_below: int | None, cluster: list[Any], spec: dict[str, Any], data: st.DataObject
) -> None:
    with threshold(sparse_below):
        inventory = Inventory.from_nodes(cluster)
    nodes = list(inventory.nodes)
    some = data.draw(
        st.lists(st.sampled_from(nodes), unique_by=lambda n: n.name) if nodes else st.just([])
    )
    some = [n for n in nodes if n in some]
    expected = list(dict.fromkeys(taint_text(t) for n in some for t in untolerated_taints(spec, n)))
    assert untolerated_among(spec, inventory, ids(inventory, some)) == expected


events = st.lists(
    st.tuples(st.sampled_from([f"n{i}" for i in range(8)]), st.booleans()), max_size=25
)


@DENSITY
@PROPERTY
@given(cluster=clusters(), changes=events, data=st.data(), spec=specs)
def test_watch_events_make_the_inventory_a_fresh_build_would(
    sparse_below: int | None,
    cluster: list[Any],
    changes: list[tuple[str, bool]],
    data: st.DataObject,
    spec: dict[str, Any],
) -> None:
    with threshold(sparse_below):
        inventory = Inventory.from_nodes(cluster)
        current = {n["metadata"]["name"]: n for n in cluster}  # what the watcher holds
        for name, delete in changes:
            if delete:
                current.pop(name, None)
                inventory = inventory.without_node(name)
            else:
                obj = data.draw(node_objs(name))
                current[name] = obj
                inventory = inventory.with_node(obj)
        fresh = Inventory.from_nodes(current.values())
    assert inventory == fresh
    assert dict(inventory.offers) == dict(fresh.offers)
    assert named_sets(inventory) == named_sets(fresh)
    for resource in RESOURCES:
        found = candidates(view(spec), resource, inventory)
        expected = candidates(view(spec), resource, fresh).offers
        assert [o.node.name for o in found.offers] == [o.node.name for o in expected]
        names = sorted(o.node.name for o in expected)
        assert node_listing(inventory, found.bits) == listing(names)


def named_sets(inventory: Inventory) -> dict[Any, set[str]]:
    """Every set of the index as node names (ids differ after deletes and re-adds)."""
    index = inventory.index

    def names(s: Any) -> set[str]:
        return {n.name for n in index.nodes_in(s if isinstance(s, int) else bits_of(s))}

    out: dict[Any, set[str]] = {("all",): names(index.all)}
    for key, ki in index.labels.items():
        out[("key", key)] = names(ki.present)
        out.update({("label", key, v): names(s) for v, s in ki.values.items()})
    out.update({("taint", t): names(s) for t, s in index.taints.items()})
    for r, ri in index.resources.items():
        out[("offers", r)] = names(ri.bits)
        out.update({("shape", r, shape): names(s) for shape, s in ri.shapes.items()})
        out.update({("count", r, c): names(s) for c, s in ri.counts.items()})
    return out


def test_a_change_nobody_reads_keeps_the_inventory() -> None:
    obj = node_obj("n1", {"zone": "a"}, [], {"nvidia.com/gpu": "8"})
    inventory = Inventory.from_nodes([obj])
    beat = {
        **obj,
        "metadata": {
            **obj["metadata"],
            "resourceVersion": "2",
            "labels": {"zone": "a", "nvidia.com/gfd.timestamp": "1749717600"},
            "managedFields": [{"manager": "kubelet"}],
        },
        "status": {**obj["status"], "conditions": [{"type": "Ready", "status": "True"}]},
    }
    assert inventory.with_node(beat) is inventory
    assert inventory.without_node("absent") is inventory
    relabelled = inventory.with_node({**obj, "metadata": {"name": "n1", "labels": {"zone": "b"}}})
    assert relabelled is not inventory
    assert relabelled.nodes[0].labels == {"zone": "b"}
    assert inventory.nodes[0].labels == {"zone": "a"}  # the old snapshot is untouched


def test_a_changed_node_keeps_its_place_and_a_new_one_goes_last() -> None:
    inventory = Inventory.from_nodes(
        [node_obj(n, {}, [], {"nvidia.com/gpu": "1"}) for n in ("b", "a", "c")]
    )
    inventory = inventory.with_node(node_obj("a", {}, [], {"nvidia.com/gpu": "2"}))
    inventory = inventory.with_node(node_obj("0", {}, [], {"nvidia.com/gpu": "1"}))
    inventory = inventory.without_node("b")
    assert [n.name for n in inventory.nodes] == ["a", "c", "0"]
    assert [o.count for o in inventory.offers["nvidia.com/gpu"]] == [2, 1, 1]


def test_parsed_nodes_drop_only_volatile_labels() -> None:
    labels = {"nvidia.com/gfd.timestamp": "1", "nvidia.com/gpu.product": "NVIDIA-H100"}
    assert parse_node(node_obj("n", labels, [], {})).labels == {
        "nvidia.com/gpu.product": "NVIDIA-H100"
    }


def test_the_memo_is_bounded_in_bytes_oldest_out_first() -> None:
    memo = Memo(max_bytes=1000)
    for i in range(10):
        memo.put(i, str(i), 300)
    assert (len(memo), memo.nbytes, memo.get(9), memo.get(6)) == (3, 900, "9", None)
    memo.put("big", "x", 2000)  # more than the bound: not kept, nothing pushed out
    assert (memo.get("big"), len(memo)) == (None, 3)
    memo.put(9, "nine", 100)  # a new value frees the old one's weight
    assert (memo.nbytes, memo.get(9)) == (700, "nine")


@pytest.mark.parametrize("total", [0, 1, 3, 4, 50])
def test_listed_words_what_listing_would(total: int) -> None:
    names = [f"n{i:02d}" for i in range(total)]
    assert listed(names[:3], total) == listing(names)


def test_churn_renumbers_the_nodes_instead_of_growing_the_sets() -> None:
    inventory = Inventory.from_nodes([node_obj("keep", {"zone": "a"}, [], {"nvidia.com/gpu": "1"})])
    for i in range(3000):  # autoscaling: a node comes and goes, ids are not reused
        inventory = inventory.with_node(node_obj(f"n{i}", {"zone": "a"}, [], {}))
        inventory = inventory.without_node(f"n{i - 1}")
    assert inventory.index.next_id <= 2 * inventory.node_count + 1024
    assert [n.name for n in inventory.nodes] == ["keep", "n2999"]
    assert inventory.index.label_bits("zone", "a").bit_length() <= inventory.index.next_id
    found = candidates(view({}), "nvidia.com/gpu", inventory)
    assert [o.node.name for o in found.offers] == ["keep"]
