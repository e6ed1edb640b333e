"""`audit --from` of a big JSON dump across processes: the report a single process writes.

The same dump goes through `audit_dumps` with two workers (cut into byte ranges) and
with one; the JSON reports must be equal, byte for byte, and so must the exit codes.
Layouts the cutter does not read (a trailing comma, an item that does not parse, a
document after the List, CRLF lines) must give the single-process report too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.auditobjects import GPU_LABELS, as_list, audit_dump, deployment_family, pod
from tests.support.paths import ROOT
from webhook.sources import dumpsplit

INVENTORY = ROOT / "examples" / "cluster" / "nodes.json"


def objects(families: int = 40) -> list[dict[str, Any]]:
    """Pods first, their owners last (the owners land in the other range), findings of
    several kinds, a Pod without a namespace, one object that is not an object."""
    pods: list[dict[str, Any]] = []
    owners: list[dict[str, Any]] = []
    for i in range(families):
        family = deployment_family(
            f"app{i}", pods=3, namespace=f"team-{i % 3}", privileged=i % 4 == 0, gpus=i % 2
        )
        owners += family[:2]
        pods += family[2:]
    pods.append(pod("lone", gpus=1, labels=GPU_LABELS))
    typo = pod("typo", gpus=1, labels=GPU_LABELS)
    typo["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpux": "1"}}
    del typo["metadata"]["namespace"]
    return [*pods, typo, *owners]


def audit(path: Path, *, workers: int, namespace: str | None = None) -> tuple[str, int]:
    return audit_dump(path, workers=workers, namespace=namespace)


def write(path: Path, items: list[Any], *, indent: int = 4) -> Path:
    path.write_text(json.dumps(as_list(items), indent=indent) + "\n")
    return path


@pytest.mark.parametrize("indent", [2, 4])
def test_two_processes_write_the_single_process_report(tmp_path: Path, indent: int) -> None:
    dump = write(tmp_path / "pods.json", objects(), indent=indent)
    parts = dumpsplit.parts(str(dump), count=2)
    assert len(parts) == 2 and parts[0].end == parts[1].start  # it really is cut
    split, single = audit(dump, workers=2), audit(dump, workers=1)
    assert split == single
    body = json.loads(split[0])
    assert split[1] == 1 and body["summary"]["objects"] == len(objects())
    assert body["summary"]["skipped"] == 0 and len(body["results"]) > 10


def test_the_namespace_filter_and_several_cuts(tmp_path: Path) -> None:
    dump = write(tmp_path / "pods.json", objects(families=60))
    for workers in (2, 3, 7):
        assert audit(dump, workers=workers, namespace="team-1") == audit(
            dump, workers=1, namespace="team-1"
        )


def test_lines_are_those_of_the_file(tmp_path: Path) -> None:
    dump = write(tmp_path / "pods.json", objects())
    body = json.loads(audit(dump, workers=2)[0])
    lines = dump.read_text().splitlines()
    for result in body["results"]:
        line = int(result["location"].rsplit(":", 1)[1])
        assert lines[line - 1].strip() == "{"
        assert f'"name": "{result["name"]}"' in "\n".join(lines[line : line + 30])


def _trailing_comma(text: str) -> str:
    return text.replace("\n    ],", ",\n    ],")


def _broken_item(text: str) -> str:
    at = text.index('"name": "app20')
    return text[:at] + '"name" "app20' + text[at + len('"name": "app20') :]


@pytest.mark.parametrize(
    "damage",
    [
        _trailing_comma,
        _broken_item,
        lambda text: text + '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}\n',
        lambda text: text.replace("\n", "\r\n"),
        lambda text: text.replace('"items": [', '"items": [\n        5,', 1),
    ],
    ids=["trailing-comma", "broken-item", "second-document", "crlf", "not-an-object"],
)
def test_other_layouts_give_the_single_process_report(tmp_path: Path, damage: Any) -> None:
    dump = tmp_path / "pods.json"
    dump.write_text(damage(json.dumps(as_list(objects()), indent=4)))
    assert audit(dump, workers=2) == audit(dump, workers=1)


def test_the_command_cuts_a_big_dump_as_stdin_reads_it(tmp_path: Path) -> None:
    """Through the real CLI: a file over MIN_BYTES is cut, stdin never is."""
    from bench import audit_bench  # the generator of bench/audit_bench.py

    dump = tmp_path / "pods.json"
    audit_bench.write_dump(dump, 2400)  # about 17 MiB: over MIN_BYTES
    assert dump.stat().st_size >= 16 << 20
    base = [sys.executable, "-m", "webhook", "audit", "-o", "json", "--inventory", str(INVENTORY)]
    cut = subprocess.run([*base, "--from", str(dump)], capture_output=True, text=True, cwd=ROOT)
    with dump.open("rb") as stdin:
        whole = subprocess.run(
            [*base, "--from", "-"], stdin=stdin, capture_output=True, text=True, cwd=ROOT
        )
    assert cut.returncode == whole.returncode == 1, cut.stderr + whole.stderr
    assert cut.stdout.replace(str(dump), "<stdin>") == whole.stdout
    assert json.loads(cut.stdout)["summary"]["objects"] == 2400
