"""The diagnosis without a cluster: scheduler messages, Pod requests, and the domains'
variants a real cluster test does not reach (preemption, a switched-off plugin, MIG
single strategy, stale events, DRA claims), through the real Diagnoser."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.clirun import gpu_admission
from webhook.commands.diagnose import Diagnoser, diagnosis_rules
from webhook.core.diagnosis.evidence import Evidence
from webhook.core.diagnosis.scheduler import parse_message
from webhook.core.workloads.podrequests import pod_requests
from webhook.core.workloads.units import shown

Obj = dict[str, Any]
NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
GFD = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "8"}


def node(name: str, labels: dict[str, str] | None = None, **allocatable: str) -> Obj:
    alloc = {"cpu": "64", "memory": "512Gi", "pods": "110", **allocatable}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "status": {"allocatable": alloc},
    }


def pod(name: str, limits: dict[str, str], *, phase: str = "Pending", **spec: Any) -> Obj:
    meta = {"name": name, "namespace": "ml", "uid": f"uid-{name}"}
    containers = [{"name": "main", "resources": {"limits": limits}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": containers, **spec},
        "status": {"phase": phase},
    }


def diagnosed(*objects: Obj) -> dict[str, Evidence]:
    d = Diagnoser(rules=diagnosis_rules(None))
    for obj in objects:
        d.add(obj)
    report = d.report(now=NOW)
    assert report.errors == ()
    return {r.pod.removeprefix("ml/"): r for r in report.records}


@pytest.mark.parametrize(
    ("message", "nodes", "reasons", "preemption"),
    [
        (
            "0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 3 Insufficient "
            "nvidia.com/mig-1g.10g. no new claims to deallocate, preemption: 0/3 nodes are "
            "available: 3 Preemption is not helpful for scheduling.",
            3,
            ((1, "Insufficient cpu"), (1, "Insufficient memory"),
             (3, "Insufficient nvidia.com/mig-1g.10g")),
            ((3, "Preemption is not helpful for scheduling"),),
        ),
        (
            "0/2 nodes are available: 2 cannot allocate all claims.",
            2,
            ((2, "cannot allocate all claims"),),
            (),
        ),
        ("no nodes available to schedule pods", None,
         ((0, "no nodes available to schedule pods"),), ()),
    ],
)  # fmt: skip
def test_scheduler_messages(
    message: str, nodes: int | None, reasons: tuple[Any, ...], preemption: tuple[Any, ...]
) -> None:
    parsed = parse_message(message)
    assert (parsed.nodes, parsed.reasons, parsed.preemption) == (nodes, reasons, preemption)


@pytest.mark.parametrize(
    ("message", "domains"),
    [
        ("0/8 nodes are available: request gpu: device class gpu.nvidia.co does not exist. no "
         "new claims to deallocate, preemption: 0/8 nodes are available: 8 Preemption is not "
         "helpful for scheduling.", {"dra-unallocatable"}),
        ("0/8 nodes are available: 1 node(s) were unschedulable, 5 cannot allocate all claims.",
         {"node-unavailable", "dra-unallocatable"}),
    ],
)  # fmt: skip
def test_dra_reasons_of_the_scheduler(message: str, domains: set[str]) -> None:
    assert parse_message(message).domains() == domains


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # A limit alone is the request; requests win where given.
        ({"containers": [{"resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}}}]},
         {"cpu": "2", "nvidia.com/gpu": "1", "pods": "1"}),
        # The largest init step against the sum of the containers.
        ({"initContainers": [{"resources": {"requests": {"cpu": "4", "memory": "1Gi"}}}],
          "containers": [{"resources": {"requests": {"cpu": "500m", "memory": "2Gi"}}},
                         {"resources": {"requests": {"cpu": "500m"}}}]},
         {"cpu": "4", "memory": "2Gi", "pods": "1"}),
        # A sidecar runs beside the containers and every later init container.
        ({"initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                             {"resources": {"requests": {"cpu": "2"}}}],
          "containers": [{"resources": {"requests": {"cpu": "1"}}}]},
         {"cpu": "3", "pods": "1"}),
        # Pod-level requests for cpu and memory, then the overhead on top.
        ({"resources": {"requests": {"cpu": "8"}}, "overhead": {"cpu": "250m"},
          "containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
         {"cpu": "8250m", "memory": "1Gi", "pods": "1"}),
    ],
)  # fmt: skip
def test_pod_requests_as_the_scheduler_counts_them(spec: Obj, expected: dict[str, str]) -> None:
    assert {r: shown(r, n) for r, n in pod_requests(spec).items()} == expected


def test_preemption_could_help_when_lower_priority_pods_hold_the_room() -> None:
    found = diagnosed(
        node("gpu-a", GFD, **{"nvidia.com/gpu": "8"}),
        pod("batch", {"nvidia.com/gpu": "8"}, phase="Running", nodeName="gpu-a", priority=10),
        pod("urgent", {"nvidia.com/gpu": "4"}, priority=1000),
        pod("patient", {"nvidia.com/gpu": "4"}, priority=1000, preemptionPolicy="Never"),
    )
    assert found["urgent"].domain == "capacity-exhausted"
    assert found["urgent"].verdict.endswith(
        "preemption could help: evicting Pods of lower priority on node gpu-a makes room"
    )
    assert found["urgent"].next_action == (
        "wait for nvidia.com/gpu to free up on node gpu-a (held by ml/batch), or add nodes; the "
        "scheduler should preempt lower-priority Pods on node gpu-a; if it does not, a "
        "PodDisruptionBudget may protect them"
    )
    assert found["patient"].verdict.endswith(
        "preemption cannot help: the Pod's preemptionPolicy is Never"
    )


@pytest.mark.parametrize(
    ("labels", "domain", "action"),
    [
        ({**GFD, "nvidia.com/gpu.deploy.device-plugin": "false"}, "plugin-not-registered",
         "the device plugin is switched off on node gpu-a: if the node should serve GPUs, "
         "kubectl label node gpu-a nvidia.com/gpu.deploy.device-plugin=true --overwrite"),
        (GFD, "plugin-not-registered",
         "restart the device plugin on node gpu-a and check that it registers nvidia.com/gpu "
         "with the kubelet (kubectl get pods -A -o wide --field-selector spec.nodeName=gpu-a "
         "shows its Pod)"),
        ({**GFD, "nvidia.com/mig.config.state": "pending", "nvidia.com/mig.config": "all-1g.10gb"},
         "mig-reconfiguring",
         "wait for the MIG manager on node gpu-a (state=pending); if it stays there, read its "
         "logs (kubectl logs -n <GPU Operator namespace> -l app=nvidia-mig-manager): a GPU Pod "
         "that does not terminate blocks it (kubectl get pods -A --field-selector "
         "spec.nodeName=gpu-a)"),
        ({}, "name-not-advertised",
         "no node advertises any nvidia.com/ resource: install the device plugin (or the GPU "
         "Operator) on the GPU nodes"),
    ],
)  # fmt: skip
def test_why_no_node_offers_a_gpu(labels: dict[str, str], domain: str, action: str) -> None:
    found = diagnosed(node("gpu-a", labels), pod("train", {"nvidia.com/gpu": "1"}))
    assert (found["train"].domain, found["train"].next_action) == (domain, action)


def test_a_mig_layout_without_the_profile_is_named() -> None:
    labels = {
        **GFD,
        "nvidia.com/mig.config.state": "pending",
        "nvidia.com/mig.config": "all-1g.10gb",
    }
    found = diagnosed(node("gpu-a", labels), pod("train", {"nvidia.com/mig-3g.40gb": "1"}))
    assert found["train"].verdict == (
        "the MIG manager is reconfiguring node gpu-a (label nvidia.com/mig.config.state=pending), "
        "which offers no nvidia.com/mig-3g.40gb meanwhile, and no other node offers it; the "
        "layout it applies (nvidia.com/mig.config=all-1g.10gb) has no 3g.40gb slices either"
    )


@pytest.mark.parametrize(
    ("labels", "allocatable", "asks", "action"),
    [
        # MIG single strategy: the slices are advertised as nvidia.com/gpu.
        ({"nvidia.com/mig.strategy": "single",
          "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"},
         {"nvidia.com/gpu": "56"}, "nvidia.com/mig-1g.10gb",
         "request nvidia.com/gpu instead of nvidia.com/mig-1g.10gb and select those nodes with "
         "nodeSelector nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"),
        # MIG mixed strategy: whole GPUs are not offered, slices are.
        ({"nvidia.com/mig.strategy": "mixed"},
         {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "14", "nvidia.com/mig-3g.40gb": "4"},
         "nvidia.com/gpu",
         "request a MIG slice instead: nvidia.com/mig-1g.10gb, nvidia.com/mig-3g.40gb"),
        ({}, {"nvidia.com/gpu": "8"}, "nvidia.com/gpu.shared",
         "fix the resource name to nvidia.com/gpu"),
    ],
)  # fmt: skip
def test_names_not_advertised(
    labels: dict[str, str], allocatable: dict[str, str], asks: str, action: str
) -> None:
    found = diagnosed(node("gpu-a", {**GFD, **labels}, **allocatable), pod("train", {asks: "1"}))
    assert (found["train"].domain, found["train"].next_action) == ("name-not-advertised", action)


def event(name: str, message: str, at: str, uid: str = "") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "reason": "FailedScheduling",
        "message": message,
        "involvedObject": {"kind": "Pod", "namespace": "ml", "name": name, "uid": uid},
        "eventTime": at,
    }


def test_the_latest_event_of_this_pod_is_the_evidence_and_a_stale_one_disagrees() -> None:
    full = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    found = diagnosed(
        node("gpu-a", GFD, **{"nvidia.com/gpu": "8"}),
        event("train", full, "2026-12-01T11:59:00Z", "uid-train"),
        event("train", "0/1 nodes are available: 1 node(s) were unschedulable.",
              "2026-12-01T11:58:00Z"),
        event("other", full, "2026-12-01T11:59:30Z", "uid-of-an-earlier-pod"),
        pod("train", {"nvidia.com/gpu": "1"}),
        pod("other", {"nvidia.com/gpu": "1"}),
    )  # fmt: skip
    train = found["train"]
    assert (train.domain, train.scheduler_message, train.agreement) == (
        "not-stuck", full, "disagrees",
    )  # fmt: skip
    assert train.disagreement == (
        "the scheduler's last attempt failed, but the Pod fits now: the cluster changed since (a "
        "Pod ended, a node came back or was added)"
    )
    assert (found["other"].scheduler_message, found["other"].agreement) == (None, "no-event")


def test_a_pod_asking_through_env_only_is_judged_on_cpu_and_placement() -> None:
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    spec = {"containers": [{"name": "main", "env": env, "resources": {"requests": {"cpu": "100"}}}]}
    obj = {**pod("sneaky", {}), "spec": spec}
    found = diagnosed(
        node("gpu-a", GFD, **{"nvidia.com/gpu": "8"}), obj, pod("quiet", {"cpu": "1"})
    )
    assert sorted(found) == ["sneaky"]  # no GPU asked through any channel: not diagnosed
    assert found["sneaky"].domain == "exceeds-any-node"
    assert found["sneaky"].next_action == (
        "request at most 64 cpu (node gpu-a's allocatable), or add nodes that have more"
    )


def dra_pod(name: str, source: str = "resourceClaimTemplateName", claim: str = "one-gpu") -> Obj:
    spec = {
        "containers": [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}],
        "resourceClaims": [{"name": "gpu", source: claim}],
    }
    return {**pod(name, {}), "spec": spec}


def device_class(name: str = "gpu.nvidia.com") -> Obj:
    cel = f"device.driver == '{name}'"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": cel}}]},
    }


def resource_slice(node_name: str, *products: str) -> Obj:
    devices = [
        {"name": f"gpu-{i}", "attributes": {"productName": {"string": product}}}
        for i, product in enumerate(products)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpu.nvidia.com"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def claim_spec(device_class: str, selector: str = "", count: int = 1) -> Obj:
    exactly: Obj = {"deviceClassName": device_class, "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def template(name: str, spec: Obj) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"spec": spec},
    }


def claim(name: str, spec: Obj, *, holds: tuple[str, ...] = (), owner: str = "") -> Obj:
    meta: Obj = {"name": name, "namespace": "ml"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": "u"}]
    obj: Obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": spec,
    }
    if holds:
        results = [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "gpu-a", "device": d}
            for d in holds
        ]
        obj["status"] = {"allocation": {"devices": {"results": results}}}
    return obj


A100 = "NVIDIA A100-SXM4-80GB"
PRODUCT = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-40GB'"
SUPPLY = (node("gpu-a"), device_class(), resource_slice("gpu-a", A100, A100))


@pytest.mark.parametrize(
    ("objects", "verdict", "action"),
    [
        ((template("one-gpu", claim_spec("gpu.nvidia.co")),),
         'claim "gpu" (ResourceClaimTemplate ml/one-gpu) request "gpu" names DeviceClass '
         "gpu.nvidia.co, which does not exist (did you mean gpu.nvidia.com?)",
         "fix the DeviceClass name to gpu.nvidia.com in ResourceClaimTemplate ml/one-gpu"),
        ((template("one-gpu", claim_spec("gpu.nvidia.com", PRODUCT)),),
         'claim "gpu" (ResourceClaimTemplate ml/one-gpu) request "gpu": no device of class '
         "gpu.nvidia.com matches its selectors (2 devices of the class, 2 devices published)",
         "fix the selector in ResourceClaimTemplate ml/one-gpu: productName is "
         "NVIDIA A100-SXM4-80GB on the published devices, not 'NVIDIA A100-SXM4-40GB'"),
        ((template("one-gpu", claim_spec("gpu.nvidia.com", count=3)),),
         'claim "gpu" (ResourceClaimTemplate ml/one-gpu) request "gpu" asks for 3 devices of '
         "class gpu.nvidia.com; the most that match on one node is 2 (gpu-a), and all devices "
         "of a claim come from one node",
         "ask for at most 2 devices in ResourceClaimTemplate ml/one-gpu, or add nodes with more"),
        ((template("one-gpu", claim_spec("gpu.nvidia.com")),
          claim("a", claim_spec("gpu.nvidia.com"), holds=("gpu-0",)),
          claim("b-gpu-x7", claim_spec("gpu.nvidia.com"), holds=("gpu-1",), owner="b")),
         'claim "gpu" (ResourceClaimTemplate ml/one-gpu) request "gpu" asks for 1 device of '
         "class gpu.nvidia.com; 2 devices match, 2 of them allocated (to ResourceClaims ml/a, "
         "ml/b-gpu-x7), and no node has 1 free",
         "wait for the claims holding the devices to be released (ml/a, ml/b-gpu-x7: their Pods "
         "must end and the claims be deallocated), or add devices"),
        ((template("two-gpus", claim_spec("gpu.nvidia.com")),),
         'claim "gpu": ResourceClaimTemplate one-gpu does not exist in namespace ml, so no '
         "claim can be allocated for it",
         "fix resourceClaimTemplateName to two-gpus"),
    ],
)  # fmt: skip
def test_why_claims_cannot_be_allocated(
    objects: tuple[Obj, ...], verdict: str, action: str
) -> None:
    found = diagnosed(*SUPPLY, *objects, dra_pod("dra"))
    assert (found["dra"].domain, found["dra"].verdict, found["dra"].next_action) == (
        "dra-unallocatable", verdict, action,
    )  # fmt: skip


def test_free_devices_on_a_node_the_pod_cannot_use_do_not_help() -> None:
    pinned = dra_pod("dra")
    pinned["spec"]["nodeSelector"] = {"pool": "b"}
    found = diagnosed(
        *SUPPLY,
        node("gpu-b", {"pool": "b"}),
        template("one-gpu", claim_spec("gpu.nvidia.com")),
        pinned,
    )
    assert (found["dra"].domain, found["dra"].verdict, found["dra"].next_action) == (
        "dra-unallocatable",
        'claim "gpu" (ResourceClaimTemplate ml/one-gpu) request "gpu" asks for 1 device of class '
        "gpu.nvidia.com; the nodes with enough free ones (gpu-a) cannot take the Pod (its "
        "placement, cordoned or not Ready, or no room for its other requests)",
        "let the Pod onto gpu-a (its nodeSelector, affinity and tolerations), or free room there",
    )


def tainted_slice(node_name: str, tolerated: bool = False) -> Obj:
    """Both A100s of the node tainted as NVIDIA's DRA driver taints a lost GPU."""
    obj = resource_slice(node_name, A100, A100)
    for device in obj["spec"]["devices"]:
        device["taints"] = [{"key": "gpu.nvidia.com/gpu-lost", "effect": "NoSchedule"}]
    return obj


def test_devices_tainted_and_not_tolerated_are_why_the_claim_waits() -> None:
    found = diagnosed(
        node("gpu-a"),
        device_class(),
        tainted_slice("gpu-a"),
        template("one-gpu", claim_spec("gpu.nvidia.com")),
        dra_pod("dra"),
    )
    assert (found["dra"].domain, found["dra"].verdict, found["dra"].next_action) == (
        "dra-unallocatable",
        'claim "gpu" (ResourceClaimTemplate ml/one-gpu) request "gpu": 2 devices it matches '
        "carry taints it does not tolerate (gpu.nvidia.com/gpu-a/gpu-0 "
        "(gpu.nvidia.com/gpu-lost:NoSchedule), gpu.nvidia.com/gpu-a/gpu-1 "
        "(gpu.nvidia.com/gpu-lost:NoSchedule)), leaving none usable for 1 device, so the "
        "scheduler never allocates the claim",
        "repair or replace the tainted devices (the driver lifts a gpu-lost or XID taint once "
        "the GPU is healthy again), or tolerate in ResourceClaimTemplate ml/one-gpu only a "
        "taint known to be harmless",
    )
    assert "device gpu.nvidia.com/gpu-a/gpu-0: taints = gpu.nvidia.com/gpu-lost:NoSchedule" in [
        str(f) for f in found["dra"].facts
    ]


def test_a_request_that_tolerates_the_taint_is_not_held_up_by_it() -> None:
    spec = claim_spec("gpu.nvidia.com")
    spec["devices"]["requests"][0]["exactly"]["tolerations"] = [
        {"key": "gpu.nvidia.com/gpu-lost", "operator": "Exists", "effect": "NoSchedule"}
    ]
    found = diagnosed(
        node("gpu-a"),
        device_class(),
        tainted_slice("gpu-a"),
        template("one-gpu", spec),
        dra_pod("dra"),
    )
    assert found["dra"].domain == "not-stuck"


def test_claims_that_fit_alone_but_not_together_on_one_node() -> None:
    # Two nodes of 2 A100s; each claim asks for 2: each fits a node alone, and all of a
    # Pod's devices come from the node it lands on, which has 2, not 4.
    both = dra_pod("dra")
    both["spec"]["resourceClaims"].append({"name": "more", "resourceClaimTemplateName": "two"})
    both["spec"]["containers"][0]["resources"]["claims"].append({"name": "more"})
    found = diagnosed(
        node("gpu-a"),
        node("gpu-b"),
        device_class(),
        resource_slice("gpu-a", A100, A100),
        resource_slice("gpu-b", A100, A100),
        template("one-gpu", claim_spec("gpu.nvidia.com", count=2)),
        template("two", claim_spec("gpu.nvidia.com", count=2)),
        both,
    )
    assert (found["dra"].domain, found["dra"].verdict, found["dra"].next_action) == (
        "dra-unallocatable",
        'the Pod\'s claims ask for 4 devices in all (2 for claim "gpu" request "gpu", 2 for '
        'claim "more" request "gpu"), and all of them come from the one node the Pod lands '
        "on; the most one node can give them at once is 2 (gpu-a), so the claims are never "
        "allocated together",
        "ask for at most 2 devices across the Pod's claims, or split the work across Pods",
    )


def test_claim_facts_name_the_request_and_the_holders() -> None:
    found = diagnosed(
        *SUPPLY,
        template("one-gpu", claim_spec("gpu.nvidia.com")),
        claim("a", claim_spec("gpu.nvidia.com"), holds=("gpu-0", "gpu-1")),
        dra_pod("dra"),
    )
    assert [str(f) for f in found["dra"].facts] == [
        "Pod ml/dra: resourceClaims gpu = resourceClaimTemplateName one-gpu",
        "ResourceClaimTemplate ml/one-gpu: request gpu = deviceClassName gpu.nvidia.com",
        "ResourceClaimTemplate ml/one-gpu: request gpu selectors = (none)",
        "device gpu.nvidia.com/gpu-a/gpu-0: allocated to = ResourceClaim ml/a",
        "device gpu.nvidia.com/gpu-a/gpu-1: allocated to = ResourceClaim ml/a",
    ]


@pytest.mark.parametrize(
    ("objects", "pod_obj"),
    [
        # A free device matches: the claim can be allocated, the Pod fits now.
        ((template("one-gpu", claim_spec("gpu.nvidia.com")),
          claim("a", claim_spec("gpu.nvidia.com"), holds=("gpu-0",))), dra_pod("dra")),
        # The devices are held by the Pod's own claim (from its template).
        ((template("one-gpu", claim_spec("gpu.nvidia.com", count=2)),
          claim("dra-gpu-x7", claim_spec("gpu.nvidia.com", count=2), holds=("gpu-0", "gpu-1"),
                owner="dra")), dra_pod("dra")),
        # A ResourceClaim the Pod names is allocated already.
        ((claim("shared", claim_spec("gpu.nvidia.com", count=2), holds=("gpu-0", "gpu-1")),),
         dra_pod("dra", "resourceClaimName", "shared")),
    ],
)  # fmt: skip
def test_claims_that_can_be_allocated_fit(objects: tuple[Obj, ...], pod_obj: Obj) -> None:
    assert diagnosed(*SUPPLY, *objects, pod_obj)["dra"].domain == "not-stuck"


def test_claims_without_dra_objects_are_not_evaluated() -> None:
    found = diagnosed(node("gpu-a", GFD), dra_pod("dra"))
    assert found["dra"].domain == "dra-unallocatable"
    assert "no DeviceClass or ResourceSlice was read" in found["dra"].verdict


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (None, "error: {path}: no such file"),
        ('{"kind": "List", "items": [{"kind": "Node", "metadata": {}}]}',
         "error: {path}:1: item 0: a Node without metadata.name"),
        ('{"kind": "List", "items": [\n{"kind": "Pod"',
         "error: {path}:2: invalid JSON: Expecting ',' delimiter"),
    ],
)  # fmt: skip
def test_bad_dumps_are_input_errors(tmp_path: Path, content: str | None, error: str) -> None:
    dump = tmp_path / "dump.json"
    if content is not None:
        dump.write_text(content)
    proc = gpu_admission("diagnose", "--from", str(dump), "-o", "json")
    assert (proc.returncode, proc.stdout) == (2, "[]\n")
    assert error.format(path=dump) in proc.stderr.splitlines()
