"""The decision log: one JSON line per admission decision, on stdout by default."""

from __future__ import annotations

import asyncio
import io
import logging
import sys
import time
from collections.abc import Callable
from typing import IO

import orjson

from webhook.core.engine.evaluation import Decision
from webhook.core.workloads.identity import shown_name
from webhook.serve.admission import AdmissionRequest
from webhook.serve.state import State

log = logging.getLogger("gpu_admission.decisions")
LOGGED_FINDINGS = 100  # per decision; a tenant's object can hold 100,000 (they are counted)


class DecisionLog:
    """One JSON line per decision: who asked for what and what we said. Never the object,
    env values or annotation values: findings are logged by policy, rule and path only."""

    def __init__(self, stream: IO[bytes] | None = None, clock: Callable[[], float] = time.time):
        self._stream = buffered(stream if stream is not None else sys.stdout.buffer)
        self._clock = clock
        self._flush_pending = False
        self.lost = 0  # decisions that could not be written

    def write(self, req: AdmissionRequest, decision: Decision, verdict: str, state: State) -> None:
        age = state.inventory_age()
        findings = decision.findings
        entry = {
            "time": self._clock(),
            "uid": req.uid,
            "operation": req.operation,
            "subResource": req.sub_resource or None,
            "kind": req.kind,
            "namespace": req.namespace,
            "name": req.name or object_name(req),
            "user": req.user,
            "dryRun": req.dry_run,
            "decision": verdict,
            "findings": [
                {"policy": f.policy, "rule": f.rule, "action": f.action, "path": f.path}
                for f in findings[:LOGGED_FINDINGS]
            ]
            if findings
            else (),  # nearly always: nothing to build
            "policySet": state.policy_set.digest,
            "inventoryAgeSeconds": None if age is None else round(age, 1),
        }
        if len(findings) > LOGGED_FINDINGS:
            entry["findingsNotLogged"] = len(findings) - LOGGED_FINDINGS
        try:  # tuples are written as JSON arrays
            self._stream.write(orjson.dumps(entry, option=orjson.OPT_APPEND_NEWLINE))
        except (OSError, ValueError) as exc:  # a closed or broken stdout
            self._lost(exc)
            return
        self._flush_soon()

    def _flush_soon(self) -> None:
        # One flush per event-loop turn, not per line: under load one write(2) carries the
        # decisions of every request the turn answered (a flush per line cost 7% of the
        # throughput), and no line waits longer than the turn.
        if self._flush_pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # outside the server (tests, tools): write through
            self.flush()
            return
        self._flush_pending = True
        loop.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_pending = False
        try:
            self._stream.flush()
        except (OSError, ValueError) as exc:
            self._lost(exc)

    def _lost(self, exc: Exception) -> None:
        # Admission goes on without its log rather than failing every Pod in the cluster;
        # say so once, on stderr.
        self.lost += 1
        if self.lost == 1:
            log.error("decision log not writable, decisions are not being logged: %s", exc)


def buffered(stream: IO[bytes]) -> IO[bytes]:
    """The stream, buffered: with PYTHONUNBUFFERED (our image sets it, as Python images
    do) stdout's binary layer is a bare FileIO, and every line would be a write(2) of its
    own instead of one per loop turn. The buffer writes to the same descriptor and never
    closes it."""
    if not isinstance(stream, io.FileIO):
        return stream
    raw = io.FileIO(stream.fileno(), "wb", closefd=False)
    return io.BufferedWriter(raw, buffer_size=1 << 16)


def object_name(req: AdmissionRequest) -> str:
    """The object's name, else its generateName marked as a prefix (`train-*`: a Pod of a
    ReplicaSet has no name yet, and `train-` alone would read as a whole name)."""
    meta = req.obj.get("metadata") if req.obj is not None else None
    return shown_name(meta) if isinstance(meta, dict) else ""  # bounded and printable
