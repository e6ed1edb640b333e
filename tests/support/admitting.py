"""Objects sent through a real apiserver's admission (dry-run creates), one at a time or
as steady traffic while something changes underneath."""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

Obj = dict[str, Any]
DENIED = 'admission webhook "{}" denied the request:'
UNREACHABLE = 'failed calling webhook "{}"'


@dataclass(frozen=True)
class Outcome:
    status: int  # 201 (dry-run create admitted), else the error's HTTP status
    message: str


def admit(http: httpx.Client, obj: Obj, *, namespace: str) -> Outcome:
    """Create `obj` with dryRun=All: every admission stage runs, nothing is stored."""
    body = copy.deepcopy(obj)
    body["metadata"]["namespace"] = namespace
    group = {"Pod": "/api/v1", "Deployment": "/apis/apps/v1"}[body["kind"]]
    plural = body["kind"].lower() + "s"
    response = http.post(
        f"{group}/namespaces/{namespace}/{plural}", params={"dryRun": "All"}, json=body
    )
    if response.status_code == 201:
        return Outcome(201, "")
    return Outcome(response.status_code, str(response.json().get("message", "")))


def expected(outcome: Outcome, *, webhook: str | None, rule: str | None) -> bool:
    """Admitted when no rule is named; else refused by that webhook for that rule."""
    if rule is None:
        return outcome.status == 201
    return (
        outcome.status == 403
        and outcome.message.startswith(DENIED.format(webhook))
        and f"[{rule}]" in outcome.message
    )


@dataclass
class Traffic:
    """Admission requests in a loop (each case in turn) on a thread: every outcome other
    than the expected one is kept, with the phase it happened in."""

    http: httpx.Client
    namespace: str
    cases: list[tuple[Obj, str | None, str | None]]  # (object, webhook, rule)
    phase: str  # the first phase
    counts: dict[str, int] = field(default_factory=dict)
    unexpected: list[tuple[str, Outcome]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Traffic:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(30)

    def during(self, phase: str, *, seconds: float = 0.0) -> None:
        """Name the next phase; with `seconds`, let traffic run that long in it."""
        self.phase = phase
        time.sleep(seconds)

    def _run(self) -> None:
        while not self._stop.is_set():
            for obj, webhook, rule in self.cases:
                phase = self.phase
                outcome = admit(self.http, obj, namespace=self.namespace)
                self.counts[phase] = self.counts.get(phase, 0) + 1
                if not expected(outcome, webhook=webhook, rule=rule):
                    self.unexpected.append((phase, outcome))
                self._stop.wait(0.1)  # steady, not a load test: leave the cores to the rest
