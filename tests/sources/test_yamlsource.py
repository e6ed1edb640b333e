"""YAML/JSON documents with the line of every field."""

from __future__ import annotations

import pytest

from webhook.core.kit.paths import format_path
from webhook.errors import ManifestError
from webhook.sources.yamlsource import iter_documents

POD = """\
# a comment line
apiVersion: v1
kind: Pod
metadata:
  name: p
  labels:
    gpu-admission.io/peak-memory: 12Gi
spec:
  containers:
    - name: a
      image: busybox
    - name: b
      env:
        - name: X
          value: "1"
        - {name: NVIDIA_VISIBLE_DEVICES, value: all}
      resources:
        limits:
          nvidia.com/gpu: 1
"""


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ((), 2),
        (("kind",), 3),
        (("metadata", "labels", "gpu-admission.io/peak-memory"), 7),
        (("spec", "containers"), 9),
        (("spec", "containers", 0), 10),
        (("spec", "containers", 1), 12),
        (("spec", "containers", 1, "env", 1), 16),  # a flow mapping as a list item
        (("spec", "containers", 1, "env", 1, "value"), 16),
        (("spec", "containers", 1, "resources", "limits", "nvidia.com/gpu"), 19),
        # A path that leaves the file stops at the deepest field that exists.
        (("spec", "containers", 1, "resources", "requests", "nvidia.com/gpu"), 17),
        (("spec", "containers", 7), 9),
        (("spec", "volumes", 0, "hostPath"), 8),
        (("spec", "containers", "x"), 9),  # a key into a list: no such child
    ],
)
def test_line_of_fields_and_list_items(path: tuple[str | int, ...], line: int) -> None:
    (doc,) = iter_documents(POD, source="pod.yaml")
    assert doc.line_of(path) == line


def test_documents_are_numbered_and_empty_ones_skipped() -> None:
    text = "---\na: 1\n---\n---\n# only a comment\n---\nb: 2\nc: 3\n---\n"
    docs = list(iter_documents(text, source="x.yaml"))
    assert [(d.index, d.line, d.data) for d in docs] == [(1, 2, {"a": 1}), (4, 7, {"b": 2, "c": 3})]
    assert docs[1].line_of(("c",)) == 8


def test_json_lines() -> None:
    text = '{\n  "kind": "Pod",\n  "spec": {\n    "containers": [\n      {"name": "a"}\n    ]\n'
    text += "  }\n}\n"
    (doc,) = iter_documents(text.encode(), source="p.json")
    assert doc.data["spec"]["containers"] == [{"name": "a"}]
    assert doc.line_of(("spec", "containers", 0, "name")) == 5


def test_crlf_line_endings() -> None:
    (doc,) = iter_documents(POD.replace("\n", "\r\n").encode(), source="crlf.yaml")
    assert doc.line_of(("spec", "containers", 1, "resources", "limits")) == 18


@pytest.mark.parametrize(
    ("text", "error"),
    [
        # An unclosed flow sequence: the parser notices at the next key.
        (
            "a: 1\nb: [1, 2\nc: 3\n",
            r"^bad\.yaml:3: invalid YAML: did not find expected ',' or ']'$",
        ),
        (
            "a: 1\n  b: 2\n",
            r"^bad\.yaml:2: invalid YAML: mapping values are not allowed in this context$",
        ),
        (
            'ok: 1\n---\nkey: "unterminated\n',
            r"^bad\.yaml:4: invalid YAML: found unexpected end of stream$",
        ),
        ("a: *nope\n", r"^bad\.yaml:1: invalid YAML: found undefined alias$"),
        ("\t- a\n", r"^bad\.yaml:1: invalid YAML: found character that cannot start any token$"),
    ],
)
def test_syntax_errors_name_file_and_line(text: str, error: str) -> None:
    with pytest.raises(ManifestError, match=error):
        list(iter_documents(text, source="bad.yaml"))


def test_documents_before_a_syntax_error_are_still_yielded() -> None:
    docs = iter_documents("a: 1\n---\nb: [\n", source="x.yaml")
    assert next(docs).data == {"a": 1}
    with pytest.raises(ManifestError, match=r"^x\.yaml:4: "):
        next(docs)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        (
            ("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"),
            'spec.containers[0].resources.limits["nvidia.com/gpu"]',
        ),
        (
            ("metadata", "labels", "gpu-admission.io/slo-class"),
            'metadata.labels["gpu-admission.io/slo-class"]',
        ),
        (
            ("spec", "pytorchReplicaSpecs", "Worker", "template"),
            "spec.pytorchReplicaSpecs.Worker.template",
        ),
        (("items", 3, "spec"), "items[3].spec"),
        (("volume_mounts", "host-dev"), "volume_mounts.host-dev"),
        ((), ""),
    ],
)
def test_format_path(path: tuple[str | int, ...], text: str) -> None:
    assert format_path(path) == text


REPEATED = """\
apiVersion: v1
kind: Pod
spec:
  containers:
    - name: main
      resources:
        limits: {nvidia.com/gpu: 1}
      resources:
        limits: {nvidia.com/gpu: 2}
"""


def _says(key: str, first: int, later: int) -> str:
    return (
        f'f.yaml:{later}: key "{key}" appears twice in one mapping (f.yaml:{first} and '
        f"f.yaml:{later}): kubectl apply -f keeps the last one silently, kustomize and the "
        f"apiserver's strict YAML decoding refuse it. Keep one; the object is judged as "
        f"kubectl reads it, with the block at line {later}."
    )


@pytest.mark.parametrize(
    ("text", "repeats"),
    [
        (REPEATED, [_says("resources", 6, 8)]),
        ("a: 1\nb: 2\na: 3\na: 4\n", [_says("a", 1, 3), _says("a", 1, 4)]),
        # Inner mappings are built first; the errors still come in line order.
        ("a: {x: 1, x: 2}\na: 3\nb: [{y: 1}, {y: 1, y: 2}]\n",
         [_says("x", 1, 1), _says("a", 1, 2), _says("y", 3, 3)]),
        # Keys equal once read as Kubernetes reads them (`y` is "true", `1` is "1").
        ('y: a\n"true": b\n', [_says("true", 1, 2)]),
        ('1: a\n"1": b\n', [_says("1", 1, 2)]),
        # Merged keys are not written twice: an explicit key overrides them.
        ("base: &b {x: 1}\nm: {<<: *b, x: 2}\n", []),
        ("m: {<<: [{x: 1}, {x: 2}]}\n", []),
        ("a: 1\nb: 2\n", []),
    ],
)  # fmt: skip
def test_repeated_keys_are_named_with_both_lines(text: str, repeats: list[str]) -> None:
    (doc,) = iter_documents(text, source="f.yaml")
    assert list(doc.repeats) == repeats


def test_a_repeated_key_reads_and_places_the_last_block() -> None:
    (doc,) = iter_documents(REPEATED, source="f.yaml")
    limits = ("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu")
    assert doc.data["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 2}}
    assert doc.line_of(limits) == 9
