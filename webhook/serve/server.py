"""The HTTPS endpoint the kube-apiserver calls: a thin starlette shell around `judge`.

Three outcomes stay apart: a policy decision is HTTP 200 with an AdmissionReview, a
request that is not an AdmissionReview is 400 (413 when too large, 408 when too slow),
and a fault of ours is 500, which the webhook's failurePolicy then decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from webhook.core.engine import Decision, Outcome
from webhook.errors import ReviewError
from webhook.serve import metrics
from webhook.serve.admission import AdmissionRequest, judge, parse_review, response
from webhook.serve.decisionlog import DecisionLog, object_name
from webhook.serve.state import State

log = logging.getLogger("gpu_admission.server")
MAX_BODY = 3 * 1024 * 1024  # the apiserver's own request limit is 3 MiB


class BodyTooLarge(Exception):
    """The request body passed MAX_BODY."""


def verdict_of(decision: Decision) -> Outcome:
    return decision.outcome  # "error" never gets here: judge raised it as a 500


async def read_body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


async def read_body_within(request: Request, timeout: float) -> bytes:
    """read_body, or TimeoutError: a bare timer (half the cost of asyncio.timeout)."""
    task = asyncio.current_task()
    assert task is not None
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        task.cancel()

    timer = asyncio.get_running_loop().call_later(timeout, expire)
    try:
        return await read_body(request)
    except asyncio.CancelledError:
        if expired:
            task.uncancel()
            raise TimeoutError from None
        raise
    finally:
        timer.cancel()


def parse_json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        # orjson stops at 64-bit integers; JSON itself does not. The stdlib reads the
        # rest (NaN and Infinity are not JSON, so they stay errors).
        return json.loads(body, parse_constant=_reject_constant)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _error(status: int, message: str, uid: str | None = None) -> Response:
    body: dict[str, Any] = {"error": message, "code": status}
    if uid:
        body["uid"] = uid
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def create_app(
    state: State,
    *,
    decision_log: DecisionLog | None = None,
    background: Callable[[State], contextlib.AbstractAsyncContextManager[None]] | None = None,
) -> Starlette:
    decisions = decision_log or DecisionLog()

    async def validate(request: Request) -> Response:
        started = time.perf_counter()
        try:
            body = await read_body_within(request, state.settings.body_timeout)
        except BodyTooLarge:
            return _error(413, f"request body over {MAX_BODY} bytes")
        except TimeoutError:
            return _error(408, f"request body not received within {state.settings.body_timeout:g}s")
        try:
            req = parse_review(parse_json(body))
        except (ValueError, RecursionError) as exc:
            return _error(400, f"body is not valid JSON: {exc}")
        except ReviewError as exc:
            return _error(400, f"not a valid AdmissionReview: {exc}")
        try:
            payload, decision = _decide(req, state)
        except Exception:
            log.exception("internal error judging request uid=%s", req.uid)
            metrics.REQUESTS.labels("error", req.kind, req.operation).inc()
            return _error(500, "internal error; see the webhook's log", req.uid)
        verdict = verdict_of(decision)
        decisions.write(req, decision, verdict, state)
        metrics.request_counter(verdict, req.kind, req.operation).inc()
        for f in decision.findings:
            metrics.finding_counter(f.policy, f.rule, f.action).inc()
        metrics.LATENCY.observe(time.perf_counter() - started)
        return Response(payload, media_type="application/json")

    async def healthz(request: Request) -> Response:
        return Response(b"ok", media_type="text/plain")

    async def readyz(request: Request) -> Response:
        age = state.inventory_age()
        body = {
            "ready": state.inventory_synced,
            "policySet": state.policy_set.digest,
            "policies": [p.name for p in state.policy_set.policies],
            "policyReloadError": state.policy_error,
            "inventorySynced": state.inventory_synced,
            "inventoryNodes": len(state.inventory.nodes),
            "inventoryAgeSeconds": None if age is None else round(age, 1),
            "inventoryError": state.inventory_error,
        }
        status = 200 if state.inventory_synced else 503
        return Response(orjson.dumps(body), status_code=status, media_type="application/json")

    async def metrics_endpoint(request: Request) -> Response:
        age = state.inventory_age()
        if age is not None:
            metrics.INVENTORY_AGE.set(age)
        metrics.EVAL_CACHE.labels("hit").set(state.cache.hits)
        metrics.EVAL_CACHE.labels("miss").set(state.cache.misses)
        return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            if background is None:
                yield
            else:
                async with background(state):
                    yield
        finally:
            decisions.flush()  # the last turn's lines, before the process goes

    return Starlette(
        routes=[
            Route("/validate", validate, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
        ],
        lifespan=lifespan,
    )


def _decide(req: AdmissionRequest, state: State) -> tuple[bytes, Decision]:
    decision = judge(
        req,
        policy_set=state.policy_set,
        inventory=state.inventory,
        stale=state.staleness(),
        evaluator=state.cache.evaluate,
    )
    name = req.name or object_name(req) or "(unnamed)"
    where = f"{req.namespace}/{name}" if req.namespace else name
    body = response(req.uid, decision, subject=f"{req.kind} {where}")
    return orjson.dumps(body), decision
