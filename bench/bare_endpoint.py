"""The baseline for scripts/bench-serve: a bare starlette+uvicorn admission endpoint.

POST /validate parses the AdmissionReview with orjson and answers allowed, echoing the
uid; nothing else. The same TLS files and stack as `gpu-admission serve` (uvicorn on
httptools and uvloop, no access log; none of serve's connection limits, which cost
about a microsecond a request), so the difference is what the webhook does.

    python bench/bare_endpoint.py --port 9443 --cert tls.crt --key tls.key
"""

from __future__ import annotations

import argparse

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


async def validate(request: Request) -> Response:
    review = orjson.loads(await request.body())
    uid = review["request"]["uid"]
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": True},
    }
    return Response(orjson.dumps(body), media_type="application/json")


async def readyz(request: Request) -> Response:
    return Response(b"ok")


app = Starlette(
    routes=[
        Route("/validate", validate, methods=["POST"]),
        Route("/readyz", readyz),
    ]
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    args = parser.parse_args()
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        ssl_certfile=args.cert,
        ssl_keyfile=args.key,
        http="httptools",
        loop="uvloop",
        log_level="warning",
        access_log=False,
        timeout_keep_alive=30,
        lifespan="off",
    )


if __name__ == "__main__":
    main()
