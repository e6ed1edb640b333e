"""Every rule of every shipped check: an object that triggers it reaches the webhook.

The matchConditions are generated from what the checks declare they read
(webhook/kube/match_conditions.py). This proves the declarations and their CEL on the
apiserver's own admission code (../shared/tools/apiserverhook: the validating-webhook
plugin of kube-apiserver 1.36, CEL compiled and evaluated as there): each case of the
shipped policy suites (policies/tests) that a policy denies or warns on is sent to a
webhook whose Service resolves to a closed port, so with failurePolicy Fail a request
that reaches the webhook is refused with "failed calling webhook"; one that the
conditions filter out would be allowed, and the test fails. A second test fails when a
rule of a shipped check has no such case, so a new rule cannot ship unproven.
"""

from __future__ import annotations

import base64
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.apiserverhook import APISERVERHOOK, Obj, run_cases, write_webhook_config
from tests.support.paths import ROOT
from webhook.commands.policytest import Case, is_suite_file, load_suites
from webhook.serve import certs

pytestmark = [
    pytest.mark.skipif(not APISERVERHOOK.exists(), reason=f"{APISERVERHOOK} not found"),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed"),
]
SUITES = ROOT / "policies/tests"
REFUSED = "failed calling webhook"
# Resources whose plural is not the kind plus "s" (apiserverhook's default).
PLURALS = {"ResourceClaim": "resourceclaims", "ResourceClaimTemplate": "resourceclaimtemplates"}
CLUSTER_SCOPED = frozenset({"Namespace", "ClusterQueue", "ResourceFlavor", "Cohort"})


def flagged_cases() -> Iterator[tuple[str, Case]]:
    """(suite/case id, case) for every case the suites expect a finding on."""
    cache: dict[Path, Any] = {}
    for path in sorted(SUITES.glob("*.yaml")):
        if not is_suite_file(path):
            continue
        for suite in load_suites(path, default_policies=str(ROOT / "policies"), cache=cache):
            for case in suite.cases:
                if case.expect.outcome in ("deny", "warn") or case.expect.rules:
                    yield f"{path.stem}/{case.name}", case


def hook_case(case_id: str, case: Case) -> Obj:
    obj = dict(case.obj)
    kind = str(obj.get("kind"))
    meta = obj.get("metadata") or {}
    scoped = kind not in CLUSTER_SCOPED
    namespace = case.namespace or meta.get("namespace") or "default" if scoped else ""
    out: Obj = {
        "id": case_id,
        "namespace": namespace,
        "operation": case.operation,
        "resource": PLURALS.get(kind, kind.lower() + "s"),
        "object": obj,
        "oldObject": dict(case.old) if case.old is not None else None,
    }
    return out


CASES = list(flagged_cases())


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Obj]:
    ca = certs.make_ca(common_name="match-conditions test CA", days=1)
    vwc = write_webhook_config(
        base64.b64encode(ca.cert_pem).decode(), tmp_path_factory.mktemp("mc") / "vwc.yaml"
    )
    # What is sent, not what an outage does: every entry fails closed here, so a call
    # to the closed port shows (the image-env entry ships with Ignore).
    config = yaml.safe_load(vwc.read_text())
    for webhook in config["webhooks"]:
        webhook["failurePolicy"] = "Fail"
    vwc.write_text(yaml.safe_dump(config))
    cases = [hook_case(i, c) for i, c in CASES]
    namespaces = sorted({c["namespace"] for c in cases if c["namespace"]})
    return run_cases(
        vwc, target="127.0.0.1:1", cases=cases, extra=("--namespaces", ",".join(namespaces))
    )


@pytest.mark.parametrize(("case_id", "case"), CASES, ids=[i for i, _ in CASES])
def test_an_object_a_policy_flags_reaches_the_webhook(
    answers: dict[str, Obj], case_id: str, case: Case
) -> None:
    answer = answers[case_id]
    assert not answer["allowed"] and REFUSED in answer["message"], (
        f"{case_id}: the shipped matchConditions let it through unjudged: {answer}"
    )


def test_every_rule_of_every_shipped_check_has_such_a_case() -> None:
    from webhook.sources.policy_files import load_policy_dir

    shipped = load_policy_dir(ROOT / "policies")
    rules = {f"{p.name}/{r}" for p in shipped.policies for r in p.check.rules}
    proven = {r for _, c in CASES for r in c.expect.rules}
    assert not rules - proven, "rules no suite case triggers: " + ", ".join(sorted(rules - proven))
