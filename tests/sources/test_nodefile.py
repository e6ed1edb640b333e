"""Inventory files: the split pretty-printed List, whole JSON and YAML agree, and every
malformed file gets the error the exact (libyaml) path words, with its line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.support.builders import EXAMPLES
from webhook.core.supply.inventory import Inventory
from webhook.errors import InventoryError
from webhook.sources.files import read_inventory
from webhook.sources.nodefile import _split_list, exact_objects

DATA = json.loads((EXAMPLES / "cluster" / "nodes.json").read_text())
EXPECTED = Inventory.from_nodes(DATA["items"])


def rows(inventory: Inventory) -> list[tuple[Any, ...]]:
    return [
        (o.resource, o.node.name, o.count, o.sharing, o.memory_mib, o.memory_source)
        for offers in inventory.offers.values()
        for o in offers
    ]


@pytest.mark.parametrize(
    ("text", "split"),
    [
        (orjson.dumps(DATA, option=orjson.OPT_INDENT_2), True),  # jq, orjson
        (json.dumps(DATA, indent=4).encode(), True),  # kubectl
        (b"\xef\xbb\xbf" + json.dumps(DATA, indent=4).encode(), True),  # a BOM
        (json.dumps({**DATA, "kind": "NodeList"}, indent=3).encode(), True),
        (json.dumps(DATA).encode(), False),  # compact: parsed whole
        (json.dumps(DATA, indent=4).replace("\n", "\r\n").encode(), False),  # CRLF
        (yaml.safe_dump(DATA).encode(), False),
    ],
)
def test_layouts_read_alike(tmp_path: Path, text: bytes, split: bool) -> None:
    path = tmp_path / "nodes.json"
    path.write_bytes(text)
    if text.startswith(b"{") or text.startswith(b"\xef"):
        assert (_split_list(text.removeprefix(b"\xef\xbb\xbf")) is not None) is split
    assert rows(read_inventory(str(path))) == rows(EXPECTED)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        # The kind is judged before any item, as the exact path does.
        (
            json.dumps(
                {"apiVersion": "v1", "items": [{"kind": "Pod"}], "kind": "PodList"}, indent=4
            ),
            r"^{f}: expected kind List or NodeList \(as `kubectl get nodes -o json` writes\), "
            r"got kind 'PodList'$",
        ),
        (
            json.dumps([{"kind": "Node", "metadata": {"name": "a"}}], indent=4),
            r"^{f}: expected a List of Nodes, got list$",
        ),
        (
            json.dumps({"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "a"}}, 7]}),
            r"^{f}: item 1 is not a Node \(kind None\)$",
        ),
        (
            json.dumps({"kind": "List", "items": [{"kind": "Node", "metadata": {}}]}, indent=4),
            r"^{f}: item 0: a Node without metadata.name$",
        ),
        (
            json.dumps({"kind": "List", "items": []})
            + "\n"
            + json.dumps({"kind": "List", "items": []}),
            r"^{f}:2: invalid YAML: did not find expected <document start>$",  # as before
        ),
        # Broken inside the second item of a split List: libyaml finds the line.
        (
            json.dumps(
                {"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "a"}}, {"x": 1}]},
                indent=4,
            ).replace('"x": 1', '"x": 1,,'),
            r"^{f}:11: invalid YAML: did not find expected node content$",
        ),
        # A second `items` key: the exact parser's reading (the last one) wins.
        (
            '{\n    "kind": "List",\n    "items": [\n        {\n            "kind": "Node",\n'
            '            "metadata": {"name": "a"}\n        }\n    ],\n    "items": 5\n}\n',
            r"^{f}: `items` must be a list of Nodes$",
        ),
    ],
)
def test_malformed_json_inventories(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "nodes.json"
    path.write_text(text)
    pattern = error.replace("{f}", str(path).replace(".", r"\."))
    with pytest.raises(InventoryError, match=pattern):
        read_inventory(str(path))
    with pytest.raises(InventoryError, match=pattern):
        read_inventory_exactly(path)


def read_inventory_exactly(path: Path) -> Inventory:
    try:
        return Inventory.from_nodes(exact_objects(path.read_bytes(), source=str(path)))
    except InventoryError as exc:
        if str(exc).startswith(str(path)):
            raise
        raise InventoryError(f"{path}: {exc}") from None


def test_a_yaml_flow_mapping_is_yaml(tmp_path: Path) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text("{kind: List, items: [{kind: Node, metadata: {name: a}}]}\n")
    assert [n.name for n in read_inventory(str(path)).nodes] == ["a"]


def test_duplicate_node_names(tmp_path: Path) -> None:
    path = tmp_path / "nodes.json"
    items = [{"kind": "Node", "metadata": {"name": n}} for n in ("a", "b", "a")]
    path.write_text(json.dumps({"kind": "List", "items": items}, indent=2))
    with pytest.raises(
        InventoryError, match=r"nodes\.json: item 2: a second Node named a \(item 0\)$"
    ):
        read_inventory(str(path))
