"""The AdmissionReview wire format (admission.k8s.io/v1), in and out. No HTTP here.

`judge` turns a parsed request into a response body. A malformed review raises
ReviewError (the server answers 400); a policy denial is an ordinary response with
`allowed: false` (403 inside the body), so the two never mix.

A response is bounded whatever the object: each finding's message is (text.MESSAGE_LIMIT,
cut by the engine), the deny message lists findings up to DENY_BUDGET characters and
counts the rest, warnings stay within the apiserver's budget, and each audit annotation
within ANNOTATION_BUDGET.
"""

from __future__ import annotations

import base64
import re
import textwrap
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

import orjson

from webhook.core.access.neutralise import neutralising_patch
from webhook.core.engine.evaluation import Decision, Finding, Staleness, evaluate
from webhook.core.engine.policy import PolicySet
from webhook.core.engine.subject import Subject, subject_of
from webhook.core.kit.text import clip
from webhook.core.supply.inventory import Inventory
from webhook.errors import EvaluationError, ReviewError, WorkloadError

API_VERSION = "admission.k8s.io/v1"
WARNING_WIDTH = 120  # kubectl shows longer ones, but the apiserver may cut past 256
WARNINGS_BUDGET = 4096  # the apiserver drops warnings past this many characters in all
DENY_BUDGET = 8192  # the deny message: kubectl prints it whole, so it stays readable
ANNOTATION_BUDGET = 2048  # one audit annotation value (findings of one rule, joined)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ANNOTATION_KEY = re.compile(r"[^A-Za-z0-9_.-]")


class Evaluator(Protocol):
    def __call__(
        self,
        policy_set: PolicySet,
        subject: Subject,
        inventory: Inventory,
        *,
        stale: Staleness | None = None,
    ) -> Decision: ...


class AdmissionRequest(NamedTuple):
    """The request facts we use. A NamedTuple: built once per request, cheaply."""

    uid: str
    operation: str
    kind: str
    sub_resource: str
    namespace: str
    name: str
    user: str
    dry_run: bool
    obj: Mapping[str, Any] | None
    old_obj: Mapping[str, Any] | None
    user_info: Mapping[str, Any] | None = None  # request.userInfo (Namespace guardrails)


def parse_review(body: object) -> AdmissionRequest:
    """Validate the parts of an AdmissionReview we rely on; anything else is a ReviewError.

    `body` is decoded JSON, so objects are plain dicts (cheaper to test than Mapping)."""
    if type(body) is not dict:
        raise ReviewError("body must be a JSON object (an AdmissionReview)")
    if body.get("apiVersion") != API_VERSION or body.get("kind") != "AdmissionReview":
        raise ReviewError(f"expected apiVersion {API_VERSION} and kind AdmissionReview")
    req = body.get("request")
    if type(req) is not dict:
        raise ReviewError("request must be an object")
    uid = req.get("uid")
    if type(uid) is not str or not uid:
        raise ReviewError("request.uid must be a non-empty string")
    operation = req.get("operation")
    if operation not in ("CREATE", "UPDATE", "DELETE", "CONNECT"):
        raise ReviewError("request.operation must be CREATE, UPDATE, DELETE or CONNECT")
    obj, old = req.get("object"), req.get("oldObject")
    if operation in ("CREATE", "UPDATE") and type(obj) is not dict:
        raise ReviewError(f"request.object must be an object on {operation}")
    kind = _kind(req.get("kind"))
    user = req.get("userInfo")
    username = user.get("username") if type(user) is dict else None
    sub, namespace, name = req.get("subResource"), req.get("namespace"), req.get("name")
    # Positional, and the string tests inline: this runs on every request.
    return AdmissionRequest(
        uid,
        operation,
        kind,
        sub if type(sub) is str else "",
        namespace if type(namespace) is str else "",
        name if type(name) is str else "",
        username if type(username) is str else "",
        req.get("dryRun") is True,
        obj if type(obj) is dict else None,
        old if type(old) is dict else None,
        user if type(user) is dict else None,
    )


def _kind(value: object) -> str:
    kind = value.get("kind") if type(value) is dict else None
    if type(kind) is not str:
        raise ReviewError("request.kind must be an object with a string kind")
    return kind


def judge(
    request: AdmissionRequest,
    *,
    policy_set: PolicySet,
    inventory: Inventory,
    stale: Staleness | None = None,
    evaluator: Evaluator = evaluate,
) -> Decision:
    """What this webhook decides for one request (DELETE and CONNECT are not judged).

    `evaluator` is `engine.evaluate` or a cache's `evaluate` in front of it. A check that
    raised is EvaluationError (an internal fault: HTTP 500), never an allow; an object
    too large to judge is WorkloadError (the request's fault: HTTP 400)."""
    if request.operation not in ("CREATE", "UPDATE") or request.obj is None:
        return Decision(skipped=f"{request.operation} is not judged")
    if request.kind == "Pod" and request.operation == "UPDATE":
        if request.sub_resource not in ("", "ephemeralcontainers"):
            return Decision(skipped=f"Pod {request.sub_resource} updates are not judged")
        decision = _new_findings_only(request, policy_set, inventory, stale, evaluator)
    else:
        decision = evaluator(policy_set, _subject(request, request.obj), inventory, stale=stale)
    if decision.invalid is not None:
        raise WorkloadError(decision.invalid)
    if decision.error is not None:
        raise EvaluationError(decision.error)
    return decision


def _subject(request: AdmissionRequest, obj: Mapping[str, Any]) -> Subject:
    # The request's namespace is the one the object is created in (the apiserver takes it
    # from the URL); "" for a cluster-scoped object, which then falls back like a file.
    # Who asks and the object before an UPDATE go to every check (its Context); the
    # evaluation cache leaves alone what a check that reads them judges.
    return subject_of(
        obj,
        namespace=request.namespace,
        operation=request.operation,
        user=request.user_info or {},
        old=request.old_obj,
    )


def _new_findings_only(
    request: AdmissionRequest,
    policy_set: PolicySet,
    inventory: Inventory,
    stale: Staleness | None,
    evaluator: Evaluator,
) -> Decision:
    # `kubectl debug` adds ephemeral containers to a running Pod, and `kubectl annotate`
    # adds annotations a node plugin reads at the next sandbox: judge what it adds, not
    # the Pod that was admitted long ago under perhaps other policies.
    assert request.obj is not None
    new = evaluator(policy_set, _subject(request, request.obj), inventory, stale=stale)
    if request.old_obj is None:
        return new
    old = evaluator(policy_set, _subject(request, request.old_obj), inventory, stale=stale)
    seen = {(f.policy, f.rule, f.message) for f in old.findings}
    fresh = tuple(f for f in new.findings if (f.policy, f.rule, f.message) not in seen)
    return Decision(fresh, new.skipped, new.pod_specs, new.error or old.error, new.invalid)


def allowed_bytes(request_uid: str) -> bytes:
    """What `response` says, serialised, for a decision without findings (nearly all):
    the same bytes as orjson.dumps of it, without building the dicts."""
    return _ALLOWED_HEAD + orjson.dumps(request_uid) + _ALLOWED_TAIL


_ALLOWED_HEAD = b'{"apiVersion":"%s","kind":"AdmissionReview","response":{"uid":' % (
    API_VERSION.encode()
)
_ALLOWED_TAIL = b',"allowed":true}}'


def response(request_uid: str, decision: Decision, *, subject: str) -> dict[str, Any]:
    """The AdmissionReview the apiserver expects back."""
    body: dict[str, Any] = {"uid": request_uid, "allowed": not decision.denied}
    denies = decision.by_action("deny")
    if denies:
        body["status"] = {
            "code": 403,
            "reason": "Forbidden",
            "message": deny_message(denies, subject=subject),
        }
    warnings = warning_lines(decision.by_action("warn"))
    if warnings:
        body["warnings"] = warnings
    audit = audit_annotations(decision.by_action("dryrun"))
    if audit:
        body["auditAnnotations"] = audit
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": body}


def deny_message(findings: tuple[Finding, ...], *, subject: str) -> str:
    # The user sees one message whichever webhook denies: list every violation in it
    # that fits the budget, and count the rest.
    count = f"{len(findings)} GPU policy violation{'' if len(findings) == 1 else 's'}"
    lines = [f"{clip(subject, 300)} has {count}:"]
    used = len(lines[0])
    for index, f in enumerate(findings):
        line = f"[{f.policy}/{f.rule}] {f.message}"
        if used + len(line) > DENY_BUDGET:
            lines.append(f"... {len(findings) - index} more GPU policy violations not shown")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def warning_lines(findings: tuple[Finding, ...]) -> list[str]:
    """One finding per warning, wrapped into lines kubectl shows whole (no control chars)."""
    out: list[str] = []
    used = 0
    for index, f in enumerate(findings):
        text = _CONTROL.sub(" ", f"[{f.policy}/{f.rule}] {f.message}")
        lines = textwrap.wrap(text, WARNING_WIDTH, subsequent_indent="  ") or [text]
        size = sum(len(line) for line in lines)
        if used + size > WARNINGS_BUDGET - 100:
            out.append(f"... {len(findings) - index} more GPU policy warnings not shown")
            break
        out.extend(lines)
        used += size
    return out


def audit_annotations(findings: tuple[Finding, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for f in findings:
        key = _ANNOTATION_KEY.sub("-", f"{f.policy}.{f.rule}")[:63]
        value = f"{out[key]}; {f.message}" if key in out else f.message
        out[key] = clip(value, ANNOTATION_BUDGET)
    return out


def mutation(request: AdmissionRequest) -> dict[str, Any]:
    """The AdmissionReview a mutating call gets back: a Pod CREATE whose containers ask
    for no GPU gets NVIDIA_VISIBLE_DEVICES=void (webhook.core.access.neutralise); the
    rest is allowed unchanged. It never refuses: refusing is the validating entry's."""
    body: dict[str, Any] = {"uid": request.uid, "allowed": True}
    if request.kind == "Pod" and request.operation == "CREATE" and request.obj is not None:
        ops = neutralising_patch(request.obj)
        if ops:
            body["patchType"] = "JSONPatch"
            body["patch"] = base64.b64encode(orjson.dumps(ops)).decode()
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": body}
