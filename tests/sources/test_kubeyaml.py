"""YAML read as Kubernetes reads it: each scalar form against go-yaml v2 and sigs.k8s.io/yaml.

Expected values are the upstream tests' own constants where they have one:
go.yaml.in/yaml/v2 v2.4.4 (commit 43b627a9da72517e91dbcf07cd10dfd6618423d8)
`decode_test.go` `unmarshalTests` (the rows that decode into interface{}) and
`unmarshalErrorTests`, and sigs.k8s.io/yaml v1.6.0 (commit
048d724aca2d37ddb5b03c90b5b4550a3a48766d) `yaml_test.go` `TestYAMLToJSON`. The rest
follow `resolve.go` `resolve` line by line (docs/yaml.md). Values are what the JSON
says: a whole float is an int (`6.8523e+5` is 685230).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.paths import ROOT
from webhook.errors import ManifestError
from webhook.sources.yamlsource import iter_documents

GOYAML = "go-yaml v2 decode_test.go"
SIGS = "sigs.k8s.io/yaml yaml_test.go TestYAMLToJSON"
RESOLVE = "go-yaml v2 resolve.go"

# (document, what the JSON holds, where the expectation comes from)
TABLE: list[tuple[str, Any, str]] = [
    ("v: true", {"v": True}, GOYAML),
    ("v: 10", {"v": 10}, GOYAML),
    ("v: 0b10", {"v": 2}, GOYAML),
    ("v: 0xA", {"v": 10}, GOYAML),
    ("v: 0.1", {"v": 0.1}, GOYAML),
    ("v: .1", {"v": 0.1}, GOYAML),
    ("v: -10", {"v": -10}, GOYAML),
    ("v: -.1", {"v": -0.1}, GOYAML),
    ("canonical: 6.8523e+5", {"canonical": 685230}, GOYAML),
    ("expo: 685.230_15e+03", {"expo": 685230.15}, GOYAML),
    ("fixed: 685_230.15", {"fixed": 685230.15}, GOYAML),
    ("canonical: y", {"canonical": True}, GOYAML),
    ("answer: NO", {"answer": False}, GOYAML),
    ("logical: True", {"logical": True}, GOYAML),
    ("option: on", {"option": True}, GOYAML),
    ("canonical: 685230", {"canonical": 685230}, GOYAML),
    ("decimal: +685_230", {"decimal": 685230}, GOYAML),
    ("octal: 02472256", {"octal": 685230}, GOYAML),
    ("hexa: 0x_0A_74_AE", {"hexa": 685230}, GOYAML),
    ("bin: 0b1010_0111_0100_1010_1110", {"bin": 685230}, GOYAML),
    ("bin: -0b101010", {"bin": -42}, GOYAML),
    ("bin: -0b1" + "0" * 63, {"bin": -9223372036854775808}, GOYAML),
    ("empty:", {"empty": None}, GOYAML),
    ("canonical: ~", {"canonical": None}, GOYAML),
    ("english: null", {"english": None}, GOYAML),
    ("seq: [A,1,C]", {"seq": ["A", 1, "C"]}, GOYAML),
    ("'1': '\"2\"'", {"1": '"2"'}, GOYAML),
    ("v: !!float '1.1'", {"v": 1.1}, GOYAML),
    ("v: !!float 0", {"v": 0}, GOYAML),
    ("v: !!float -1", {"v": -1}, GOYAML),
    ("v: !!null ''", {"v": None}, GOYAML),
    ("%TAG !y! tag:yaml.org,2002:\n---\nv: !y!int '1'", {"v": 1}, GOYAML),
    ("v: ! test", {"v": "test"}, GOYAML),
    ("a: -b_c", {"a": "-b_c"}, GOYAML),
    ("a: +b_c", {"a": "+b_c"}, GOYAML),
    ("a: 50cent_of_dollar", {"a": "50cent_of_dollar"}, GOYAML),
    ("a: 1:1", {"a": "1:1"}, GOYAML),  # "Base 60 floats are obsolete and unsupported"
    ("a: 2015-01-01", {"a": "2015-01-01"}, GOYAML),  # a timestamp into interface{}
    ('a: !!timestamp "2015-01-01"', {"a": "2015-01-01"}, GOYAML),
    ("a: !!str 2015-01-01", {"a": "2015-01-01"}, GOYAML),
    ("a: 123456e1", {"a": 1234560}, GOYAML),
    ("a: 123456E1", {"a": 1234560}, GOYAML),
    ("t: no", {"t": False}, SIGS),
    ("t: 9007199254740993", {"t": 9007199254740993}, SIGS),
    ("t: 1000000000000000000000000000000000000", {"t": 1e36}, SIGS),
    ("t: ", {"t": None}, SIGS),
    ("True: a", {"true": "a"}, SIGS),
    ("no: a", {"false": "a"}, SIGS),
    ("1: a", {"1": "a"}, SIGS),
    ("1.2: a", {"1.2": "a"}, SIGS),
    ("1000000000000000000000000000000000000: a", {"1e+36": "a"}, SIGS),
    ("1e+36: a", {"1e+36": "a"}, SIGS),
    ('"1e+36": a', {"1e+36": "a"}, SIGS),
    ("a: !!binary gIGC", {"a": "\ufffd\ufffd\ufffd"}, SIGS),
    # resolve.go, read line by line
    ("v: Y", {"v": True}, RESOLVE),
    ("v: n", {"v": False}, RESOLVE),
    ("v: OFF", {"v": False}, RESOLVE),
    ("v: yES", {"v": "yES"}, RESOLVE),  # only the table's spellings
    ("v: 0o17", {"v": 15}, RESOLVE),  # ParseInt(s, 0, 64) reads 0o
    ("v: 0O17", {"v": 15}, RESOLVE),
    ("v: 0777", {"v": 511}, RESOLVE),
    ("v: 0X1f", {"v": 31}, RESOLVE),
    ("v: 09", {"v": 9}, RESOLVE),  # not octal, not int: yamlStyleFloat, 9.0
    ("v: 08.5", {"v": 8.5}, RESOLVE),
    ("v: 1e3", {"v": 1000}, RESOLVE),
    ("v: 1.5e-3", {"v": 0.0015}, RESOLVE),
    ("v: 1:20", {"v": "1:20"}, RESOLVE),
    ("v: 1:20.5", {"v": "1:20.5"}, RESOLVE),
    ("v: 18446744073709551615", {"v": 18446744073709551615}, RESOLVE),  # uint64
    ("v: 0x1ffffffffffffffff", {"v": "0x1ffffffffffffffff"}, RESOLVE),  # past uint64
    ("v: 1e400", {"v": "1e400"}, RESOLVE),  # ParseFloat: ErrRange
    ("v: 1" + "0" * 5000, {"v": "1" + "0" * 5000}, RESOLVE),
    ("v: .5_0", {"v": 0.5}, RESOLVE),  # ParseFloat's underscores between digits
    ("v: ._5", {"v": "._5"}, RESOLVE),
    ("v: +.inf_", {"v": "+.inf_"}, RESOLVE),
    ("v: =", {"v": "="}, RESOLVE),
    ("v: <<", {"v": "<<"}, RESOLVE),
    ("v: 2001-02-30", {"v": "2001-02-30"}, RESOLVE),
    ("v: 2001-12-14 21:59:43.10 -5", {"v": "2001-12-14 21:59:43.10 -5"}, RESOLVE),
    ("v: !foo y", {"v": "y"}, RESOLVE),  # an unknown tag keeps the text
    ("v: !!set {a}", {"v": {"a": None}}, RESOLVE),  # tags on mappings are ignored
    ('v: "y"', {"v": "y"}, RESOLVE),
    ("v: 8.0", {"v": 8}, "encoding/json writes 8"),
    ("y: a\nyes: b", {"true": "b"}, "both keys are true: the last one wins"),
    ("0.1: a\n1e6: b\n1.0: c", {"0.1": "a", "1e+06": "b", "1": "c"}, "FormatFloat 'g' 32"),
    ("2015-01-01: a", {"2015-01-01": "a"}, RESOLVE),
    # decode.go `mapping`/`merge`: a merged mapping sets its keys where `<<` stands
    ("{k: 1, <<: {k: 2}}", {"k": 2}, "decode.go merge"),
    ("{<<: {k: 2}, k: 1}", {"k": 1}, "decode.go merge"),
    ("{<<: [{k: 1}, {k: 2}]}", {"k": 1}, "decode.go merge"),
    ("{'<<': {k: 2}}", {"<<": {"k": 2}}, "decode.go isMerge: plain only"),
]


def read(text: str) -> Any:
    (doc,) = iter_documents(text.encode(), source="t.yaml")
    return doc.data


@pytest.mark.parametrize(("text", "value", "source"), TABLE, ids=[r[0][:40] for r in TABLE])
def test_each_scalar_form_reads_as_kubernetes_reads_it(text: str, value: Any, source: str) -> None:
    assert read(text) == value
    assert [type(v) for v in read(text).values()] == [type(v) for v in value.values()]


# Rows where PyYAML's SafeLoader reads otherwise: the table above can fail.
DIFFERS = ["canonical: y", "v: 0o17", "v: 09", "v: 1e3", "v: 1:20", "a: 2015-01-01", "1: a"]


@pytest.mark.parametrize("text", DIFFERS)
def test_pyyaml_reads_these_otherwise(text: str) -> None:
    assert yaml.safe_load(text) != next(row[1] for row in TABLE if row[0] == text)


ERRORS = [
    ("ok: 1\n~: a", 2, "a null key cannot be a JSON object key"),  # SIGS: "~ key"
    ("ok: 1\nnull: a", 2, "a null key cannot be a JSON object key"),  # SIGS: "null key"
    ("18446744073709551615: a", 1, "the key 18446744073709551615 is a uint64"),
    ("ok: 1\nv: !!float 'error'", 2, "cannot decode !!str `error` as a !!float"),  # GOYAML
    ("v: !!int 1.5", 1, "cannot decode !!float `1.5` as a !!int"),
    ("ok: 1\nm: {<<: null}", 2, "map merge requires map or sequence of maps"),
    ("a: &x null\nm: {<<: [*x]}", 2, "map merge requires map or sequence of maps"),
    ("s: &s [{k: 1}]\nm: {<<: *s}", 1, "map merge requires map or sequence of maps"),
    ("a: !!binary ==", 1, "!!binary value contains invalid base64 data"),  # GOYAML
    ("ok: 1\n? [a]\n: 1", 2, "a mapping or a list cannot be a key"),
    ("ok: 1\nv: .nan", 2, "`.nan` has no JSON form"),  # encoding/json: unsupported value
    ("v: [1, -.Inf]", 1, "`-.inf` has no JSON form"),
]


@pytest.mark.parametrize(("text", "line", "problem"), ERRORS, ids=[e[0] for e in ERRORS])
def test_what_kubernetes_refuses_is_an_input_error_with_its_line(
    text: str, line: int, problem: str
) -> None:
    with pytest.raises(ManifestError) as raised:
        read(text)
    assert str(raised.value).startswith(
        f"t.yaml:{line}: kubectl and the apiserver refuse this: {problem}"
    )


def test_go_yaml_merge_examples_are_all_the_same_map() -> None:
    """go-yaml v2 decode_test.go `TestMerge`, on its own document kept verbatim."""
    text = (ROOT / "tests/data/yaml/go-yaml-v2__decode_test__mergeTests.yaml").read_bytes()
    (doc,) = iter_documents(text, source="merge.yaml")
    want = {"x": 1, "y": 2, "r": 10, "label": "center/big"}
    assert {k: v for k, v in doc.data.items() if k != "anchors"} == dict.fromkeys(
        [k for k in doc.data if k != "anchors"], want
    )
    assert len(doc.data) == 9


def test_a_key_made_a_string_keeps_its_line() -> None:
    (doc,) = iter_documents(b"a:\n  y: 1\n  2: 3\n", source="t.yaml")
    assert doc.line_of(("a", "true")) == 2
    assert doc.line_of(("a", "2")) == 3


def test_nan_is_no_float_left_in_the_data() -> None:
    assert not any(isinstance(v, float) and math.isnan(v) for v in read("a: 1.5").values())


@pytest.mark.parametrize("reader", ["documents", "dump"])
def test_dumps_read_the_same_way(tmp_path: Path, reader: str) -> None:
    from webhook.sources.dumps import read_dump

    text = "kind: List\nitems:\n- {a: y, b: 0o17, c: 1:20, 1: x, d: {k: 1, <<: {k: 2}}}\n"
    path = tmp_path / "dump.yaml"
    path.write_text(text)
    want = {"a": True, "b": 15, "c": "1:20", "1": "x", "d": {"k": 2}}
    if reader == "dump":
        assert [item.value for item in read_dump(str(path))] == [want]
    else:
        assert read(text)["items"] == [want]
