"""sources.jsonstream and sources.dumps: every shape kubectl and friends write, streamed."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.errors import ManifestError
from webhook.sources.dumps import read_dump
from webhook.sources.jsonstream import JsonStream

OBJECTS = [
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p{i}",
            # JSON inside a string, with brackets and a newline escape: must not confuse us
            "annotations": {"last-applied": '{"a": [1, {"b": "}"}]}\n}', "empty": ""},
        },
        "spec": {"containers": [{"name": "c", "args": [], "env": {}}], "count": 12345678901234},
    }
    for i in range(7)
]
LIST = {"apiVersion": "v1", "items": OBJECTS, "kind": "List", "metadata": {"resourceVersion": ""}}


def values(text: str, chunk: int = 1 << 20) -> list[Any]:
    return [item.value for item in JsonStream(io.StringIO(text), source="f", chunk=chunk).items()]


SHAPES = {
    "kubectl -o json (4-space List)": json.dumps(LIST, indent=4),
    "jq (2-space List)": json.dumps(LIST, indent=2),
    "compact List": json.dumps(LIST),
    "NDJSON": "".join(json.dumps(o) + "\n" for o in OBJECTS),
    "NDJSON with CRLF and blank lines": "\r\n\r\n".join(json.dumps(o) for o in OBJECTS),
    "pretty values one after another": "".join(json.dumps(o, indent=4) for o in OBJECTS),
    "array of objects": json.dumps(OBJECTS, indent=1),
    "List with one compact item per line": '{"kind": "List", "items": [\n'
    + ",\n".join(json.dumps(o) for o in OBJECTS)
    + "\n]}",
    "tabs": json.dumps(LIST, indent="\t"),
}


@pytest.mark.parametrize("chunk", [5, 97, 1 << 20])
@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_gives_every_object(shape: str, chunk: int) -> None:
    assert values(SHAPES[shape], chunk) == OBJECTS


def test_a_single_object_is_itself() -> None:
    assert values(json.dumps(OBJECTS[0], indent=4)) == [OBJECTS[0]]


def test_lines_point_at_each_item() -> None:
    text = json.dumps(LIST, indent=4)
    items = list(JsonStream(io.StringIO(text), source="f", chunk=64).items())

    lines = text.split("\n")
    assert [lines[i.line - 1].strip() for i in items] == ["{"] * 7
    assert items[0].line == 4


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"kind": "List", "items": [\n{"a": 1},\n]}', "f:3: invalid JSON: Expecting value"),
        ('{"a":', "f:1: invalid JSON: unexpected end of input, expected a value"),
        ("[1, 2", "f:1: invalid JSON: unexpected end of input, expected one of ',]'"),
        ('{"a": 1}}', "f:1: invalid JSON: expected an object or an array, found '}'"),
        ('\n\n{"items": [\n{"a": tru}]}', "f:4: invalid JSON: Expecting value"),
    ],
)
def test_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(ManifestError) as err:
        values(text, chunk=4)
    assert str(err.value) == message


# orjson reads integers past 64 bits as floats; Kubernetes objects never hold such numbers.
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
json_values = st.recursive(
    st.none() | st.booleans() | INT64 | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(
    items=st.lists(st.dictionaries(st.text(max_size=5), json_values, max_size=5), max_size=6),
    indent=st.sampled_from([None, 0, 1, 2, 4, "\t"]),
    chunk=st.integers(min_value=1, max_value=64),
)
def test_any_list_streams_like_a_whole_parse(
    items: list[dict[str, Any]], indent: int | str | None, chunk: int
) -> None:
    text = json.dumps({"apiVersion": "v1", "items": items, "kind": "List"}, indent=indent)

    assert values(text, chunk) == items


# -- files: format by content ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("list.json", json.dumps(LIST, indent=4)),
        ("list.yaml", yaml.safe_dump(LIST)),
        ("multi.yaml", yaml.safe_dump_all(OBJECTS)),
        ("dump.ndjson", "".join(json.dumps(o) + "\n" for o in OBJECTS)),
        ("no-suffix", json.dumps(LIST)),
        ("list-of-lists.yaml", yaml.safe_dump_all([LIST, {"kind": "List", "items": []}])),
    ],
)
def test_read_dump_by_content(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)

    assert [item.value for item in read_dump(str(path))] == OBJECTS


def test_yaml_items_have_their_lines(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text(yaml.safe_dump(LIST))
    lines = path.read_text().split("\n")

    items = list(read_dump(str(path)))

    assert [lines[i.line - 1] for i in items] == ["- apiVersion: v1"] * 7


def test_read_dump_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("items:\n- a: [1,\n")
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"a": "\xe9"}')

    with pytest.raises(ManifestError, match=r"broken.yaml:3: invalid YAML"):
        list(read_dump(str(broken)))
    with pytest.raises(ManifestError, match=r"latin.json: not UTF-8 text"):
        list(read_dump(str(latin)))
    with pytest.raises(ManifestError, match=r"missing.json: no such file"):
        list(read_dump(str(tmp_path / "missing.json")))


def test_yaml_is_parsed_by_libyaml() -> None:
    from webhook.sources import yamlstream

    # The pure-Python parser is about 30 times slower on a big dump.
    assert yamlstream._Parser.__module__ == "yaml._yaml"
