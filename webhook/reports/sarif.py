"""`check --output sarif`: findings as SARIF 2.1.0, for code-scanning annotations in PRs.

One reporting rule per policy rule (`policy/rule`), with the check's help text and the
policy's description; the level follows the policy's action (deny: error, warn:
warning, dryrun: note); each result points at the file (relative to the working
directory, which is the repository root in CI) and the line of the offending field.
"""

from __future__ import annotations

import os
from typing import Any

import orjson

from webhook import __version__
from webhook.commands.check import CheckRun, Result
from webhook.core.engine.policy import Policy, PolicySet

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LOAD_RULE = "gpu-admission/load"  # the rule of a run whose policies or inventory failed
LEVELS = {"deny": "error", "warn": "warning", "dryrun": "note"}


def render_sarif(run: CheckRun, *, policy_set: PolicySet) -> str:
    rules = _rules(policy_set)
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    for r in run.results:  # a finding of a rule the policy set does not list: add it
        rule_id = f"{r.finding.policy}/{r.finding.rule}"
        if rule_id not in index:
            index[rule_id] = len(rules)
            rules.append({"id": rule_id, "name": rule_id})
    results = [_result(r, index) for r in run.results]
    return _document(rules, results, _invocation(run.errors))


def render_sarif_failure(message: str, *, source: str) -> str:
    """The run that could not start (policies or inventory did not load): one error
    result at `source`, so code scanning shows the problem instead of a clean run."""
    rule = {
        "id": LOAD_RULE,
        "name": LOAD_RULE,
        "shortDescription": {"text": "The policies and the inventory load"},
        "defaultConfiguration": {"level": "error"},
    }
    result = {
        "ruleId": LOAD_RULE,
        "ruleIndex": 0,
        "level": "error",
        "message": {"text": message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": artifact_uri(source), "uriBaseId": "%SRCROOT%"},
                    "region": {"startLine": 1},
                }
            }
        ],
    }
    return _document([rule], [result], _invocation([message]))


def _document(
    rules: list[dict[str, Any]], results: list[dict[str, Any]], invocation: dict[str, Any]
) -> str:
    body = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gpu-admission",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "invocations": [invocation],
                "results": results,
            }
        ],
    }
    return orjson.dumps(body, option=orjson.OPT_INDENT_2).decode()


def _rules(policy_set: PolicySet) -> list[dict[str, Any]]:
    return [
        _rule(policy, rule_id, rule.help)
        for policy in policy_set.policies
        for rule_id, rule in policy.check.rules.items()
    ]


def _rule(policy: Policy, rule: str, help_text: str) -> dict[str, Any]:
    description = policy.description or help_text
    return {
        "id": f"{policy.name}/{rule}",
        "name": f"{policy.name}/{rule}",
        "shortDescription": {"text": help_text},
        "fullDescription": {"text": description},
        "help": {
            "text": f"{help_text}\n\nPolicy {policy.name} ({policy.action}): {description}",
            "markdown": f"**{help_text}**\n\nPolicy `{policy.name}` "
            f"(enforcementAction: `{policy.action}`): {description}",
        },
        "defaultConfiguration": {"level": LEVELS[policy.action]},
        "properties": {"tags": ["kubernetes", "gpu", policy.check.name]},
    }


def _result(r: Result, index: dict[str, int]) -> dict[str, Any]:
    f = r.finding
    rule_id = f"{f.policy}/{f.rule}"
    return {
        "ruleId": rule_id,
        "ruleIndex": index[rule_id],
        "level": LEVELS[f.action],
        "message": {"text": f"{r.kind} {r.namespace}/{r.name}: {f.message}"},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": artifact_uri(r.file), "uriBaseId": "%SRCROOT%"},
                    "region": {"startLine": r.line},
                },
                "logicalLocations": [
                    {"fullyQualifiedName": f"{r.kind}/{r.namespace}/{r.name}", "kind": "object"}
                ],
            }
        ],
        "properties": {"action": f.action, "apiVersion": r.api_version},
    }


def _invocation(errors: list[str]) -> dict[str, Any]:
    return {
        "executionSuccessful": not errors,
        "toolExecutionNotifications": [
            {"level": "error", "message": {"text": error}} for error in errors
        ],
    }


def artifact_uri(path: str) -> str:
    """A path as SARIF wants it: relative to the working directory, with slashes."""
    if path == "<stdin>":
        return "stdin"
    if os.path.isabs(path):
        rel = os.path.relpath(path)
        path = path if rel.startswith("..") else rel
    return path.replace(os.sep, "/").removeprefix("./")
