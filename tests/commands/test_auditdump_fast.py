"""The fast path of `audit --from` (cut ranges, items cut at separators, the pre-filter)
writes the report the engine writes on every object in one process.

Each dump below goes through `audit_dumps` twice: cut into ranges across two workers,
with the pre-filter on (what the CLI does), and in one process (jsonstream) with the
pre-filter off, so every object is evaluated. The JSON reports must be equal byte for
byte, and each case names a finding that must be there, so that a filter that let a
GPU Pod through unjudged could not pass. The objects hide their GPU channel where a
search of the raw bytes would miss it (JSON escapes) or where only the loaded policy
set says it is one (an annotation, a variable a custom policy names); the layouts put a
line that looks like an item's end inside an item.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.auditobjects import GPU_LABELS, audit_dump, deployment_family, pod
from tests.support.paths import ROOT
from webhook.sources import dumpsplit
from webhook.sources.dumps import read_dump

INDENT = " " * 8  # kubectl's: items inside `"items": [` of a 4-space List


def item_text(obj: Any) -> str:
    return "\n".join(INDENT + line for line in json.dumps(obj, indent=4).splitlines())


def list_text(items: list[str]) -> str:
    """A List laid out as kubectl writes it, around the given item texts."""
    body = ",\n".join(items)
    return (
        '{\n    "apiVersion": "v1",\n    "items": [\n' + body + '\n    ],\n    "kind": "List"\n}\n'
    )


def filler() -> list[str]:
    """Enough ordinary objects that each range holds some, findings among them."""
    out: list[Any] = []
    for i in range(12):
        out += deployment_family(f"app{i}", pods=2, namespace=f"team-{i % 3}", gpus=i % 2)
    return [item_text(o) for o in out]


def audit(dump: Path, policies: Path, *, fast: bool) -> tuple[str, int]:
    """Fast: two workers, the pre-filter on (as the CLI runs); else one process, every
    object evaluated."""
    return audit_dump(dump, workers=2 if fast else 1, policies=policies, prefilter=fast)


def gpu_pod(name: str, **changes: Any) -> dict[str, Any]:
    p = pod(name, namespace="team-x", labels=dict(GPU_LABELS))
    container = p["spec"]["containers"][0]
    for key, value in changes.items():
        if key == "annotations":
            p["metadata"]["annotations"] = value
        elif key == "volumes":
            p["spec"]["volumes"] = value
        else:
            container[key] = value
    return p


def escaped(text: str, plain: str, written: str) -> str:
    assert plain in text
    return text.replace(plain, written)


# (case, the item's text, what must be found on it: (policy, rule))
CASES = [
    (
        "gpu-limit-key-escaped",
        escaped(
            item_text(gpu_pod("esc-gpu", resources={"limits": {"nvidia.com/gpux": "1"}})),
            '"nvidia.com/gpux"',
            '"nvidia.com\\/\\u0067pux"',
        ),
        ("gpu-resource-names", "unknown-resource"),
    ),
    (
        "device-variable-escaped",
        escaped(
            item_text(gpu_pod("esc-env", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])),
            '"NVIDIA_VISIBLE_DEVICES"',
            '"NVIDIA_VISIBLE_DEVIC\\u0045S"',
        ),
        ("gpu-device-injection", "visible-devices-env"),
    ),
    (
        "hostpath-key-escaped",
        escaped(
            item_text(
                gpu_pod("esc-host", volumes=[{"name": "d", "hostPath": {"path": "/dev/nvidia0"}}])
            ),
            '"hostPath"',
            '"host\\u0050ath"',
        ),
        ("gpu-device-injection", "hostpath-device"),
    ),
    (
        "cdi-annotation-only",
        item_text(gpu_pod("cdi", annotations={"cdi.k8s.io/gpu": "nvidia.com/gpu=all"})),
        ("gpu-device-injection", "cdi-annotation"),
    ),
    (
        "custom-policy-variable",
        item_text(gpu_pod("custom-env", env=[{"name": "ACME_ACCEL_DEVICES", "value": "0"}])),
        ("gpu-device-injection", "visible-devices-env"),
    ),
    (
        "gpu-share-annotation-only",
        item_text(gpu_pod("share", annotations={"gpu-fraction": "1.5"})),
        ("gpu-memory-fit", "unknown-device-memory"),
    ),
]


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped policies, the device-injection one also naming ACME_ACCEL_DEVICES:
    a variable the filter can only know from the loaded policy."""
    out = tmp_path_factory.mktemp("policies")
    for f in (ROOT / "policies").glob("*.yaml"):
        shutil.copy(f, out / f.name)
    injection = out / "gpu-device-injection.yaml"
    text = injection.read_text()
    injection.write_text(text.replace("envVars: [", "envVars: [ACME_ACCEL_DEVICES, ", 1))
    return out


@pytest.mark.parametrize(("case", "text", "finding"), CASES, ids=[c[0] for c in CASES])
def test_hidden_gpu_channels_are_judged_as_the_engine_judges_them(
    tmp_path: Path, policies: Path, case: str, text: str, finding: tuple[str, str]
) -> None:
    items = filler()
    items[len(items) // 2 : len(items) // 2] = [text]
    dump = tmp_path / "pods.json"
    dump.write_text(list_text(items))
    assert len(dumpsplit.parts(str(dump), count=2)) == 2
    fast, engine = audit(dump, policies, fast=True), audit(dump, policies, fast=False)
    assert fast == engine
    found = {(r["name"], r["policy"], r["rule"]) for r in json.loads(fast[0])["results"]}
    name = json.loads(text.replace("\\u", "\\\\u"))["metadata"]["name"]
    assert (name, *finding) in found, sorted(found)


ODD_POD_HEAD = (
    f'{INDENT}{{\n{INDENT}    "apiVersion": "v1",\n{INDENT}    "kind": "Pod",\n'
    f'{INDENT}    "metadata": {{"name": "odd", "namespace": "team-x", "uid": "uid-odd"'
)
# An item with a line `<indent>},` inside it that is not followed by an item line: a
# reader that cut at that line would cut the item short.
INNER_CLOSING_LINE = (
    f"{ODD_POD_HEAD}\n{INDENT}}},\n"
    f'{INDENT}    "spec": {{"containers": [{{"name": "c", "image": "x",'
    f' "resources": {{"limits": {{"nvidia.com/gpux": "1"}}}}}}]}}\n{INDENT}}}'
)
# An item that holds a whole separator (`<indent>},` then `<indent>{`): cut there, its
# first part does not parse, and the file is read by jsonstream in one process.
INNER_SEPARATOR = (
    f'{ODD_POD_HEAD}}},\n{INDENT}    "spec": {{"containers": [{{"name": "a", "image": "x"\n'
    f'{INDENT}}},\n{INDENT}{{\n{INDENT}    "name": "b", "image": "y",'
    f' "resources": {{"limits": {{"nvidia.com/gpux": "1"}}}}}}]}}\n{INDENT}}}'
)
EMPTY_ON_TWO_LINES = f"{INDENT}{{\n{INDENT}}}"  # `{` and `}` each on an item line


@pytest.mark.parametrize(
    ("text", "cut"),
    [(INNER_CLOSING_LINE, True), (INNER_SEPARATOR, False), (EMPTY_ON_TWO_LINES, True)],
    ids=["inner-closing-line", "inner-separator", "empty-item-on-two-lines"],
)
def test_items_cut_at_separators_are_the_items_jsonstream_reads(
    tmp_path: Path, policies: Path, text: str, cut: bool
) -> None:
    items = filler()
    items[3:3] = [text]
    dump = tmp_path / "pods.json"
    dump.write_text(list_text(items))
    whole = [(item.line, item.value) for item in read_dump(str(dump))]
    parts = dumpsplit.parts(str(dump), count=2)
    try:
        lines: list[int] = []
        ranged = []
        for part, base in zip(parts, dumpsplit.line_bases(parts), strict=True):
            ranged += [(base + line + 1, v) for line, v, _ in dumpsplit.items(part, lines=lines)]
    except dumpsplit.Unusual:
        assert not cut  # read whole instead, by jsonstream
    else:
        assert cut and ranged == whole
    assert audit(dump, policies, fast=True) == audit(dump, policies, fast=False)
