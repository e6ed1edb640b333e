"""A seventh check, declared here, plugs in without an edit to the engine, the pre-filter,
the evaluation cache or a shell: they read what it declares (webhook.core.engine.reads).

Two checks a later issue might add, written as a user would:

- `nccl-sockets` judges pods and reads one env variable (`NCCL_NET`), a trigger none of
  the shipped checks declares: a pod that sets it and asks for no GPU is "plain" to the
  shipped pre-filter, and must not be once the check is loaded;
- `ranks` judges whole workloads (roles and replica counts) and quotes the object's name
  and who asks: the server's cache must key on the name and keep who-asks out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.builders import container, gpu, pod, shipped
from tests.support.reviews import review
from webhook.commands.audit import Auditor
from webhook.commands.check import check_paths
from webhook.commands.diff import diff_objects
from webhook.core.engine.check import Check, CheckParams, Rule
from webhook.core.engine.context import Context
from webhook.core.engine.evaluation import evaluate
from webhook.core.engine.policy import Match, Policy, PolicySet
from webhook.core.engine.reads import Reads
from webhook.core.engine.subject import subject_of
from webhook.core.kit.violation import Violation
from webhook.core.supply.inventory import Inventory
from webhook.core.workloads.kinds import WorkloadView
from webhook.core.workloads.pods import PodView
from webhook.core.workloads.targets import TargetKind
from webhook.serve.admission import judge, parse_review
from webhook.serve.evalcache import EvaluationCache
from webhook.sources.dumps import Sourced

INVENTORY = Inventory.unknown()


@dataclass(frozen=True)
class SocketParams(CheckParams):
    variable: str = "NCCL_NET"


def nccl_sockets(pod: PodView, *, context: Context, params: SocketParams) -> Iterator[Violation]:
    for c in pod.containers:
        for index, env in enumerate(c.spec.get("env") or []):
            if env.get("name") == params.variable and env.get("value") == "Socket":
                yield Violation(
                    "sockets", (*c.path, "env", index), f"{c.label} forces NCCL over sockets"
                )


def socket_reads(params: SocketParams) -> Mapping[TargetKind, Reads]:
    return {"pod": Reads(env=frozenset({params.variable}))}


def ranks(workload: WorkloadView, *, context: Context, params: CheckParams) -> Iterator[Violation]:
    roles = ", ".join(f"{r.name or workload.kind}={r.replicas}" for r in workload.roles)
    user = (context.user or {}).get("username", "nobody")
    yield Violation(
        "ranks", ("spec",), f"{workload.kind} {context.subject.name} asked by {user}: {roles}"
    )


def rank_reads(params: CheckParams) -> Mapping[TargetKind, Reads]:
    return {"workload": Reads(extended_resources=True, names=True, requester=True)}


SOCKETS = Check(
    "nccl-sockets",
    SocketParams,
    nccl_sockets,
    {"sockets": Rule("NCCL forced over sockets.")},
    socket_reads,
)
RANKS = Check("ranks", CheckParams, ranks, {"ranks": Rule("A job's ranks.")}, rank_reads)


def policy(check: Check, params: CheckParams) -> Policy:
    return Policy(check.name, "deny", Match(), check, params, "", "", "tests/core/test_seam.py")


def with_checks(*extra: Policy) -> PolicySet:
    base = shipped()
    return replace(base, policies=(*base.policies, *extra))


SOCKET_POD = pod(container("main", env=[{"name": "NCCL_NET", "value": "Socket"}]), name="s")


def test_what_a_check_declares_is_what_the_prefilter_lets_through() -> None:
    plain = shipped()
    assert plain.prefilter is not None
    assert plain.prefilter.plain_pods(SOCKET_POD) == 1  # nothing a shipped check reads
    assert evaluate(plain, subject_of(SOCKET_POD), INVENTORY).findings == ()

    loaded = with_checks(policy(SOCKETS, SocketParams()))
    assert loaded.prefilter is not None
    assert loaded.prefilter.plain_pods(SOCKET_POD) is None  # its trigger: the engine judges
    decision = evaluate(loaded, subject_of(SOCKET_POD), INVENTORY, prefilter=True)
    assert [(f.policy, f.rule, f.path) for f in decision.findings] == [
        ("nccl-sockets", "sockets", ("spec", "containers", 0, "env", 0))
    ]
    # A parameter names the variable: the filter follows it.
    renamed = with_checks(policy(SOCKETS, SocketParams(variable="NCCL_IB_DISABLE")))
    assert renamed.prefilter is not None and renamed.prefilter.plain_pods(SOCKET_POD) == 1


def test_a_check_of_workloads_sees_roles_and_replicas() -> None:
    loaded = with_checks(policy(RANKS, CheckParams()))
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "serve", "namespace": "ml"},
        "spec": {"replicas": 4, "template": {"metadata": {}, "spec": pod(gpu())["spec"]}},
    }
    decision = evaluate(loaded, subject_of(deployment), INVENTORY)
    ranked = [f.message for f in decision.findings if f.policy == "ranks"]
    assert ranked == ["Deployment serve asked by nobody: Deployment=4"]
    # A Pod without a GPU is not one it reads: plain, and judged by nobody else either.
    assert evaluate(loaded, subject_of(pod(name="cpu")), INVENTORY, prefilter=True).findings == ()


def test_the_cache_keys_on_what_the_checks_read() -> None:
    loaded = with_checks(policy(RANKS, CheckParams()))
    cache = EvaluationCache()

    def asked(name: str, user: str) -> list[str]:
        body = review(pod(gpu(), name=name), namespace="ml")
        body["request"]["userInfo"] = {"username": user}
        decision = judge(
            parse_review(body), policy_set=loaded, inventory=INVENTORY, evaluator=cache.evaluate
        )
        return [f.message for f in decision.findings if f.policy == "ranks"]

    assert asked("a", "alice") == ["Pod a asked by alice: Pod=1"]
    assert asked("b", "alice") == ["Pod b asked by alice: Pod=1"]  # its name: not a's entry
    assert asked("b", "bob") == ["Pod b asked by bob: Pod=1"]  # who asks: never cached
    assert cache.hits == 0

    shipped_only = EvaluationCache()  # the shipped checks read neither: replicas share
    for name in ("a", "b"):
        shipped_only.evaluate(shipped(), subject_of(pod(gpu(), name=name)), INVENTORY)
    assert (shipped_only.hits, shipped_only.misses) == (1, 1)


def test_every_shell_runs_it_as_it_is(tmp_path: Path) -> None:
    loaded = with_checks(policy(SOCKETS, SocketParams()))
    manifest = tmp_path / "pod.json"
    manifest.write_text(__import__("json").dumps(SOCKET_POD))

    found = check_paths([str(manifest)], policy_set=loaded, inventory=INVENTORY)
    assert [(r.finding.rule, r.line) for r in found.results] == [("sockets", 1)]

    auditor = Auditor(loaded, INVENTORY)
    auditor.add(SOCKET_POD)
    assert [e.finding.rule for e in auditor.report().entries] == ["sockets"]

    report = diff_objects([Sourced(SOCKET_POD, "pod.json")], base=shipped(), head=loaded,
                          inventory=INVENTORY)  # fmt: skip
    assert [d.change for d in report.diffs] == ["became-denied"]

    decision = judge(parse_review(review(SOCKET_POD)), policy_set=loaded, inventory=INVENTORY)
    assert [f.rule for f in decision.findings] == ["sockets"]


@pytest.mark.parametrize("kind", ["pod", "unknown"])
def test_a_check_declares_only_known_targets(kind: str) -> None:
    def judges(params: Any) -> Mapping[TargetKind, Reads]:
        return {kind: Reads()}  # type: ignore[dict-item]

    check = Check("x", CheckParams, nccl_sockets, {}, judges)
    if kind == "pod":
        assert list(check.reads(CheckParams())) == ["pod"]
    else:
        with pytest.raises(ValueError, match=r"check x judges unknown targets \['unknown'\]"):
            check.reads(CheckParams())
