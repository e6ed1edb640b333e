"""One closed set of outcomes, and "error" (a check that raised) in every shell.

A check with a bug must never let an object through: the engine returns outcome
"error" with the policy and the exception's text (bounded), `check`, `audit` and `diff`
count it as an internal error (exit 2) naming the object, `test` fails the case, and
the webhook answers 500 so the webhook's failurePolicy decides.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.testclient import TestClient

from tests.support.builders import RAISE_LABEL, cluster, container, pod, shipped, with_broken_check
from tests.support.paths import ROOT
from webhook.commands.audit import Auditor
from webhook.commands.check import check_paths
from webhook.commands.diff import diff_objects
from webhook.commands.policytest import Case, Expect, Suite
from webhook.commands.policytest_run import met, run_suite
from webhook.core.engine.evaluation import (
    ERROR_TEXT_LIMIT,
    OUTCOMES,
    Decision,
    Finding,
    Outcome,
    evaluate,
)
from webhook.core.engine.subject import subject_of
from webhook.errors import EvaluationError
from webhook.serve.admission import judge, parse_review
from webhook.serve.decisionlog import DecisionLog
from webhook.serve.server import create_app
from webhook.serve.state import Settings, State
from webhook.sources.dumps import Sourced

PRIVILEGED = container(securityContext={"privileged": True})
# Raises in the broken check; the shipped device-injection policy finds it privileged.
BOOM = pod(PRIVILEGED, name="boom", labels={RAISE_LABEL: ""})
BOOM["metadata"]["namespace"] = "team-a"
ERROR = "policy broken (check broken): KeyError: 'spec'"


def finding(action: str) -> Finding:
    return Finding("p", "r", action, "m", ())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("decision", "outcome"),
    [
        (Decision(), "allow"),
        (Decision((finding("dryrun"),)), "allow"),
        (Decision((finding("dryrun"), finding("warn"))), "warn"),
        (Decision((finding("warn"), finding("deny"))), "deny"),
        (Decision(skipped="no policy matches Pod in namespace kube-system"), "skip"),
        (Decision((finding("deny"),), error="policy p (check c): KeyError: 'x'"), "error"),
        (Decision(error="reading the pod specs of Pod: RecursionError"), "error"),
    ],
)
def test_outcome_error_beats_skip_beats_deny_beats_warn(decision: Decision, outcome: str) -> None:
    assert decision.outcome == outcome
    assert outcome in OUTCOMES


def test_a_raising_check_is_an_error_and_the_other_policies_still_report() -> None:
    decision = evaluate(with_broken_check(shipped()), subject_of(BOOM), cluster())

    assert (decision.outcome, decision.error) == ("error", ERROR)
    # The broken policy's finding made before it raised is dropped: a partial run says
    # nothing reliable. The shipped policies' findings stay.
    assert [(f.policy, f.rule) for f in decision.findings] == [
        ("gpu-device-injection", "privileged")
    ]


def test_the_exception_text_is_bounded() -> None:
    obj = pod(labels={RAISE_LABEL: "x" * 10_000})

    decision = evaluate(with_broken_check(shipped()), subject_of(obj), cluster())

    prefix = "policy broken (check broken): ValueError: "
    assert decision.error == prefix + "x" * (ERROR_TEXT_LIMIT - 3) + "..."


def test_check_reports_it_as_an_internal_error_naming_the_object(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(BOOM))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(pod(PRIVILEGED, name="next")))

    run = check_paths([str(tmp_path)], policy_set=with_broken_check(shipped()), inventory=cluster())

    assert run.errors == [
        f"{tmp_path / 'a.yaml'}:1: internal error while evaluating Pod team-a/boom: {ERROR}"
    ]
    assert [(r.name, r.finding.rule) for r in run.results] == [("next", "privileged")]
    assert run.exit_code == 2


def test_audit_reports_it_as_an_internal_error_naming_the_object() -> None:
    auditor = Auditor(with_broken_check(shipped()), cluster())
    auditor.add(BOOM, location="dump.json:3")

    report = auditor.report()

    assert report.errors == (
        f"dump.json:3: internal error while evaluating Pod team-a/boom: {ERROR}",
    )
    assert (report.entries, report.evaluated, report.exit_code("never")) == ((), 0, 2)


@pytest.mark.parametrize("broken", ["base", "head"])
def test_diff_reports_it_as_an_internal_error_naming_the_object(broken: str) -> None:
    sets = {"base": shipped(), "head": shipped()} | {broken: with_broken_check(shipped())}

    report = diff_objects([Sourced(BOOM, "k8s/boom.yaml:1")], inventory=cluster(), **sets)

    assert report.errors == [
        f"k8s/boom.yaml:1: internal error while evaluating Pod team-a/boom: {ERROR} "
        f"(under the {broken} policies)"
    ]
    assert (report.diffs, report.exit_code) == ([], 2)


@pytest.mark.parametrize("expected", ["allow", "deny", "skip"])
def test_a_policy_test_case_fails_on_an_error(expected: Outcome) -> None:
    case = Case("boom", BOOM, None, cluster(), Expect(outcome=expected), None)
    suite = Suite("suite.yaml", "s", with_broken_check(shipped()), (case,))

    (result,) = run_suite(suite).cases

    assert result.problems == (f"expected outcome {expected}, got error ({ERROR})",)


@pytest.mark.parametrize(
    ("expected", "got", "passes"),
    [
        ("allow", "allow", True),
        ("allow", "skip", True),  # admission lets a skipped object through
        ("skip", "allow", False),  # but `skip` asks that no policy judged it
        ("allow", "warn", False),
        ("deny", "error", False),
        ("error", "error", True),
    ],
)
def test_expected_outcomes(expected: Outcome, got: Outcome, passes: bool) -> None:
    assert met(expected, got) is passes


def admission_review(obj: dict[str, Any]) -> dict[str, Any]:
    request = {
        "uid": "uid-boom",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "namespace": "team-a",
        "operation": "CREATE",
        "userInfo": {"username": "alice"},
        "object": obj,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def test_judge_raises_it_never_allows() -> None:
    request = parse_review(admission_review(BOOM))

    with pytest.raises(EvaluationError) as raised:
        judge(request, policy_set=with_broken_check(shipped()), inventory=cluster())
    assert str(raised.value) == ERROR


def test_the_webhook_answers_500_so_failure_policy_decides() -> None:
    settings = Settings(str(ROOT / "policies"), str(ROOT / "examples/cluster/nodes.json"))
    state = State.start(settings)
    state.policy_set = with_broken_check(state.policy_set)  # as a reload would swap it in
    client = TestClient(create_app(state, decision_log=DecisionLog(io.BytesIO())))

    clean = pod(labels={"gpu-admission.io/slo-class": "batch"})
    assert client.post("/validate", json=admission_review(clean)).status_code == 200
    resp = client.post("/validate", json=admission_review(BOOM))

    assert resp.status_code == 500
    assert resp.json() == {
        "error": "internal error; see the webhook's log",
        "code": 500,
        "uid": "uid-boom",
    }
