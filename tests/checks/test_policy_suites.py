"""The shipped policy suites (policies/tests/), one pytest case per suite case.

A policy change that breaks a documented behaviour fails here, naming the case.
"""

from __future__ import annotations

import pytest

from tests.support.paths import ROOT
from webhook.commands.policytest import PolicyCache, Suite, load_suites
from webhook.commands.policytest_run import run_suite, suite_files
from webhook.sources.policy_files import load_policy_dir

POLICIES = ROOT / "policies"
_cache: PolicyCache = {}


def shipped_suites() -> list[Suite]:
    files, errors = suite_files([str(POLICIES / "tests")])
    assert not errors
    return [s for f in files for s in load_suites(f, default_policies=str(POLICIES), cache=_cache)]


SUITES = shipped_suites()
CASES = [(suite, case.name) for suite in SUITES for case in suite.cases]


@pytest.mark.parametrize(("suite", "case"), CASES, ids=[f"{s.name}: {c}" for s, c in CASES])
def test_shipped_case(suite: Suite, case: str) -> None:
    one = Suite(
        suite.file, suite.name, suite.policies, tuple(c for c in suite.cases if c.name == case)
    )
    (result,) = run_suite(one).cases

    assert result.passed, "\n".join([*result.problems, *result.findings])


def test_every_shipped_policy_has_a_suite_covering_every_rule() -> None:
    fired: set[str] = set()
    for suite in SUITES:
        for case in suite.cases:
            fired.update(case.expect.rules or ())
    for policy in load_policy_dir(POLICIES).policies:
        assert any(policy.name == s.name for s in SUITES), f"no suite for {policy.name}"
        missing = {f"{policy.name}/{r}" for r in policy.check.rules} - fired
        assert not missing, f"rules without a case: {sorted(missing)}"


def test_every_suite_has_allow_cases() -> None:
    for suite in SUITES:
        assert any(c.expect.outcome == "allow" for c in suite.cases), suite.name
