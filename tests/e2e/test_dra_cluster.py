"""DRA on a real control plane (../shared/tools/kubecluster, v1.36.3): the webhook is
registered through manifests/base's own ValidatingWebhookConfiguration, served on the
Service's loopback ClusterIP by `gpu-admission serve` watching the cluster (Nodes and DRA
objects live), and judges claims, claim templates and Pods as the apiserver sends them.
Then the real scheduler: a claim the engine allows is allocated when devices are free;
a claim it denies as unsatisfiable stays unallocated, its Pod with a FailedScheduling
event. The denied claims are created in an excluded namespace (gpu-operator), where the
webhook does not look, so that the scheduler gets to see them at all.

The devices are published as NVIDIA's DRA driver publishes them (driver gpu.nvidia.com,
attributes productName/type, capacity memory), without the ownerReferences to the
driver's Pod."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support.kubeclusters import KIT, Cluster, Clusters
from tests.support.paths import ROOT
from webhook.serve import certs

VERSION = "v1.36.3"
NS, EXCLUDED = "ml", "gpu-operator"
Obj = dict[str, Any]

pytestmark = [
    pytest.mark.skipif(
        not (KIT / "bin" / VERSION).is_dir(), reason=f"kubecluster {VERSION} not found at {KIT}"
    ),
    pytest.mark.xdist_group("kubecluster-dra"),
]

# The manifests' Service port; a process that is not root cannot listen there, so the test
# then moves the Service and the webhook configuration to another one.
PORT = 443 if os.geteuid() == 0 else 8443
DRIVER = "gpu.nvidia.com"
NODE = "dra-a100-0"


def device(index: int) -> Obj:
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "type": {"string": "gpu"},
            "productName": {"string": "NVIDIA A100-SXM4-80GB"},
            "architecture": {"string": "Ampere"},
            "driverVersion": {"version": "580.65.6"},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    }


DRA_OBJECTS: list[Obj] = [
    {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DRIVER},
        "spec": {
            "selectors": [
                {"cel": {"expression": f"device.driver == '{DRIVER}' && "
                         f"device.attributes['{DRIVER}'].type == 'gpu'"}}
            ]
        },
    },
    {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{NODE}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": NODE,
            "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
            "devices": [device(0), device(1)],
        },
    },
]  # fmt: skip


def claim(name: str, namespace: str, *, cls: str = DRIVER, count: int = 1,
          selector: str = "") -> Obj:  # fmt: skip
    exactly: Obj = {"deviceClassName": cls, "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def template(name: str, *, cls: str = DRIVER) -> Obj:
    body = claim(name, NS, cls=cls)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": body["metadata"],
        "spec": {"spec": body["spec"]},
    }


def pod(name: str, namespace: str, source: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "gpu-admission.io/peak-memory": "40Gi",
                "gpu-admission.io/slo-class": "batch",
            },
        },
        "spec": {
            "resourceClaims": [{"name": "gpu", **source}],
            "containers": [
                {
                    "name": "c",
                    "image": "registry.example.com/train:1",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }  # fmt: skip


def wait(what: str, ready: Callable[[], Any], timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := ready()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


class Webhook:
    """`gpu-admission serve` on the Service's ClusterIP:443, watching the cluster."""

    def __init__(self, cluster: Cluster, tmp: Path) -> None:
        ca = certs.make_ca(common_name="dra test CA", days=1)
        leaf = certs.make_serving_cert(
            ca=ca, dns_names=["gpu-admission.gpu-admission-system.svc"], days=1
        )
        (tmp / "tls.crt").write_bytes(leaf.cert_pem)
        (tmp / "tls.key").write_bytes(leaf.key_pem)
        (tmp / "ca.crt").write_bytes(ca.cert_pem)
        self.ip = cluster.cluster_ip()
        self.log = tmp / "serve.err"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "webhook", "serve", "--host", self.ip, "--port", str(PORT),
             "--kubeconfig", str(cluster.kubeconfig), "--reload-interval", "0.2",
             "--tls-cert-file", str(tmp / "tls.crt"), "--tls-key-file", str(tmp / "tls.key")],
            stdout=(tmp / "decisions.log").open("wb"),
            stderr=self.log.open("wb"),
        )  # fmt: skip
        # Only /readyz, by address: the certificate names the Service's DNS name.
        self.client = httpx.Client(verify=False, timeout=5)
        self.ca_pem = ca.cert_pem

    def ready(self) -> Obj:
        try:
            r = self.client.get(f"https://{self.ip}:{PORT}/readyz")
        except httpx.TransportError:
            return {}
        body: Obj = r.json()
        return body

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def base_webhook_configuration(ca_pem: bytes) -> Obj:
    rendered = subprocess.run(
        [str(KIT / "kubectl"), "kustomize", str(ROOT / "manifests/base")],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    [vwc] = [
        d
        for d in yaml.safe_load_all(rendered)
        if d and d["kind"] == "ValidatingWebhookConfiguration"
    ]
    for entry in vwc["webhooks"]:
        entry["clientConfig"]["caBundle"] = base64.b64encode(ca_pem).decode()
        entry["clientConfig"]["service"]["port"] = PORT
    return vwc  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    clusters = Clusters(tmp_path_factory.mktemp("kubecluster-dra"))
    started = clusters._start(VERSION)  # a cluster of its own: its webhook fails closed
    clusters.started[VERSION] = started
    try:
        yield started
    finally:
        clusters.stop_all()


def apply(cluster: Cluster, obj: Obj, *, check: bool = True, dry_run: bool = False
          ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    args = ["create", "-f", "-", *(["--dry-run=server"] if dry_run else [])]
    return cluster.kubectl(*args, stdin=yaml.safe_dump(obj), check=check)


@pytest.fixture(scope="module")
def webhook(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    # The server starts (imports, policies) while the cluster is set up.
    hook = Webhook(cluster, tmp_path_factory.mktemp("serve-dra"))
    try:
        yield from _set_up(cluster, hook)
    finally:
        cluster.kubectl("delete", "validatingwebhookconfiguration", "gpu-admission", check=False)
        hook.stop()


def _set_up(cluster: Cluster, hook: Webhook) -> Iterator[Webhook]:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}
    cluster.core.create_node(node)
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    cluster.core.patch_node_status(
        NODE, {"status": {"capacity": resources, "allocatable": resources}}
    )
    for obj in DRA_OBJECTS:
        apply(cluster, obj)
    namespaces = (NS, EXCLUDED, "gpu-admission-system")
    for namespace in namespaces:
        cluster.kubectl("create", "namespace", namespace)
    for namespace in namespaces:
        cluster.namespace(namespace)  # waits for its default service account
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "gpu-admission", "namespace": "gpu-admission-system"},
        "spec": {"clusterIP": hook.ip, "ports": [{"port": PORT, "targetPort": PORT}],
                 "selector": {"app": "none"}},
    }  # fmt: skip
    apply(cluster, service)
    # The live supply: both devices, seen through the watch.
    wait("the DRA supply", lambda: hook.ready().get("inventoryDraDevices") == 2)
    apply(cluster, base_webhook_configuration(hook.ca_pem))
    # The configuration takes effect within a second or so: until a bad claim is denied.
    wait("the webhook", lambda: apply(cluster, claim("probe", NS, cls="gpu.nvidia.co"),
                                      check=False, dry_run=True).returncode != 0)  # fmt: skip
    yield hook


def allocation(cluster: Cluster, namespace: str, name: str) -> Any:
    run = cluster.kubectl("-n", namespace, "get", "resourceclaim", name, "-o", "yaml")
    return (yaml.safe_load(run.stdout).get("status") or {}).get("allocation")


def failed_scheduling(cluster: Cluster, namespace: str, pod_name: str) -> str:
    run = cluster.kubectl(
        "-n", namespace, "get", "events", "-o", "yaml",
        "--field-selector", f"involvedObject.name={pod_name},reason=FailedScheduling",
    )  # fmt: skip
    return " ".join(e.get("message", "") for e in yaml.safe_load(run.stdout)["items"])


def test_a_claim_template_and_a_pod_are_judged_as_the_apiserver_sends_them(
    cluster: Cluster, webhook: Webhook
) -> None:
    denied = apply(cluster, template("typo", cls="gpu.nvidia.co"), check=False)
    assert denied.returncode != 0
    assert (
        'admission webhook "resourceclaims.gpu-admission.io" denied the request: '
        "ResourceClaimTemplate ml/typo has 1 GPU policy violation:"
    ) in denied.stderr
    assert "[gpu-dra-claims/unknown-device-class]" in denied.stderr
    assert 'names DeviceClass "gpu.nvidia.co", which does not exist' in denied.stderr
    assert "did you mean gpu.nvidia.com?" in denied.stderr
    apply(cluster, template("one-a100"))
    # A Pod naming a template that is nowhere is allowed with a warning (Helm order).
    missing = apply(
        cluster, pod("orphan", NS, {"resourceClaimTemplateName": "no-such"}), dry_run=True
    )
    assert "no-such" in missing.stderr and "Warning" in missing.stderr
    apply(cluster, pod("templated", NS, {"resourceClaimTemplateName": "one-a100"}))
    path = "jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}"
    generated = wait(
        "the generated claim",
        lambda: cluster.kubectl("-n", NS, "get", "pod", "templated", "-o", path).stdout,
    )
    assert wait("its allocation", lambda: allocation(cluster, NS, generated))


# (name, claim arguments, rule the engine denies it by, what the scheduler says)
UNSATISFIABLE = [
    ("no-class", {"cls": "gpu.nvidia.co"}, "unknown-device-class",
     "device class gpu.nvidia.co does not exist"),
    ("no-match",
     {"selector": f"device.attributes['{DRIVER}'].productName == 'NVIDIA A100-SXM4-80G'"},
     "selector-matches-nothing", "cannot allocate all claims"),
    ("too-many", {"count": 3}, "count-exceeds-node", "cannot allocate all claims"),
]  # fmt: skip


def test_what_the_engine_allows_is_allocated_and_what_it_denies_is_never(
    cluster: Cluster, webhook: Webhook
) -> None:
    apply(cluster, claim("one", NS))
    apply(cluster, pod("uses-one", NS, {"resourceClaimName": "one"}))
    assert wait("the allocation", lambda: allocation(cluster, NS, "one"))
    for name, kwargs, _, _ in UNSATISFIABLE:
        apply(cluster, claim(name, EXCLUDED, **kwargs))
        apply(cluster, pod(name, EXCLUDED, {"resourceClaimName": name}))
    # The same claims where the webhook looks (while the scheduler tries the others).
    for name, kwargs, rule, _ in UNSATISFIABLE:
        judged = apply(cluster, claim(name, NS, **kwargs), check=False, dry_run=True)
        assert judged.returncode != 0 and f"[gpu-dra-claims/{rule}]" in judged.stderr, name
    for name, _, _, said in UNSATISFIABLE:
        assert said in wait(name, lambda n=name: failed_scheduling(cluster, EXCLUDED, n)), name  # type: ignore[misc]
        assert allocation(cluster, EXCLUDED, name) is None, name


def test_a_slice_published_and_withdrawn_reaches_the_webhook_by_its_watch(
    cluster: Cluster, webhook: Webhook
) -> None:
    h100 = f"device.attributes['{DRIVER}'].productName == 'NVIDIA H100 80GB HBM3'"
    wanted = claim("h100", NS, selector=h100)
    before = apply(cluster, wanted, check=False, dry_run=True)
    assert "[gpu-dra-claims/selector-matches-nothing]" in before.stderr
    h100_device = device(0)
    h100_device["attributes"]["productName"] = {"string": "NVIDIA H100 80GB HBM3"}
    published: Obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"dra-h100-0-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "dra-h100-0",
            "pool": {"name": "dra-h100-0", "generation": 1, "resourceSliceCount": 1},
            "devices": [h100_device],
        },
    }
    apply(cluster, published)
    wait("the new slice", lambda: webhook.ready().get("inventoryDraDevices") == 3)
    assert apply(cluster, wanted, dry_run=True).returncode == 0
    cluster.kubectl("delete", "resourceslice", published["metadata"]["name"])
    wait("the slice gone", lambda: webhook.ready().get("inventoryDraDevices") == 2)
    after = apply(cluster, wanted, check=False, dry_run=True)
    assert "[gpu-dra-claims/selector-matches-nothing]" in after.stderr


ADMIN_LABEL = "resource.kubernetes.io/admin-access"


def namespace_decisions(hook: Webhook) -> list[Obj]:
    lines = (hook.log.parent / "decisions.log").read_text().splitlines()
    return [d for d in map(yaml.safe_load, lines) if d.get("kind") == "Namespace"]


def test_the_admin_access_label_is_judged_by_who_sets_it(
    cluster: Cluster, webhook: Webhook
) -> None:
    """The apiserver sends a Namespace only when the label is set (the matchCondition),
    with the requesting user's userInfo; a tenant allowed to label its Namespace may not
    set this one, the cluster admin (system:masters) may."""
    cluster.kubectl("create", "clusterrole", "ns-labeller",
                    "--verb=get,list,update,patch", "--resource=namespaces")  # fmt: skip
    cluster.kubectl("create", "clusterrolebinding", "alice-ns-labeller",
                    "--clusterrole=ns-labeller", "--user=alice")  # fmt: skip
    cluster.kubectl("create", "namespace", "team-a")
    alice = ("--as=alice", "--as-group=team-a")
    cluster.kubectl(*alice, "label", "namespace", "team-a", "team=a")  # not sent
    denied = cluster.kubectl(*alice, "label", "namespace", "team-a", f"{ADMIN_LABEL}=true",
                             check=False)  # fmt: skip
    assert denied.returncode != 0
    assert 'admission webhook "namespaces.gpu-admission.io" denied the request' in denied.stderr
    assert "[gpu-dra-guardrails/admin-access-label] user alice (groups: team-a" in denied.stderr
    cluster.kubectl("label", "namespace", "team-a", f"{ADMIN_LABEL}=true")
    cluster.kubectl(*alice, "label", "namespace", "team-a", "team=b", "--overwrite")  # not sent
    wait("two decisions logged", lambda: len(namespace_decisions(webhook)) >= 2)
    time.sleep(0.5)  # a third, had it been sent, would be logged by now
    seen = namespace_decisions(webhook)
    assert [d["decision"] for d in seen] == ["deny", "allow"], seen
    assert seen[0]["user"] == "alice" and seen[1]["user"] != "alice", seen


def test_a_passthrough_claim_is_denied_at_create(cluster: Cluster, webhook: Webhook) -> None:
    denied = apply(cluster, template("vm-gpu", cls="vfio.gpu.nvidia.com"), check=False)
    assert denied.returncode != 0
    assert "[gpu-dra-guardrails/passthrough-class]" in denied.stderr
    assert "(DeviceClass vfio.gpu.nvidia.com) in namespace ml" in denied.stderr


def publish_node(cluster: Cluster, node: str, devices: list[Obj]) -> None:
    cluster.core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    cluster.core.patch_node_status(
        node, {"status": {"capacity": resources, "allocatable": resources}}
    )
    apply(cluster, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {"driver": DRIVER, "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": devices},
    })  # fmt: skip


def test_a_device_taint_the_claim_does_not_tolerate_is_never_allocated(
    cluster: Cluster, webhook: Webhook
) -> None:
    """Two L4s on one node, one tainted gpu-lost (NoSchedule, as NVIDIA's driver marks a
    GPU that fell off the bus): two of them without a toleration is denied, and the
    scheduler agrees; with one, the engine allows and the scheduler allocates both."""
    l4 = [device(0), device(1)]
    for d in l4:
        d["attributes"]["productName"] = {"string": "NVIDIA L4"}
    l4[1]["taints"] = [{"key": "gpu.nvidia.com/gpu-lost", "effect": "NoSchedule"}]
    before = webhook.ready()["inventoryDraDevices"]
    publish_node(cluster, "dra-l4-0", l4)
    wait("the L4 slice", lambda: webhook.ready().get("inventoryDraDevices") == before + 2)
    selector = f"device.attributes['{DRIVER}'].productName == 'NVIDIA L4'"
    two = claim("two-l4", NS, count=2, selector=selector)
    judged = apply(cluster, two, check=False, dry_run=True)
    assert judged.returncode != 0 and "[gpu-dra-claims/device-tainted]" in judged.stderr
    assert "gpu.nvidia.com/dra-l4-0/gpu-1 (gpu.nvidia.com/gpu-lost:NoSchedule)" in judged.stderr
    apply(cluster, claim("two-l4", EXCLUDED, count=2, selector=selector))
    apply(cluster, pod("two-l4", EXCLUDED, {"resourceClaimName": "two-l4"}))
    said = wait("FailedScheduling", lambda: failed_scheduling(cluster, EXCLUDED, "two-l4"))
    assert "cannot allocate all claims" in said and allocation(cluster, EXCLUDED, "two-l4") is None
    (record,) = json.loads(diagnose(cluster, f"{EXCLUDED}/two-l4").stdout)
    assert record["domain"] == "dra-unallocatable", record
    assert "(gpu.nvidia.com/gpu-lost:NoSchedule)), leaving at most 1 usable" in record["verdict"]
    cluster.kubectl("-n", EXCLUDED, "delete", "pod", "two-l4", "--wait=false")
    tolerant = claim("tolerant-l4", NS, count=2, selector=selector)
    tolerant["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [
        {"key": "gpu.nvidia.com/gpu-lost", "operator": "Exists", "effect": "NoSchedule"}
    ]
    applied = apply(cluster, tolerant)
    assert "Warning" not in applied.stderr, applied.stderr
    apply(cluster, pod("tolerant-l4", NS, {"resourceClaimName": "tolerant-l4"}))
    got = wait("the tolerant allocation", lambda: allocation(cluster, NS, "tolerant-l4"))
    assert sorted(r["device"] for r in got["devices"]["results"]) == ["gpu-0", "gpu-1"]


def diagnose(cluster: Cluster, *pods: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webhook", "diagnose", "--kubeconfig", str(cluster.kubeconfig),
         "-o", "json", *pods],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def product_devices(product: str, n: int) -> list[Obj]:
    out = [device(i) for i in range(n)]
    for d in out:
        d["attributes"]["productName"] = {"string": product}
    return out


def test_a_pods_claims_are_judged_together_on_one_node(cluster: Cluster, webhook: Webhook) -> None:
    """Two nodes of two H200s: two claims of two each fit alone, never together (the
    scheduler leaves both unallocated); two of one each land on one node."""
    before = webhook.ready()["inventoryDraDevices"]
    for node in ("dra-h200-0", "dra-h200-1"):
        publish_node(cluster, node, product_devices("NVIDIA H200", 2))
    wait("the H200 slices", lambda: webhook.ready().get("inventoryDraDevices") == before + 4)
    h200 = f"device.attributes['{DRIVER}'].productName == 'NVIDIA H200'"
    for namespace in (NS, EXCLUDED):
        for name, count in (("h200-a", 2), ("h200-b", 2), ("h200-c", 1), ("h200-d", 1)):
            apply(cluster, claim(name, namespace, count=count, selector=h200))
    both = pod("h200-ab", NS, {"resourceClaimName": "h200-a"})
    both["spec"]["resourceClaims"].append({"name": "b", "resourceClaimName": "h200-b"})
    both["spec"]["containers"][0]["resources"]["claims"].append({"name": "b"})
    judged = wait("the claims seen by the webhook", lambda: (
        r := apply(cluster, both, check=False, dry_run=True)).returncode != 0 and r)  # fmt: skip
    assert "[gpu-dra-claims/claims-exceed-node] the pod asks for 4 devices in all" in judged.stderr
    assert "the most any node can give at once is 2" in judged.stderr
    both["metadata"]["namespace"] = EXCLUDED
    apply(cluster, both)
    said = wait("FailedScheduling", lambda: failed_scheduling(cluster, EXCLUDED, "h200-ab"))
    assert "cannot allocate all claims" in said
    assert allocation(cluster, EXCLUDED, "h200-a") is None
    assert allocation(cluster, EXCLUDED, "h200-b") is None
    # diagnose, live, says why the scheduler's "cannot allocate all claims" holds.
    (record,) = json.loads(diagnose(cluster, f"{EXCLUDED}/h200-ab").stdout)
    assert record["domain"] == "dra-unallocatable", record
    assert record["verdict"].startswith("the Pod's claims ask for 4 devices in all")
    assert "the most one node can give them at once is 2" in record["verdict"]
    cluster.kubectl("-n", EXCLUDED, "delete", "pod", "h200-ab", "--wait=false")
    small = pod("h200-cd", NS, {"resourceClaimName": "h200-c"})
    small["spec"]["resourceClaims"].append({"name": "d", "resourceClaimName": "h200-d"})
    small["spec"]["containers"][0]["resources"]["claims"].append({"name": "d"})
    apply(cluster, small)
    pools = [
        wait(name, lambda n=name: allocation(cluster, NS, n))["devices"]["results"][0]["pool"]  # type: ignore[misc]
        for name in ("h200-c", "h200-d")
    ]
    assert pools[0] == pools[1]


def test_all_on_a_mixed_node_is_warned_and_gets_the_mix(cluster: Cluster, webhook: Webhook) -> None:
    before = webhook.ready()["inventoryDraDevices"]
    mixed = product_devices("NVIDIA L40S", 1) + product_devices("NVIDIA A10", 2)[1:]
    publish_node(cluster, "dra-a10-l40s-0", mixed)
    wait("the mixed slice", lambda: webhook.ready().get("inventoryDraDevices") == before + 2)
    every = claim("every-gpu", NS, selector=(
        f"device.attributes['{DRIVER}'].productName in ['NVIDIA L40S', 'NVIDIA A10']"))  # fmt: skip
    exactly = every["spec"]["devices"]["requests"][0]["exactly"]
    del exactly["count"]
    exactly["allocationMode"] = "All"
    applied = apply(cluster, every)
    assert "[gpu-dra-claims/all-on-mixed-pool]" in applied.stderr, applied.stderr
    assert "dra-a10-l40s-0: 1x NVIDIA A10 80 GiB, 1x NVIDIA L40S 80 GiB" in applied.stderr
    apply(cluster, pod("every-gpu", NS, {"resourceClaimName": "every-gpu"}))
    got = wait("the All allocation", lambda: allocation(cluster, NS, "every-gpu"))
    assert sorted(r["device"] for r in got["devices"]["results"]) == ["gpu-0", "gpu-1"]


def test_a_live_audit_judges_the_clusters_claims_and_namespaces(
    cluster: Cluster, webhook: Webhook, tmp_path: Path
) -> None:
    """`audit` against the real apiserver reads the published devices with the Nodes and
    judges claims and Namespaces as themselves. The claim is in a namespace the webhook
    skips (so it exists); the audit's own policies are told not to skip it."""
    policies = tmp_path / "policies"
    policies.mkdir()
    for f in (ROOT / "policies").glob("*.yaml"):
        (policies / f.name).write_text(f.read_text().replace(f" {EXCLUDED},", ""))
    typo = claim("audit-typo", EXCLUDED, selector=(
        f"device.attributes['{DRIVER}'].productName == 'NVIDIA A100-SXM4-80G'"))  # fmt: skip
    apply(cluster, typo)
    apply(cluster, {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "audit-admin", "labels": {ADMIN_LABEL: "true"}},
    })  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "webhook", "audit", "--kubeconfig", str(cluster.kubeconfig),
         "--policies", str(policies), "-o", "json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    body = json.loads(proc.stdout)
    found = {(r["kind"], r["namespace"], r["name"], r["rule"]) for r in body["results"]}
    assert ("ResourceClaim", EXCLUDED, "audit-typo", "selector-matches-nothing") in found
    assert ("Namespace", "audit-admin", "audit-admin", "admin-access-label") in found
    assert body["errors"] == []
    assert not [n for n in body["notes"] if "resource.k8s.io" in n]  # served: no note
