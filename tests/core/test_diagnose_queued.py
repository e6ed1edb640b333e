"""A job held by Kueue, through the real Diagnoser with the shipped policies: its
Workload's conditions read back (the flavor and resource that lack quota), never (the
same words as gpu-queues' quota-never-admits), not now (who holds the quota, with their
GPUs, and whether preemption could help), a LocalQueue that does not exist, no Kueue at
all; the Pending Pods of a held job point to its record. The dumps are hand-written
from Kueue v0.19.2's own shapes (tests/data/kueue/diagnose, checked against its CRDs
below); the messages are Kueue's format strings (tests/data/kueue/FACTS.md h)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from tests.support.builders import only, run, shipped
from tests.support.clirun import gpu_admission
from tests.support.fakeapiserver import FakeApiServer
from tests.support.paths import TESTS, TOOLS
from webhook.commands.diagnose import Diagnoser, DiagnoseReport, diagnosis_rules, job_rules
from webhook.core.diagnosis.queued import QueuedRecord, lacks_in
from webhook.core.queues.model import is_queue_object
from webhook.core.supply.inventory import Inventory
from webhook.kube.diagnose import diagnosis_objects
from webhook.sources.files import queue_supply

Obj = dict[str, Any]
DATA = TESTS / "data" / "kueue" / "diagnose"
CRDS = TOOLS / "crds" / "kueue"
NOW = datetime(2026, 12, 7, 12, 0, 0, tzinfo=UTC)
GATE = "kueue.x-k8s.io/admission"
PLURALS = {
    "Workload": "workloads",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "ResourceFlavor": "resourceflavors",
    "Cohort": "cohorts",
}


@cache
def dump(name: str) -> tuple[Obj, ...]:
    return tuple(yaml.safe_load((DATA / f"{name}.yaml").read_text())["items"])


def objects(*names: str) -> list[Obj]:
    return [copy.deepcopy(obj) for name in names for obj in dump(name)]


def named(objs: list[Obj], name: str) -> Obj:
    return next(o for o in objs if o["metadata"]["name"] == name)


def report(*objs: Obj) -> DiagnoseReport:
    policies = shipped()
    d = Diagnoser(rules=diagnosis_rules(policies), jobs=job_rules(policies))
    for obj in objs:
        d.add(obj)
    found = d.report(now=NOW)
    assert found.errors == ()
    return found


def queued(*objs: Obj) -> dict[str, QueuedRecord]:
    return {q.workload.removeprefix("ml/"): q for q in report(*objs).queued}


# -- the test data is Kueue's own shape ---------------------------------------------------


def _schemas() -> dict[tuple[str, str], Obj]:
    out = {}
    for kind, plural in PLURALS.items():
        crd = yaml.safe_load((CRDS / f"kueue.x-k8s.io_{plural}.yaml").read_text())
        for version in crd["spec"]["versions"]:
            out[(kind, version["name"])] = version["schema"]["openAPIV3Schema"]
    return out


def _unknown_fields(value: Any, schema: Obj, path: str) -> Iterator[str]:
    """Field names the schema does not declare (its CRD prunes them: a typo in a test
    Workload would test nothing). Embedded Kubernetes objects (a pod template) are the
    apiserver's to check; Kueue's CRD leaves them open."""
    if isinstance(value, dict):
        props = schema.get("properties")
        if props is None:
            extra = schema.get("additionalProperties")
            for k, v in value.items():
                if isinstance(extra, dict):
                    yield from _unknown_fields(v, extra, f"{path}.{k}")
            return
        for k, v in value.items():
            if k not in props:
                yield f"{path}.{k}"
            elif not (path.endswith(".template") and k == "spec"):
                yield from _unknown_fields(v, props[k], f"{path}.{k}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            yield from _unknown_fields(item, schema["items"], f"{path}[{i}]")


@pytest.mark.skipif(not CRDS.exists(), reason=f"Kueue's CRDs not found at {CRDS}")
@pytest.mark.parametrize("name", ["queues", "not-now", "never", "no-local-queue"])
def test_the_dumps_follow_kueues_crds(name: str) -> None:
    import jsonschema

    schemas = _schemas()
    checked = 0
    for obj in dump(name):
        group, _, version = obj["apiVersion"].partition("/")
        if group != "kueue.x-k8s.io":
            continue
        schema = schemas[(obj["kind"], version)]
        jsonschema.validate(obj, schema)
        assert list(_unknown_fields(obj, schema, obj["kind"])) == []
        checked += 1
    assert checked


# -- Kueue's message read back --------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "lacks"),
    [
        ("couldn't assign flavors to pod set main: insufficient unused quota for "
         "nvidia.com/gpu in flavor a100, 4 more needed",
         [("main", "unused", "nvidia.com/gpu", "a100", 4)]),
        ("couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in "
         "flavor a100, previously considered podsets requests (0) + current podset request "
         "(16) > maximum capacity (8)",
         [("main", "max", "nvidia.com/gpu", "a100", 8)]),
        # Reasons of every flavor tried, sorted and joined by ", "; pod sets by "; ".
        ("couldn't assign flavors to pod set driver: resource nvidia.com/mig-1g.10gb "
         "unavailable in ClusterQueue; couldn't assign flavors to pod set workers: "
         "insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed, "
         "untolerated taint {spot true NoSchedule <nil>} in flavor spot. Pending the "
         "preemption of 1 workload(s)",
         [("driver", "uncovered", "nvidia.com/mig-1g.10gb", "", None),
          ("workers", "unused", "nvidia.com/gpu", "h100", 8),
          ("workers", "taint", "", "spot", None)]),
        ("couldn't assign flavors to pod set main: flavor a100 doesn't match node affinity, "
         "flavor h100 not found, insufficient unused quota for memory in flavor default-flavor, "
         "4396Mi more needed",
         [("main", "affinity", "", "a100", None), ("main", "missing", "", "h100", None),
          ("main", "unused", "memory", "default-flavor", 4396 * 2**20)]),
        ("LocalQueue team-x doesn't exist", []),
    ],
)  # fmt: skip
def test_kueues_message_read_back(message: str, lacks: list[tuple[Any, ...]]) -> None:
    found = [(x.pod_set, x.kind, x.resource, x.flavor, x.needed) for x in lacks_in(message)]
    assert found == lacks


# -- the records ----------------------------------------------------------------------------

NOT_NOW = (
    "The Job (queue ml/team-a) fits ClusterQueue team-a's quota, but not now: Kueue needs 4 "
    "more nvidia.com/gpu in flavor a100 than is unused now. 2 admitted Workloads hold it: "
    "ml/job-train-a-7c2d9 (Job ml/train-a) 4 nvidia.com/gpu, ml/job-eval-b-3f81e (Job "
    "ml/eval-b) 2 nvidia.com/gpu. "
)
OFF = (
    "Preemption is off in ClusterQueue team-a (withinClusterQueue Never, reclaimWithinCohort "
    "Never, Kueue's default): the job waits until the Workloads holding the quota finish."
)
NEVER = (
    "The Job (queue ml/team-a) asks 16 nvidia.com/gpu in all (pod set main: 2 x 8); "
    "ClusterQueue team-a gives at most 8 nvidia.com/gpu in flavor a100 (nominal 8, cohort "
    "lends 0): Kueue can never admit it, however long it waits (\"couldn't assign flavors to "
    "pod set main: insufficient quota for nvidia.com/gpu in flavor a100, previously "
    'considered podsets requests (0) + current podset request (16) > maximum capacity (8)"). '
    "Ask for less, or raise the quota or what the cohort may lend."
)


def _preempting(objs: list[Obj], within: str, priorities: dict[str, int]) -> list[Obj]:
    named(objs, "team-a")["spec"]["preemption"] = {"withinClusterQueue": within}
    for name, priority in priorities.items():
        named(objs, name)["spec"]["priority"] = priority
    return objs


@pytest.mark.parametrize(
    ("objs", "workload", "state", "verdict", "next_action"),
    [
        pytest.param(
            objects("queues", "not-now"), "job-train-c-5e8f1", "not-now", NOT_NOW + OFF,
            "wait for ml/job-train-a-7c2d9 and ml/job-eval-b-3f81e to finish, or raise "
            "ClusterQueue team-a's nominalQuota for nvidia.com/gpu in flavor a100; to let an "
            "urgent job go first, set the ClusterQueue's spec.preemption.withinClusterQueue: "
            "LowerPriority and give the job a higher WorkloadPriorityClass",
            id="not now: held by two admitted Workloads, preemption off",
        ),
        pytest.param(
            _preempting(objects("queues", "not-now"), "LowerPriority",
                        {"job-train-c-5e8f1": 100}),
            "job-train-c-5e8f1", "not-now",
            NOT_NOW + "Preemption could make room (withinClusterQueue LowerPriority, "
            "reclaimWithinCohort Never): Kueue may evict ml/job-train-a-7c2d9 and "
            "ml/job-eval-b-3f81e, which hold 6 nvidia.com/gpu in flavor a100, for the 4 more "
            "needed.",
            "wait: Kueue preempts the lower-priority Workloads named for it",
            id="not now: preemption could make room",
        ),
        pytest.param(
            _preempting(objects("queues", "not-now"), "LowerPriority",
                        {"job-train-c-5e8f1": 100, "job-train-a-7c2d9": 200}),
            "job-train-c-5e8f1", "not-now",
            NOT_NOW + "Preemption cannot make room (withinClusterQueue LowerPriority, "
            "reclaimWithinCohort Never): the Workloads it may evict hold 2 of the 4 "
            "nvidia.com/gpu more needed in flavor a100: the job waits until others finish.",
            "wait for ml/job-train-a-7c2d9 and ml/job-eval-b-3f81e to finish, or raise "
            "ClusterQueue team-a's nominalQuota for nvidia.com/gpu in flavor a100",
            id="not now: the Workloads it may preempt hold too little",
        ),
        pytest.param(
            objects("queues", "never"), "job-big-91d3a", "never", NEVER,
            "ask for less nvidia.com/gpu, or raise ClusterQueue team-a's nominalQuota for it "
            "in flavor a100 or what its cohort may lend",
            id="never: the quota is too small",
        ),
        pytest.param(
            [o for o in objects("queues", "never") if o["kind"] != "Job"],
            "job-big-91d3a", "never", NEVER,
            "ask for less nvidia.com/gpu, or raise ClusterQueue team-a's nominalQuota for it "
            "in flavor a100 or what its cohort may lend",
            id="never: the Workload alone (its spec.podSets), the same words",
        ),
        pytest.param(
            objects("never"), "job-big-91d3a", "never",
            "The Job (queue ml/team-a) can never be admitted, by Kueue's own account "
            "(\"couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu "
            "in flavor a100, previously considered podsets requests (0) + current podset "
            'request (16) > maximum capacity (8)"). Ask for less, or raise the quota or what '
            "the cohort may lend.",
            "ask for less nvidia.com/gpu, or raise its ClusterQueue's nominalQuota for it in "
            "flavor a100 or what its cohort may lend",
            id="never: no queue objects read, Kueue's condition alone",
        ),
        pytest.param(
            objects("queues", "no-local-queue"), "job-lost-c40b7", "inadmissible",
            "The Job names LocalQueue 'team-x', which does not exist in namespace ml "
            "(LocalQueues there: team-a): Kueue keeps its Workload inadmissible (\"LocalQueue "
            "team-x doesn't exist\"). Name one of them, or create it.",
            "set the job's kueue.x-k8s.io/queue-name label to a LocalQueue of ml (team-a), or "
            "create LocalQueue ml/team-x",
            id="LocalQueue missing (Inadmissible)",
        ),
        pytest.param(
            objects("no-local-queue"), "job-lost-c40b7", "inadmissible",
            "Kueue finds the Job's Workload inadmissible: LocalQueue team-x doesn't exist.",
            "fix the LocalQueue or ClusterQueue Kueue names (kubectl get "
            "localqueues,clusterqueues -n ml)",
            id="LocalQueue missing, Kueue's condition alone",
        ),
    ],
)  # fmt: skip
def test_queued_records(
    objs: list[Obj], workload: str, state: str, verdict: str, next_action: str
) -> None:
    found = queued(*objs)[workload]
    assert (found.state, found.verdict, found.next_action) == (state, verdict, next_action)
    assert found.stuck


def test_not_now_names_who_holds_the_quota() -> None:
    found = queued(*objects("queues", "not-now"))["job-train-c-5e8f1"]
    assert (found.job, found.local_queue, found.cluster_queue) == (
        "Job ml/train-c",
        "team-a",
        "team-a",
    )
    assert found.condition is not None and found.condition.reason == "Pending"
    assert found.condition.since == datetime(2026, 12, 7, 11, 0, 1, tzinfo=UTC)
    assert [(h.workload, h.usage[("a100", "nvidia.com/gpu")]) for h in found.held_by] == [
        ("ml/job-train-a-7c2d9", 4),
        ("ml/job-eval-b-3f81e", 2),
    ]
    assert [(u.nominal, u.most, u.used, u.borrowed) for u in found.quota] == [(8, 8, 6, 0)]
    assert dict(found.requests) == {"nvidia.com/gpu": "6", "cpu": "8", "memory": "64Gi"}
    assert found.commands == (
        "kubectl get workloads -n ml",
        "kubectl describe workload -n ml job-train-c-5e8f1",
        "kubectl get clusterqueue team-a -o yaml",
        "kubectl describe workload -n ml job-train-a-7c2d9",
        "kubectl describe workload -n ml job-eval-b-3f81e",
        "kubectl describe job -n ml train-c",
    )


def test_never_says_what_check_says() -> None:
    """The same words as gpu-queues' quota-never-admits on the same job and queues."""
    objs = objects("queues", "never")
    supply = queue_supply(o for o in objs if is_queue_object(o))
    inventory = Inventory.unknown().with_queues(supply)
    decision = run(only("gpu-queues"), named(objs, "big"), inventory, namespace="ml")
    assert [f.message for f in decision.findings] == [NEVER]
    assert queued(*objs)["job-big-91d3a"].verdict == NEVER


@pytest.mark.parametrize(
    ("pod", "verdict"),
    [
        ("notebook", "Kueue holds the Pod: its Workload ml/pod-notebook-2b7c4 is not admitted "
         "(not-now; the queued record says why), so Kueue's scheduling gate "
         "kueue.x-k8s.io/admission stays and the scheduler does not try the Pod"),
        ("train-c-0-x7k2p", "Kueue holds the Pod's Job ml/train-c: its Workload "
         "ml/job-train-c-5e8f1 is not admitted (not-now; the queued record says why), and "
         "Kueue keeps the job suspended: its Pods do not run until then"),
    ],
)  # fmt: skip
def test_pending_pods_of_a_held_job_point_to_its_record(pod: str, verdict: str) -> None:
    found = report(*objects("queues", "not-now"))
    record = next(r for r in found.records if r.pod == f"ml/{pod}")
    held = next(q for q in found.queued if f"ml/{pod}" in q.pods)
    assert (record.domain, record.verdict) == ("gated", verdict)
    assert record.next_action == held.next_action
    assert record.facts[0].about == f"Workload {held.workload}"
    assert record.candidates == 0


def test_no_kueue_no_record_no_error() -> None:
    objs = [o for o in objects("queues") if o["kind"] == "Node"]
    objs.append(copy.deepcopy(named(objects("not-now"), "notebook")))
    del objs[-1]["spec"]["schedulingGates"]
    found = report(*objs)
    assert found.queued == ()
    assert [r.domain for r in found.records] == ["not-stuck"]
    assert found.notes == () and found.exit_code == 0


def test_admitted_and_finished_workloads_are_not_queued() -> None:
    objs = objects("queues", "never")
    big = named(objs, "job-big-91d3a")
    big["status"]["conditions"] = [
        {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done",
         "lastTransitionTime": "2026-12-07T11:40:00Z"},
    ]  # fmt: skip
    assert report(*objs).queued == ()


# -- the shells ---------------------------------------------------------------------------


def test_cli_json_from_a_dump() -> None:
    proc = gpu_admission(
        "diagnose", "--from", str(DATA / "queues.yaml"), "--from", str(DATA / "not-now.yaml"),
        "-o", "json",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    records = json.loads(proc.stdout)
    assert [(r["type"], r.get("pod") or r.get("workload")) for r in records] == [
        ("pod", "ml/notebook"),
        ("pod", "ml/train-c-0-x7k2p"),
        ("queued", "ml/job-train-c-5e8f1"),
        ("queued", "ml/pod-notebook-2b7c4"),
    ]
    held = records[2]
    assert held["state"] == "not-now"
    assert held["verdict"] == NOT_NOW + OFF
    assert held["time"] == "2026-12-07T11:30:01Z"  # the newest time in the dump
    assert held["condition"] == {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "Pending",
        "message": "couldn't assign flavors to pod set main: insufficient unused quota for "
        "nvidia.com/gpu in flavor a100, 4 more needed",
        "since": "2026-12-07T11:00:01Z",
    }
    assert held["lacking"] == [
        {"pod_set": "main", "reason": "unused", "resource": "nvidia.com/gpu", "flavor": "a100",
         "needed": "4", "kueue": "insufficient unused quota for nvidia.com/gpu in flavor a100, "
         "4 more needed"},
    ]  # fmt: skip
    assert [(h["workload"], h["usage"][-1]) for h in held["held_by"]] == [
        ("ml/job-train-a-7c2d9", {"flavor": "a100", "resource": "nvidia.com/gpu", "amount": "4"}),
        ("ml/job-eval-b-3f81e", {"flavor": "a100", "resource": "nvidia.com/gpu", "amount": "2"}),
    ]
    assert held["pods"] == ["ml/train-c-0-x7k2p"]
    assert records[0]["job"] == "Pod ml/notebook" and records[1]["job"] == "Job ml/train-c"


# -- live: the API's Workloads, and a cluster without Kueue ---------------------------------


def _live(api: FakeApiServer) -> DiagnoseReport:
    policies = shipped()
    d = Diagnoser(rules=diagnosis_rules(policies), jobs=job_rules(policies))
    with k8s.ApiClient(api.configuration()) as client:
        for item in diagnosis_objects(
            client, page_size=50, errors=d.errors, notes=d.notes, listed=d.dra.listed
        ):
            d.add(item.obj, location=item.location)
    return d.report(now=NOW)


def _served(api: FakeApiServer, objs: list[Obj], kueue: bool) -> None:
    for key, kind, namespaced in (
        (("", "v1", "nodes"), "Node", False),
        (("", "v1", "pods"), "Pod", True),
        (("", "v1", "events"), "Event", True),
    ):
        api.serve(*key, kind, namespaced=namespaced)
    if kueue:
        for kind, plural in PLURALS.items():
            scoped = kind in ("Workload", "LocalQueue")
            api.serve("kueue.x-k8s.io", "v1beta2", plural, kind, namespaced=scoped)
    for obj in objs:
        group, _, version = obj["apiVersion"].rpartition("/")
        plural = PLURALS.get(obj["kind"], obj["kind"].lower() + "s")
        if kueue or not group:
            api.put((group, version, plural), obj)


def test_live_workloads(tmp_path: Path) -> None:
    objs = [o for o in objects("queues", "not-now") if o["kind"] != "Job"]
    with FakeApiServer() as api:
        _served(api, objs, kueue=True)
        found = _live(api)
    assert found.errors == ()
    assert {q.workload: q.state for q in found.queued} == {
        "ml/job-train-c-5e8f1": "not-now",
        "ml/pod-notebook-2b7c4": "not-now",
    }
    assert found.queued[0].verdict == NOT_NOW + OFF


def test_live_without_kueue_is_a_note() -> None:
    objs = [o for o in objects("queues", "not-now") if o["kind"] in ("Node", "Pod")]
    with FakeApiServer() as api:
        _served(api, objs, kueue=False)
        found = _live(api)
    assert found.errors == () and found.queued == ()
    assert (
        "Kueue is not installed (workloads.kueue.x-k8s.io/v1beta2 is not served): no job is queued"
    ) in found.notes
    assert not any("clusterqueues" in n for n in found.notes)


def test_the_docs_show_the_real_output() -> None:
    """docs/diagnose.md pastes these runs: they still print what it shows."""
    text = (TESTS.parent / "docs" / "diagnose.md").read_text()
    section = text.split("## Jobs held by Kueue", 1)[1].split("\n## ", 1)[0]
    blocks = [b.split("```", 1)[0] for b in section.split("```console\n")[1:]]
    assert len(blocks) == 2
    for block in blocks:
        command, _, shown = block.partition("\n")
        args = command.removeprefix("$ gpu-admission ").split()
        proc = gpu_admission(*args, "--no-color")
        assert proc.returncode == 1, proc.stderr
        assert proc.stdout == shown
