"""The connection layer answers a small POST /validate that came whole in one read itself,
without an ASGI task (webhook/serve/connections.py); everything else goes through the
app. A client cannot tell the two apart: the same bytes, in the order asked."""

from __future__ import annotations

import time
from collections.abc import Iterator

import orjson
import pytest

from tests.serve.test_serve_connections import connect, read_response, status_and_body
from tests.support.reviews import GOOD_LABELS, VIOLATIONS, pod, review
from tests.support.servers import Server
from webhook.serve.server import INLINE_BODY


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("inline"))
    yield s
    s.stop()


def post(body: bytes) -> bytes:
    return (
        b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )


def test_pipelined_requests_are_answered_in_order_whichever_way_each_is_judged(
    server: Server,
) -> None:
    large = pod(annotations={"note": "x" * (INLINE_BODY + 1000)}, labels=GOOD_LABELS)
    rows = [  # (review, allowed)
        (review(pod(labels=GOOD_LABELS)), True),  # inline
        (review(large), True),  # over INLINE_BODY: on the app's worker thread
        (review(VIOLATIONS[0][1]), False),  # inline, denied
        (review(pod(labels=GOOD_LABELS)), True),  # inline, behind the denial
    ]
    reviews = [r for r, _ in rows]
    with connect(server) as tls:
        tls.sendall(b"".join(post(orjson.dumps(r)) for r in reviews))  # one write
        answers = [read_response(tls) for _ in reviews]
    got = []
    for answer in answers:
        status, body = status_and_body(answer)
        response = orjson.loads(body)["response"]
        got.append((status, response["uid"], response["allowed"]))
    want = [(200, r["request"]["uid"], allowed) for r, allowed in rows]
    assert got == want


def without_date(answer: bytes) -> bytes:
    return b"\r\n".join(line for line in answer.split(b"\r\n") if not line.startswith(b"date:"))


@pytest.mark.parametrize(
    "obj", [pod(labels=GOOD_LABELS), VIOLATIONS[0][1]], ids=["allowed", "denied"]
)
def test_an_answer_is_the_same_whether_its_body_came_with_its_head_or_later(
    server: Server, obj: dict[str, object]
) -> None:
    request = post(orjson.dumps(review(obj)))
    head, _, body = request.partition(b"\r\n\r\n")
    with connect(server) as tls:
        tls.sendall(request)  # whole in one read: answered inline
        inline = read_response(tls)
    with connect(server) as tls:
        tls.sendall(head + b"\r\n\r\n")  # the body later: the app's task waits for it
        time.sleep(0.2)
        tls.sendall(body)
        through_app = read_response(tls)
    assert inline.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"\r\ncontent-type: application/json\r\n" in inline
    assert without_date(inline) == without_date(through_app)
