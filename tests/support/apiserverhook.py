"""Running ../shared/tools/apiserverhook (the kube-apiserver's webhook plugin) from tests."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import ROOT, TOOLS

APISERVERHOOK = TOOLS / "apiserverhook/apiserverhook"

Obj = dict[str, Any]


def write_webhook_config(ca_bundle: str, out: Path) -> Path:
    """The ValidatingWebhookConfiguration `manifests/base` renders, with this caBundle."""
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(ROOT / "manifests/base")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    [vwc] = [
        d
        for d in yaml.safe_load_all(rendered)
        if d and d["kind"] == "ValidatingWebhookConfiguration"
    ]
    for webhook in vwc["webhooks"]:
        webhook["clientConfig"]["caBundle"] = ca_bundle
    out.write_text(yaml.safe_dump(vwc))
    return out


def run_cases(
    vwc: Path, *, target: str, cases: list[Obj], extra: tuple[str, ...] = ()
) -> dict[str, Obj]:
    """Every case through apiserverhook in one run; its answers keyed by case id."""
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    run = subprocess.run(
        [str(APISERVERHOOK), "--vwc", str(vwc), "--target", target, *extra],
        input="".join(json.dumps(c) + "\n" for c in cases),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    answers = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(answers) == len(cases), run.stderr
    return {a["id"]: a for a in answers}
