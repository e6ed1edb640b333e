"""Writes the matchConditions derived from policies/ into the shipped configuration.

manifests/base/validatingwebhookconfiguration.yaml: each entry's `matchConditions:`
block is replaced by what `gpu-admission match-conditions` prints for it (and removed
where it prints none); charts/gpu-admission/templates/_matchconditions.tpl is written
whole. Run by scripts/sync-manifest-policies; tests/kube/test_match_conditions.py fails
when the shipped files differ from what this writes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "manifests/base/validatingwebhookconfiguration.yaml"
CHART = ROOT / "charts/gpu-admission/templates/_matchconditions.tpl"
ENTRY = "  - name: "
FIELD = "    "  # an entry's own fields


def generated(form: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "webhook", "match-conditions", "--policies", "policies",
         "--format", form],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout


def block(conditions: list[dict[str, str]]) -> list[str]:
    if not conditions:
        return []
    text = yaml.dump(conditions, Dumper=_Dumper, sort_keys=False, width=1000)
    return [f"{FIELD}matchConditions:"] + [f"{FIELD}  {line}" for line in text.splitlines()]


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(
    str,
    lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None),
)


def patched(text: str, found: dict[str, list[dict[str, str]]]) -> str:
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    entry = None
    while i < len(lines):
        line = lines[i]
        if line.startswith(ENTRY):
            entry = line[len(ENTRY):].strip()
        if entry in found and line == f"{FIELD}matchConditions:":
            i += 1  # skip the old block: its lines are indented deeper than a field
            while i < len(lines) and (lines[i].startswith(FIELD + " ") or not lines[i].strip()):
                i += 1
            out += block(found.pop(entry))
            continue
        if entry in found and line.startswith(f"{FIELD}sideEffects:"):
            out += block(found.pop(entry))  # an entry that had no block before
        out.append(line)
        i += 1
    if found:
        raise SystemExit(f"entries not in {MANIFEST}: {sorted(found)}")
    return "\n".join(out) + "\n"


def main() -> None:
    found = yaml.safe_load(generated("yaml"))
    MANIFEST.write_text(patched(MANIFEST.read_text(), found))
    CHART.write_text(generated("chart"))


if __name__ == "__main__":
    main()
