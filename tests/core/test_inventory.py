"""Inventory: GPU offers per node from allocatable and GPU Feature Discovery labels."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.builders import EXAMPLES, GPU_TAINT, node
from webhook.core.supply.inventory import Inventory, Taint, nodes_from_document
from webhook.errors import InventoryError
from webhook.sources.files import read_inventory

NODES_JSON = EXAMPLES / "cluster" / "nodes.json"


def offer_rows(inventory: Inventory) -> list[tuple[Any, ...]]:
    return [
        (o.resource, o.node.name, o.count, o.sharing, o.replicas, o.memory_mib, o.memory_source)
        for offers in inventory.offers.values()
        for o in offers
    ]


def test_example_cluster_offers() -> None:
    inventory = read_inventory(str(NODES_JSON))
    assert [n.name for n in inventory.nodes] == [
        "gpu-a100-mig-0",
        "gpu-h100-0",
        "gpu-h100-1",
        "gpu-a10g-ts-0",
        "gpu-t4-legacy-0",
        "cpu-0",
    ]
    gfd = "label nvidia.com/gpu.memory"
    assert offer_rows(inventory) == [
        ("nvidia.com/gpu", "gpu-h100-0", 8, "exclusive", 1, 81559, gfd),
        ("nvidia.com/gpu", "gpu-h100-1", 8, "exclusive", 1, 81559, gfd),
        ("nvidia.com/gpu", "gpu-a10g-ts-0", 16, "time-slicing", 4, 23028, gfd),
        ("nvidia.com/gpu", "gpu-t4-legacy-0", 1, "exclusive", 1, None, "no memory label"),
        (
            "nvidia.com/mig-1g.10gb",
            "gpu-a100-mig-0",
            14,
            "mig",
            1,
            9856,
            "label nvidia.com/mig-1g.10gb.memory",
        ),
        # No GFD memory label for this profile on the node: the catalog fills it in.
        (
            "nvidia.com/mig-2g.20gb",
            "gpu-a100-mig-0",
            6,
            "mig",
            1,
            19968,
            "catalog value for A100 80GB",
        ),
        (
            "nvidia.com/mig-3g.40gb",
            "gpu-a100-mig-0",
            4,
            "mig",
            1,
            40192,
            "label nvidia.com/mig-3g.40gb.memory",
        ),
        (
            "nvidia.com/mig-7g.80gb",
            "gpu-a100-mig-0",
            2,
            "mig",
            1,
            80384,
            "label nvidia.com/mig-7g.80gb.memory",
        ),
        ("vpc.amazonaws.com/efa", "gpu-h100-0", 32, "exclusive", 1, None, "no memory label"),
        ("vpc.amazonaws.com/efa", "gpu-h100-1", 32, "exclusive", 1, None, "no memory label"),
    ]
    h100 = inventory.offers["nvidia.com/gpu"][0].node
    assert h100.taints == (Taint("nvidia.com/gpu", "present", "NoSchedule"),)
    assert "cpu" not in h100.allocatable  # only extended resources are kept
    # "nvidia.com/gpu": "0" on the MIG node is not an offer.
    assert inventory.nodes[0].allocatable.get("nvidia.com/gpu") is None
    assert inventory.advertised == tuple(inventory.offers)


def test_time_sliced_replica_share() -> None:
    inventory = read_inventory(str(NODES_JSON))
    shares = {o.node.name: o.share_mib for o in inventory.offers["nvidia.com/gpu"]}
    assert shares == {
        "gpu-h100-0": 81559,
        "gpu-h100-1": 81559,
        "gpu-a10g-ts-0": Fraction(23028, 4),  # 5757 MiB per replica
        "gpu-t4-legacy-0": None,
    }


def one_offer(labels: dict[str, str], resource: str, count: str = "4") -> tuple[Any, ...]:
    inventory = Inventory.from_nodes([node("n", labels=labels, allocatable={resource: count})])
    (o,) = inventory.offers[resource]
    return (o.sharing, o.replicas, o.memory_mib, o.memory_source, o.share_mib)


A100_40 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}


@pytest.mark.parametrize(
    ("labels", "resource", "expected"),
    [
        # Whole GPUs, exclusive.
        (
            {"nvidia.com/gpu.memory": "81559"},
            "nvidia.com/gpu",
            ("exclusive", 1, 81559, "label nvidia.com/gpu.memory", 81559),
        ),
        ({}, "nvidia.com/gpu", ("exclusive", 1, None, "no memory label", None)),
        (
            {"nvidia.com/gpu.memory": "lots"},
            "nvidia.com/gpu",
            ("exclusive", 1, None, "no memory label", None),
        ),
        # Time-slicing and MPS: a replica counts on memory / replicas.
        (
            {
                "nvidia.com/gpu.memory": "24576",
                "nvidia.com/gpu.sharing-strategy": "time-slicing",
                "nvidia.com/gpu.replicas": "4",
            },
            "nvidia.com/gpu",
            ("time-slicing", 4, 24576, "label nvidia.com/gpu.memory", 6144),
        ),
        (
            {
                "nvidia.com/gpu.memory": "24576",
                "nvidia.com/gpu.sharing-strategy": "mps",
                "nvidia.com/gpu.replicas": "3",
            },
            "nvidia.com/gpu",
            ("mps", 3, 24576, "label nvidia.com/gpu.memory", 8192),
        ),
        # renameByDefault: the .shared name alone says it is shared.
        (
            {"nvidia.com/gpu.memory": "24576", "nvidia.com/gpu.replicas": "2"},
            "nvidia.com/gpu.shared",
            ("time-slicing", 2, 24576, "label nvidia.com/gpu.memory", 12288),
        ),
        # Older GFD: replicas and a -SHARED product suffix, no sharing-strategy label.
        (
            {
                "nvidia.com/gpu.memory": "24576",
                "nvidia.com/gpu.replicas": "8",
                "nvidia.com/gpu.product": "NVIDIA-L4-SHARED",
            },
            "nvidia.com/gpu",
            ("time-slicing", 8, 24576, "label nvidia.com/gpu.memory", 3072),
        ),
        # MIG single strategy: nvidia.com/gpu is a slice named in the product suffix.
        (
            {
                "nvidia.com/mig.strategy": "single",
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
            },
            "nvidia.com/gpu",
            ("mig", 1, 4864, "catalog value for A100 40GB", 4864),
        ),
        (
            {
                "nvidia.com/mig.strategy": "single",
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
                "nvidia.com/gpu.memory": "4864",
            },
            "nvidia.com/gpu",
            ("mig", 1, 4864, "label nvidia.com/gpu.memory", 4864),
        ),
        (
            {
                "nvidia.com/mig.strategy": "single",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb-SHARED",
                "nvidia.com/gpu.replicas": "2",
            },
            "nvidia.com/gpu",
            ("time-slicing", 2, 40448, "catalog value for H100 80GB", 20224),
        ),
        # MIG mixed strategy: one resource per profile, per-profile labels.
        (
            {**A100_40, "nvidia.com/mig-1g.10gb.memory": "9728"},
            "nvidia.com/mig-1g.10gb",
            ("mig", 1, 9728, "label nvidia.com/mig-1g.10gb.memory", 9728),
        ),
        (
            A100_40,
            "nvidia.com/mig-3g.20gb",
            ("mig", 1, 19968, "catalog value for A100 40GB", 19968),
        ),
        (
            {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "nvidia.com/mig-1g.10gb",
            ("mig", 1, 9984, "catalog value for H100 80GB", 9984),
        ),
        # Measured (nvidia-smi mig -lgip, cited in mig_catalog): below the nominal size.
        (
            {"nvidia.com/gpu.product": "NVIDIA-H200"},
            "nvidia.com/mig-1g.18gb",
            ("mig", 1, 16384, "catalog value for H200 141GB", 16384),
        ),
        (
            {"nvidia.com/gpu.product": "NVIDIA-H100-NVL"},
            "nvidia.com/mig-1g.12gb",
            ("mig", 1, 11008, "catalog value for H100 NVL 94GB", 11008),
        ),
        (
            {"nvidia.com/gpu.product": "NVIDIA-B200"},
            "nvidia.com/mig-1g.23gb",
            ("mig", 1, 20992, "catalog value for B200 180GB", 20992),
        ),
        (
            {"nvidia.com/gpu.product": "NVIDIA-GB200"},
            "nvidia.com/mig-1g.24gb",
            ("mig", 1, 20480, "catalog value for GB200 186GB", 20480),
        ),
        (
            {"nvidia.com/gpu.product": "NVIDIA-GH200-144G-HBM3e"},
            "nvidia.com/mig-1g.18gb",
            ("mig", 1, 17920, "catalog value for GH200 144GB", 17920),
        ),
        (
            {"nvidia.com/gpu.product": "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"},
            "nvidia.com/mig-1g.24gb",
            ("mig", 1, 23674, "catalog value for RTX PRO 6000 96GB", 23674),
        ),
        # No measurement published: nominal scaled by a measured sibling's ratio, said so.
        (
            {"nvidia.com/gpu.product": "NVIDIA-GH200-480GB"},
            "nvidia.com/mig-1g.12gb",
            ("mig", 1, 11008, "conservative estimate for H100 96GB", 11008),
        ),
        (
            {"nvidia.com/gpu.product": "NVIDIA-H20"},
            "nvidia.com/mig-3g.48gb",
            ("mig", 1, 44032, "conservative estimate for H20 96GB", 44032),
        ),
        (
            {"nvidia.com/gpu.product": "NVIDIA-H200"},
            "nvidia.com/mig-1g.18gb",
            ("mig", 1, 16384, "catalog value for H200 141GB", 16384),
        ),
        (
            {"nvidia.com/gpu.product": "NVIDIA-B200"},
            "nvidia.com/mig-7g.180gb",
            ("mig", 1, 164288, "conservative estimate for B200 180GB", 164288),
        ),
        # Media-extension profile: advertised as .me, labelled with the .me prefix.
        (
            {"nvidia.com/mig-1g.10gb.me.memory": "9856"},
            "nvidia.com/mig-1g.10gb.me",
            ("mig", 1, 9856, "label nvidia.com/mig-1g.10gb.me.memory", 9856),
        ),
        # Without a product label the catalog takes the smallest size of that profile.
        (
            {},
            "nvidia.com/mig-1g.10gb",
            ("mig", 1, 9856, "smallest catalog value of this profile, A100 40GB", 9856),
        ),
        # A product the catalog does not know: the smallest size of the profile, named.
        (
            {"nvidia.com/gpu.product": "NVIDIA-A800-SXM4-80GB"},
            "nvidia.com/mig-1g.10gb",
            (
                "mig",
                1,
                9856,
                "smallest catalog value of this profile, A100 40GB; GPU model "
                "NVIDIA-A800-SXM4-80GB is not in the catalog",
                9856,
            ),
        ),
        # A profile the catalog does not know.
        (A100_40, "nvidia.com/mig-9g.99gb", ("mig", 1, None, "no memory label", None)),
        # Time-sliced MIG slices.
        (
            {
                **A100_40,
                "nvidia.com/mig-3g.20gb.replicas": "2",
                "nvidia.com/mig-3g.20gb.sharing-strategy": "time-slicing",
            },
            "nvidia.com/mig-3g.20gb",
            ("time-slicing", 2, 19968, "catalog value for A100 40GB", 9984),
        ),
        (
            {
                **A100_40,
                "nvidia.com/mig-1g.5gb.memory": "4864",
                "nvidia.com/mig-1g.5gb.replicas": "2",
            },
            "nvidia.com/mig-1g.5gb.shared",
            ("time-slicing", 2, 4864, "label nvidia.com/mig-1g.5gb.memory", 2432),
        ),
        # Not a GPU: offered, but nothing known about memory.
        ({}, "amd.com/gpu", ("exclusive", 1, None, "no memory label", None)),
    ],
)
def test_offer_from_labels(
    labels: dict[str, str], resource: str, expected: tuple[Any, ...]
) -> None:
    assert one_offer(labels, resource) == expected


def test_unknown_inventory() -> None:
    inventory = Inventory.unknown()
    assert (inventory.known, inventory.nodes, dict(inventory.offers)) == (False, (), {})
    assert read_inventory(None) == inventory
    assert Inventory.from_nodes([]).known  # an empty cluster is known, and offers nothing


def test_list_nodelist_single_node_and_yaml(tmp_path: Path) -> None:
    data = json.loads(NODES_JSON.read_text())
    expected = offer_rows(read_inventory(str(NODES_JSON)))
    variants = {
        "nodelist.json": json.dumps({**data, "kind": "NodeList"}),
        "nodes.yaml": yaml.safe_dump(data),  # kubectl get nodes -o yaml
        "nodelist.yml": yaml.safe_dump({**data, "kind": "NodeList"}),
    }
    for name, text in variants.items():
        (tmp_path / name).write_text(text)
        assert offer_rows(read_inventory(str(tmp_path / name))) == expected, name
    (tmp_path / "one.yaml").write_text(yaml.safe_dump(data["items"][1]))
    assert [n.name for n in read_inventory(str(tmp_path / "one.yaml")).nodes] == ["gpu-h100-0"]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", r"^{f}: expected one List of Nodes, found 0 documents$"),
        (
            "kind: List\nitems: []\n---\nkind: List\nitems: []\n",
            r"^{f}: expected one List of Nodes, found 2 documents$",
        ),
        ("- a\n- b\n", r"^{f}: expected a List of Nodes, got list$"),
        (
            "kind: PodList\nitems: []\n",
            r"^{f}: expected kind List or NodeList "
            r"\(as `kubectl get nodes -o json` writes\), got kind 'PodList'$",
        ),
        ("apiVersion: v1\nitems: []\n", r"^{f}: expected kind List or NodeList .*got kind None$"),
        ("kind: List\nitems: {}\n", r"^{f}: `items` must be a list of Nodes$"),
        (
            "kind: List\nitems: [{kind: Pod, metadata: {name: p}}]\n",
            r"^{f}: item 0 is not a Node \(kind 'Pod'\)$",
        ),
        (
            "kind: List\nitems: [{kind: Node, metadata: {name: a}}, 7]\n",
            r"^{f}: item 1 is not a Node \(kind None\)$",
        ),
        (
            "kind: List\nitems: [{kind: Node, metadata: {}}]\n",
            r"^{f}: item 0: a Node without metadata.name$",
        ),
        (
            "kind: List\nitems:\n- kind: Node\n  metadata: {name: n1}\n"
            "  status:\n    allocatable: {nvidia.com/gpu: eight}\n",
            r"^{f}: node n1: status.allocatable\['nvidia.com/gpu'\] = 'eight' is not a quantity$",
        ),
        ("kind: List\nitems: [\n", r"^{f}:3: invalid YAML: did not find expected node content$"),
    ],
)
def test_malformed_inventory(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text(text)
    with pytest.raises(InventoryError, match=error.replace("{f}", str(path).replace(".", r"\."))):
        read_inventory(str(path))


def test_missing_inventory_file(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match=r"nope\.json: no such file or directory$"):
        read_inventory(str(tmp_path / "nope.json"))


def test_nodes_from_document_accepts_one_node() -> None:
    h100 = node("h", taints=[GPU_TAINT])
    assert nodes_from_document(h100, source="x") == [h100]


def test_an_inventory_error_is_bounded_whatever_the_node_holds(tmp_path: Path) -> None:
    huge = "9" * 100_000 + "x"
    path = tmp_path / "nodes.json"
    path.write_text(
        '{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "n1"}, '
        f'"status": {{"allocatable": {{"nvidia.com/gpu": "{huge}"}}}}}}]}}'
    )
    with pytest.raises(InventoryError) as error:
        read_inventory(str(path))
    message = str(error.value)
    assert message.startswith(f"{path}: node n1: status.allocatable['nvidia.com/gpu'] = '999")
    assert message.endswith("is not a quantity") and len(message) < 300
