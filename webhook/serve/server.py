"""The HTTPS endpoint the kube-apiserver calls: a thin ASGI shell around `judge`.

POST /validate is a bare ASGI callable in front of starlette, which serves the rest
(the probes, /metrics, and the 405 of /validate for other methods).

Three outcomes stay apart: a policy decision is HTTP 200 with an AdmissionReview, a
request that is not an AdmissionReview is 400 (413 when too large; 408 when too slow,
from the connection layer's body deadline in webhook.serve.connections; 400 too for
JSON nested deeper than bounds.MAX_DEPTH or an object with more pod templates than we
judge), and a fault of ours is 500, which the webhook's failurePolicy then decides.

The event loop answers every request, so none may hold it long: a body over
INLINE_BODY bytes (a Pod is a few KB; a tenant's 3 MB one with 60,000 volumes takes
half a second to judge) is parsed and judged on a worker thread, one at a time, while
the loop goes on with /healthz and the small requests. Those skip the evaluation
cache, which only the loop touches (and which would not keep them anyway). While one is
judged the cyclic garbage collector is paused: it walks every live object, and with a
3 MB body's half a million alive each full collection stopped both threads for 50 to
130 ms. A JSON tree has no cycles; reference counting frees it. And the interpreter
hands the GIL over every millisecond instead of every five, so each wakeup of the loop
waits at most that long. What still holds the GIL throughout is orjson's parse of the
body (a few ms per MB).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from webhook.core.engine.evaluation import Decision, Outcome, evaluate
from webhook.core.engine.warmup import cold_supply
from webhook.errors import ReviewError, WorkloadError
from webhook.serve import metrics
from webhook.serve.admission import (
    AdmissionRequest,
    Evaluator,
    allowed_bytes,
    judge,
    mutation,
    parse_review,
    response,
)
from webhook.serve.decisionlog import DecisionLog, object_name
from webhook.serve.state import State
from webhook.sources.bounds import TooDeep, loads_json, too_deep

log = logging.getLogger("gpu_admission.server")
MAX_BODY = 3 * 1024 * 1024  # the apiserver's own request limit is 3 MiB
INLINE_BODY = 16 * 1024  # judged on the event loop up to this size, on a thread past it


class BodyTooLarge(Exception):
    """The request body passed MAX_BODY."""


def verdict_of(decision: Decision) -> Outcome:
    return decision.outcome  # "error" never gets here: judge raised it as a 500


async def read_body(scope: Scope, receive: Receive) -> bytes:
    """The request body, read from the ASGI messages (BodyTooLarge past MAX_BODY).

    No timer: a body that does not arrive within --body-timeout is the connection
    layer's to answer (webhook.serve.connections sweeps its deadline)."""
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > MAX_BODY:
            raise BodyTooLarge
    message = await receive()
    if message["type"] == "http.request" and not message.get("more_body", False):
        body: bytes = message.get("body", b"")  # nearly always: all of it came with the head
        if len(body) > MAX_BODY:
            raise BodyTooLarge
        return body
    chunks: list[bytes] = []
    size = 0
    while True:
        if message["type"] == "http.disconnect":
            raise ClientDisconnect
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
        message = await receive()


def parse_json(body: bytes) -> Any:
    """The decoded body; ValueError (400) for what is not JSON or nests too deep."""
    try:
        return loads_json(body)
    except orjson.JSONDecodeError:
        pass
    # orjson reads an integer past 64 bits as a float, and gives up past a double's
    # range; JSON itself does not. The stdlib reads the rest (NaN and Infinity are not
    # JSON, so they stay errors; past 4300 digits int() refuses: ValueError too).
    value = json.loads(body, parse_constant=_reject_constant)
    if too_deep(value):
        raise TooDeep
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


Answer = tuple[int, bytes]  # an HTTP status and a JSON body


def _error(status: int, message: str, uid: str | None = None) -> Answer:
    body: dict[str, Any] = {"error": message, "code": status}
    if uid:
        body["uid"] = uid
    return status, orjson.dumps(body)


async def _send(send: Send, answer: Answer) -> None:
    # What starlette's Response sends for a JSON body, without its machinery: the
    # headers in its order, and the body in one message.
    status, body = answer
    headers = [(b"content-length", b"%d" % len(body)), (b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def create_app(
    state: State,
    *,
    decision_log: DecisionLog | None = None,
    background: Callable[[State], contextlib.AbstractAsyncContextManager[None]] | None = None,
) -> WebhookApp:
    decisions = decision_log or DecisionLog()
    large = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpu-admission-large")
    dra = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpu-admission-dra")

    def on_loop(body: bytes, started: float) -> Answer | AdmissionRequest:
        """The answer judged here on the event loop (or the 400 of a body that is none),
        else the request, to be judged off the loop: a claim whose selectors no one asked
        for yet, whose first evaluation walks every published device (most of a second
        at 10,000 devices)."""
        req = _parsed(body)
        if not isinstance(req, AdmissionRequest) or _claim_uncached(req, state):
            return req
        return judged(req, started, state.cache.evaluate, metrics.LOOP)

    def inline(body: bytes) -> Answer | None:
        """For the connection layer, which answers a small body without an ASGI task
        (webhook.serve.connections: ~20 us a request less); None for a body `validate`
        must take (large, or judged off the loop: it parses that one again, rare, and
        dwarfed by the evaluation)."""
        if len(body) > INLINE_BODY:
            return None
        result = on_loop(body, time.perf_counter())
        return None if isinstance(result, AdmissionRequest) else result

    async def validate(scope: Scope, receive: Receive, send: Send) -> None:
        """POST /validate as a bare ASGI callable: starlette's request and response
        objects, router and middleware cost ~14 us a request, a third of the bare
        endpoint's whole floor (bench/serve_handler.py)."""
        started = time.perf_counter()
        try:
            body = await read_body(scope, receive)
        except BodyTooLarge:
            await _send(send, _error(413, f"request body over {MAX_BODY} bytes"))
            return
        loop = asyncio.get_running_loop()
        if len(body) > INLINE_BODY:
            await _send(send, await loop.run_in_executor(large, answer_large, body, started))
            return
        result = on_loop(body, started)
        if isinstance(result, AdmissionRequest):
            result = await loop.run_in_executor(dra, judged, result, started, evaluate, metrics.DRA)
        await _send(send, result)

    def answer_large(body: bytes, started: float) -> Answer:
        with _collector_paused():
            req = _parsed(body)
            if not isinstance(req, AdmissionRequest):  # a 400
                return req
            return judged(req, started, evaluate, metrics.LARGE)

    def judged(
        req: AdmissionRequest, started: float, evaluator: Evaluator, tally: metrics.Tally
    ) -> Answer:
        kind = metrics.kind_label(req.kind, state.policy_set)
        try:
            payload, decision = _decide(req, state, evaluator)
        except WorkloadError as exc:  # an object too large to judge: the request's fault
            tally.request("invalid", kind, req.operation)
            return _error(400, f"object not judged: {exc}", req.uid)
        except Exception:
            log.exception("internal error judging request uid=%s", req.uid)
            tally.request("error", kind, req.operation)
            return _error(500, "internal error; see the webhook's log", req.uid)
        verdict = verdict_of(decision)
        decisions.write(req, decision, verdict, state)
        tally.request(verdict, kind, req.operation)
        if decision.findings:  # most requests have none: no Counter for them
            for (policy, rule, action), n in Counter(
                (f.policy, f.rule, f.action) for f in decision.findings
            ).items():
                tally.finding(policy, rule, action, n)
        tally.observe(time.perf_counter() - started)
        return 200, payload

    async def mutate(request: Request) -> Response:
        """POST /mutate: the optional fix of a container's device-list variable (used
        only where a MutatingWebhookConfiguration points at it; docs/runtime-access.md)."""
        body = await request.body()
        if len(body) > MAX_BODY:
            status, payload = _error(413, f"request body over {MAX_BODY} bytes")
            return Response(payload, status_code=status, media_type="application/json")
        req = _parsed(body)
        if not isinstance(req, AdmissionRequest):
            status, payload = req
            return Response(payload, status_code=status, media_type="application/json")
        answer = mutation(req)
        verdict = "mutate" if "patch" in answer["response"] else "allow"
        metrics.LOOP.request(verdict, metrics.kind_label(req.kind, state.policy_set), req.operation)
        return Response(orjson.dumps(answer), media_type="application/json")

    async def healthz(request: Request) -> Response:
        return Response(b"ok", media_type="text/plain")

    async def readyz(request: Request) -> Response:
        age = state.inventory_age()
        body = {
            "ready": state.ready,
            "policySet": state.policy_set.digest,
            "policies": [p.name for p in state.policy_set.policies],
            "policyReloadError": state.policy_error,
            "inventorySynced": state.inventory_synced,
            "inventoryNodes": state.inventory.node_count,
            "inventoryDraDevices": state.inventory.dra.device_count,
            "inventoryDraPending": sorted(state.dra_pending),
            "inventoryAgeSeconds": None if age is None else round(age, 1),
            "inventoryError": state.inventory_error,
        }
        status = 200 if state.ready else 503
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
            large.shutdown(wait=True, cancel_futures=True)
            dra.shutdown(wait=True, cancel_futures=True)
            decisions.flush()  # the last turn's lines, before the process goes

    routes = Starlette(
        routes=[
            # What is not a POST gets starlette's 405 (an ASGI endpoint keeps `methods`).
            Route("/validate", _Bare(validate), methods=["POST"]),
            Route("/mutate", mutate, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
        ],
        lifespan=lifespan,
    )

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/validate" and scope["method"] == "POST":
            await validate(scope, receive, send)
        else:
            await routes(scope, receive, send)

    return WebhookApp(app, inline)


class WebhookApp:
    """The ASGI app, and `inline`: the answer to a POST /validate body the connection
    layer has whole, or None when it must go through the app (judged off the loop)."""

    __slots__ = ("_app", "inline")

    def __init__(self, app: ASGIApp, inline: Callable[[bytes], Answer | None]) -> None:
        self._app = app
        self.inline = inline

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)


class _Bare:
    """An ASGI callable as a route's endpoint: starlette calls it as it is (a function
    it would wrap in its request/response handling)."""

    def __init__(self, call: ASGIApp) -> None:
        self.call = call

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.call(scope, receive, send)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic collection, and a 1 ms switch interval, while a large body is judged."""
    enabled, interval = gc.isenabled(), sys.getswitchinterval()
    gc.disable()
    sys.setswitchinterval(min(interval, 0.001))
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        if enabled:
            gc.enable()


def _parsed(body: bytes) -> AdmissionRequest | Answer:
    """The request of an AdmissionReview body, or the 400 that says why there is none."""
    try:
        return parse_review(parse_json(body))
    except (ValueError, RecursionError) as exc:
        return _error(400, f"body is not valid JSON: {exc}")
    except ReviewError as exc:
        return _error(400, f"not a valid AdmissionReview: {exc}")


def _claim_uncached(req: AdmissionRequest, state: State) -> bool:
    """Whether judging the request first works out DRA device matches (a claim's, when a
    check reads the supply for claims: webhook.core.engine.warmup)."""
    obj = req.obj
    return obj is not None and cold_supply(state.policy_set, obj, state.inventory)


def _decide(req: AdmissionRequest, state: State, evaluator: Evaluator) -> tuple[bytes, Decision]:
    decision = judge(
        req,
        policy_set=state.policy_set,
        inventory=state.inventory,
        stale=state.staleness(),
        evaluator=evaluator,
    )
    if not decision.findings:
        return allowed_bytes(req.uid), decision
    name = req.name or object_name(req) or "(unnamed)"
    where = f"{req.namespace}/{name}" if req.namespace else name
    body = response(req.uid, decision, subject=f"{req.kind} {where}")
    return orjson.dumps(body), decision
