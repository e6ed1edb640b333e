"""gpu-queues on a real control plane (../shared/tools/kubecluster, v1.36.3) with Kueue
v0.19.2's CRDs (../shared/tools/crds): the queued cluster of examples/queues/cluster.yaml
is created for real (its Nodes as API objects with their labels and allocatable, its
Namespaces, ResourceFlavors, ClusterQueues, LocalQueues and ResourceQuota), then
`gpu-admission serve` watches it, with manifests/base's own RBAC (a token of its
ServiceAccount) and registered through manifests/base's own ValidatingWebhookConfiguration,
served on the Service's loopback ClusterIP (tests/e2e/test_dra_cluster.py's Webhook).

What the apiserver answers is compared word for word with what `gpu-admission check`
prints for the same object against the file inventory: a finding at admission and in a
PR is the same finding. The ResourceQuota is shown side by side with the apiserver's own
quota admission, in a namespace the webhook excludes (gpu-operator) where only the
apiserver decides; and `gpu-admission audit` reads the same queues live.

serve starts its lists all at once; which ends last is a race, and it matters
(test_a_node_list_after_the_queue_lists_keeps_the_queues, a known bug): the server is
started with the queue resources withheld by its RBAC until the Nodes are listed.

No Kueue controller runs: nothing here needs one (the webhook judges the queue objects as
they are written, Kueue's rules as tests/data/kueue/FACTS.md cites them)."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_dra_cluster import PORT, Webhook, base_webhook_configuration, wait
from tests.support.clirun import gpu_admission
from tests.support.kubeclusters import KIT, Cluster, Clusters
from tests.support.paths import ROOT, TOOLS
from tests.support.reviews import review
from webhook.serve.admission import WARNING_WIDTH

VERSION = "v1.36.3"
CRDS = TOOLS / "crds"
QUEUES = ROOT / "examples/queues"
EXCLUDED = "gpu-operator"  # in every policy's excludedNamespaces and the webhook's selector
SYSTEM = "gpu-admission-system"
Obj = dict[str, Any]

pytestmark = [
    pytest.mark.skipif(
        not (KIT / "bin" / VERSION).is_dir(), reason=f"kubecluster {VERSION} not found at {KIT}"
    ),
    pytest.mark.skipif(not (CRDS / "install").exists(), reason=f"crds not found at {CRDS}"),
    pytest.mark.xdist_group("kubecluster-queues"),
]


def cluster_items() -> list[Obj]:
    items: list[Obj] = yaml.safe_load((QUEUES / "cluster.yaml").read_text())["items"]
    return items


def example(name: str) -> Obj:
    obj: Obj = yaml.safe_load((QUEUES / "bad" / f"{name}.yaml").read_text())
    return obj


def bad(name: str) -> Path:
    return QUEUES / "bad" / f"{name}.yaml"


def checked(*files: Path) -> list[Obj]:
    """What `check` prints for FILES against the file inventory of cluster.yaml."""
    proc = gpu_admission(
        "check", "--inventory", str(QUEUES / "cluster.yaml"), *map(str, files), "-o", "json"
    )
    assert proc.stdout, proc.stderr
    results: list[Obj] = json.loads(proc.stdout)["results"]
    return results


# -- the apiserver, over HTTPS --------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """The apiserver's answer to a create: its status, its Status message, its warnings."""

    code: int
    message: str
    warnings: list[str]

    @property
    def created(self) -> bool:
        return self.code == 201


_WARNING = re.compile(r'^299 - "(.*)"$')


def collection(obj: Obj) -> str:
    version = obj["apiVersion"]
    base = f"/api/{version}" if "/" not in version else f"/apis/{version}"
    namespace = obj["metadata"].get("namespace")
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"{base}{where}/{obj['kind'].lower()}s"


def send(cluster: Cluster, obj: Obj, *, dry_run: bool = False) -> Answer:
    """Create OBJ (dryRun=All: through every admission step, stored nowhere)."""
    r = cluster.http.post(collection(obj), json=obj, params={"dryRun": "All"} if dry_run else None)
    # The apiserver's Warning headers: `299 - "text"`, `"` and `\` escaped in the text.
    said = [_WARNING.match(w) for w in r.headers.get_list("warning")]
    warnings = [re.sub(r"\\(.)", r"\1", m.group(1)) for m in said if m]
    message = r.json().get("message", "") if r.is_error else ""
    return Answer(r.status_code, message, warnings)


def create(cluster: Cluster, obj: Obj) -> Answer:
    answer = send(cluster, obj)
    assert answer.created, (obj["kind"], obj["metadata"]["name"], answer)
    return answer


def denial(entry: str, subject: str, findings: list[Obj]) -> str:
    """The message the apiserver returns for a deny of the webhook entry ENTRY."""
    n = len(findings)
    head = f"{subject} has {n} GPU policy violation{'' if n == 1 else 's'}:"
    lines = [f"[{f['policy']}/{f['rule']}] {f['message']}" for f in findings]
    return "\n".join([f'admission webhook "{entry}" denied the request: {head}', *lines])


def warned(findings: list[Obj]) -> list[str]:
    """The warnings the apiserver passes on: each finding wrapped as kubectl shows it."""
    return [
        line
        for f in findings
        for line in textwrap.wrap(
            f"[{f['policy']}/{f['rule']}] {f['message']}", WARNING_WIDTH, subsequent_indent="  "
        )
    ]


def by_action(results: list[Obj], action: str) -> list[Obj]:
    return [r for r in results if r["action"] == action]


# -- the cluster and the webhook --------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    clusters = Clusters(tmp_path_factory.mktemp("kubecluster-queues"))
    started = clusters._start(VERSION)  # a cluster of its own: its webhook fails closed
    clusters.started[VERSION] = started
    try:
        yield started
    finally:
        clusters.stop_all()


def create_queued_cluster(cluster: Cluster) -> None:
    """examples/queues/cluster.yaml but the v1alpha1 ClusterQueue, which no apiserver
    with Kueue's CRDs serves (test_the_apiserver_has_no_v1alpha1_cluster_queue)."""
    subprocess.run(
        [str(CRDS / "install"), "kueue"], env=cluster.env, check=True, capture_output=True,
        timeout=120,
    )  # fmt: skip
    items = [i for i in cluster_items() if i["apiVersion"] != "kueue.x-k8s.io/v1alpha1"]
    for node in (i for i in items if i["kind"] == "Node"):
        create(cluster, {"apiVersion": "v1", "kind": "Node", "metadata": node["metadata"]})
        allocatable = node["status"]["allocatable"]
        status = {"capacity": allocatable, "allocatable": allocatable}
        patched = cluster.http.patch(
            f"/api/v1/nodes/{node['metadata']['name']}/status",
            json={"status": status},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert patched.status_code == 200, patched.text
    for namespace in (EXCLUDED, SYSTEM):
        create(cluster, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for obj in (i for i in items if i["kind"] != "Node"):
        create(cluster, obj)
    for namespace in (i["metadata"]["name"] for i in items if i["kind"] == "Namespace"):
        cluster.namespace(namespace)  # Pods need its default service account


# What the server lists, by the resources of manifests/base/rbac.yaml's ClusterRole.
QUEUE_LISTS = ("resourceflavors", "clusterqueues", "cohorts", "localqueues", "resourcequotas")
QUEUED = frozenset(QUEUE_LISTS)
NODES = frozenset({"nodes"})


def grant(cluster: Cluster, account: str, *, withheld: frozenset[str] = frozenset()) -> None:
    """manifests/base/rbac.yaml for ACCOUNT (its ServiceAccount, ClusterRole and binding
    renamed), without the WITHHELD resources; applied again in full, the server's watch of
    those gets through on its next retry."""
    docs = list(yaml.safe_load_all((ROOT / "manifests/base/rbac.yaml").read_text()))
    for doc in docs:
        doc["metadata"]["name"] = account
        if doc["kind"] == "ClusterRole":
            for rule in doc["rules"]:
                rule["resources"] = [r for r in rule["resources"] if r not in withheld]
            doc["rules"] = [r for r in doc["rules"] if r["resources"]]
        if doc["kind"] == "ClusterRoleBinding":
            doc["roleRef"]["name"] = doc["subjects"][0]["name"] = account
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))


def token_kubeconfig(cluster: Cluster, account: str, path: Path) -> Path:
    """A kubeconfig with a token of the ServiceAccount: the server reads the cluster with
    the rights the manifests give it, no more."""
    token = cluster.kubectl("-n", SYSTEM, "create", "token", account).stdout.strip()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {
            "server": cluster.info["server"], "certificate-authority": cluster.info["ca"]}}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": account}}],
        "current-context": "c",
    }  # fmt: skip
    path.write_text(yaml.safe_dump(config))
    return path


def serve(cluster: Cluster, account: str, tmp: Path, *, first: frozenset[str]) -> Webhook:
    """`gpu-admission serve` (test_dra_cluster's Webhook) as ACCOUNT, on a ClusterIP of its
    own, ready. It lists the resources FIRST before the rest: the order of the first lists
    is otherwise a race (serve starts them all at once, in threads)."""
    later = (NODES | QUEUED) - first
    grant(cluster, account, withheld=later)
    kubeconfig = token_kubeconfig(cluster, account, tmp / "kubeconfig")
    view = replace(cluster, kubeconfig=kubeconfig)
    hook = Webhook(view, tmp)
    cluster._ips = view._ips  # the copy drew the address: the next one is another
    firsts = [r for r in ("nodes", *QUEUE_LISTS) if r in first]
    try:
        wait(
            f"{', '.join(firsts)} listed",
            lambda: all(re.search(rf"listed \d+ {r}\b", hook.log.read_text()) for r in firsts),
            timeout=30,
        )
        grant(cluster, account)
        wait("/readyz", lambda: hook.ready().get("ready"), timeout=30)
    except BaseException:
        hook.stop()
        raise
    return hook


@pytest.fixture(scope="module")
def webhook(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    create_queued_cluster(cluster)
    # Nodes first: see test_a_node_list_after_the_queue_lists_keeps_the_queues.
    hook = serve(cluster, "gpu-admission", tmp_path_factory.mktemp("serve-queues"), first=NODES)
    try:
        service = {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "gpu-admission", "namespace": SYSTEM},
            "spec": {"clusterIP": hook.ip, "ports": [{"port": PORT, "targetPort": PORT}],
                     "selector": {"app": "none"}},
        }  # fmt: skip
        create(cluster, service)
        create(cluster, base_webhook_configuration(hook.ca_pem))
        # In effect within a second or so: until a Job naming no LocalQueue is denied.
        probe = example("no-local-queue")
        wait("the webhook", lambda: send(cluster, probe, dry_run=True).code == 403)
        yield hook
    finally:
        cluster.kubectl("delete", "validatingwebhookconfiguration", "gpu-admission", check=False)
        hook.stop()


# -- the tests ----------------------------------------------------------------------------


def test_the_apiserver_has_no_v1alpha1_cluster_queue(cluster: Cluster, webhook: Webhook) -> None:
    """cluster.yaml's `legacy` is written in a version Kueue never served: kubectl finds no
    such kind in the apiserver's discovery, and the apiserver has no such path."""
    [legacy] = [i for i in cluster_items() if i["apiVersion"] == "kueue.x-k8s.io/v1alpha1"]
    refused = cluster.kubectl("create", "-f", "-", stdin=yaml.safe_dump(legacy), check=False)
    assert refused.returncode != 0
    assert (
        'no matches for kind "ClusterQueue" in version "kueue.x-k8s.io/v1alpha1"'
    ) in refused.stderr
    assert cluster.http.post(collection(legacy), json=legacy).status_code == 404
    on_v1beta2 = cluster.http.post("/apis/kueue.x-k8s.io/v1beta2/clusterqueues", json=legacy)
    assert on_v1beta2.status_code == 400
    assert on_v1beta2.json()["message"] == (
        "the API version in the data (kueue.x-k8s.io/v1alpha1) does not match the expected "
        "API version (kueue.x-k8s.io/v1beta2)"
    )


@pytest.mark.parametrize("name", ["quota-never-admits", "no-local-queue"])
def test_a_job_kueue_never_admits_is_denied_as_check_finds_it(
    cluster: Cluster, webhook: Webhook, name: str
) -> None:
    job = example(name)
    findings = by_action(checked(bad(name)), "deny")
    assert [f["rule"] for f in findings if f["policy"] == "gpu-queues"] == [name]
    answer = send(cluster, job, dry_run=True)
    assert answer.code == 403
    subject = f"Job {job['metadata']['namespace']}/{job['metadata']['name']}"
    assert answer.message == denial("workloads.gpu-admission.io", subject, findings)


def test_a_cluster_queue_open_to_all_is_warned_and_created(
    cluster: Cluster, webhook: Webhook
) -> None:
    queue = example("queue-open-to-all")
    findings = checked(bad("queue-open-to-all"))
    assert [(f["rule"], f["action"]) for f in findings] == [("queue-open-to-all", "warn")]
    answer = create(cluster, queue)
    assert answer.warnings == warned(findings)
    got = cluster.http.get(f"{collection(queue)}/{queue['metadata']['name']}")
    assert got.status_code == 200 and got.json()["spec"]["namespaceSelector"] == {}


def test_a_local_queue_created_and_deleted_reaches_the_webhook_by_its_watch(
    cluster: Cluster, webhook: Webhook, tmp_path: Path
) -> None:
    """The Job names `late`, which the cluster does not have; then has, then not. `check`
    with the LocalQueue among its files says the same each time."""
    job = example("no-local-queue")
    job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "late"
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    late = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "late", "namespace": "team-a"},
        "spec": {"clusterQueue": "team-a"},
    }
    (tmp_path / "late.yaml").write_text(yaml.safe_dump(late))
    lost = by_action(checked(tmp_path / "job.yaml"), "deny")
    assert [f["rule"] for f in lost] == ["no-local-queue"]
    refused = denial("workloads.gpu-admission.io", "Job team-a/lost", lost)
    assert send(cluster, job, dry_run=True).message == refused
    queued = checked(tmp_path / "late.yaml", tmp_path / "job.yaml")
    assert by_action(queued, "deny") == []
    create(cluster, late)
    allowed = wait("the LocalQueue", lambda: (a := send(cluster, job, dry_run=True)).created and a)
    assert allowed.warnings == warned(by_action(queued, "warn"))
    cluster.kubectl("-n", "team-a", "delete", "localqueue", "late")
    denied = wait("it gone", lambda: (a := send(cluster, job, dry_run=True)).code == 403 and a)
    assert denied.message == refused
    # Both came as watch events, one object each: LocalQueues were listed once, at start.
    listed = re.findall(r"listed \d+ localqueues", webhook.log.read_text())
    assert listed == ["listed 7 localqueues"], listed


def test_a_node_list_after_the_queue_lists_keeps_the_queues(
    cluster: Cluster, webhook: Webhook, tmp_path: Path
) -> None:
    """The order a large cluster gives at every start (its Node list is the longest) and
    every Node re-list (410 Gone) gives later: the queues listed, then the Nodes. The
    server is ready, and must still deny what the queues deny."""
    hook = serve(cluster, "gpu-admission-nodes-last", tmp_path, first=QUEUED)
    try:
        job = example("no-local-queue")
        asked = review(job, namespace="team-a")
        asked["request"]["kind"] = {"group": "batch", "version": "v1", "kind": "Job"}
        asked["request"]["resource"] = {"group": "batch", "version": "v1", "resource": "jobs"}
        answer = hook.client.post(f"https://{hook.ip}:{PORT}/validate", json=asked).json()
        assert answer["response"]["allowed"] is False, answer
        assert "[gpu-queues/no-local-queue]" in answer["response"]["status"]["message"]
    finally:
        hook.stop()


def test_a_pod_over_a_resource_quota_is_denied_with_the_apiservers_own_words(
    cluster: Cluster, webhook: Webhook
) -> None:
    """In team-b the webhook denies the Pod before the apiserver's quota admission (it
    runs after the validating webhooks) would; in gpu-operator, where the webhook does
    not look, the same quota refuses the same Pod, and says what the webhook quoted."""
    pod = example("resource-quota-too-small")
    findings = by_action(checked(bad("resource-quota-too-small")), "deny")
    assert [f["rule"] for f in findings if f["policy"] == "gpu-queues"] == [
        "resource-quota-too-small"
    ]
    ours = send(cluster, pod, dry_run=True)
    assert ours.code == 403
    assert ours.message == denial("pods.gpu-admission.io", "Pod team-b/greedy", findings)

    [quota] = [i for i in cluster_items() if i["kind"] == "ResourceQuota"]
    quota["metadata"]["namespace"] = pod["metadata"]["namespace"] = EXCLUDED
    create(cluster, quota)
    path = f"{collection(quota)}/{quota['metadata']['name']}"
    # The quota admission refuses every Pod until the controller-manager has counted.
    wait("the quota counted", lambda: cluster.http.get(path).json().get("status", {}).get("hard"))
    theirs = send(cluster, pod)
    said = (
        "exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=8, used: "
        "requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=4"
    )
    assert (theirs.code, theirs.message) == (403, f'pods "greedy" is forbidden: {said}')
    assert f'the apiserver refuses the Pods beyond it ("{said}")' in ours.message


def test_a_limits_quota_is_accepted_and_warned_as_never_enforced(
    cluster: Cluster, webhook: Webhook
) -> None:
    quota = example("quota-not-enforced")
    findings = checked(bad("quota-not-enforced"))
    assert [(f["rule"], f["action"]) for f in findings] == [("quota-not-enforced", "warn")]
    answer = create(cluster, quota)
    assert answer.warnings == warned(findings)
    stored = cluster.http.get(f"{collection(quota)}/{quota['metadata']['name']}").json()
    assert stored["spec"]["hard"] == {"limits.nvidia.com/gpu": "4"}


def test_a_live_audit_reports_the_queue_objects_as_check_does(
    cluster: Cluster, webhook: Webhook
) -> None:
    """`audit` against the apiserver lists the queues, the quotas and the Nodes, and
    finds in the queue objects what `check` finds in cluster.yaml; and a quota of its own
    (the test needs no other test's objects)."""
    quota = example("quota-not-enforced")
    quota["metadata"] = {"name": "limits-only", "namespace": "team-c"}
    create(cluster, quota)
    proc = gpu_admission("audit", "--kubeconfig", str(cluster.kubeconfig), "-o", "json")
    assert proc.stdout, proc.stderr
    body = json.loads(proc.stdout)
    assert body["errors"] == [], body["errors"]
    assert not [n for n in body["notes"] if "kueue" in n or "resourcequotas" in n], body["notes"]
    found = {(r["kind"], r["name"], r["rule"], r["message"]) for r in body["results"]}
    local = gpu_admission(
        "check", "--inventory", str(QUEUES / "cluster.yaml"), str(QUEUES / "cluster.yaml"),
        "-o", "json",
    )  # fmt: skip
    in_file = {(r["kind"], r["name"], r["rule"], r["message"])
               for r in json.loads(local.stdout)["results"]}  # fmt: skip
    assert in_file and in_file <= found, in_file - found
    rules = {(r["kind"], r["namespace"], r["name"], r["rule"]) for r in body["results"]}
    # A cluster-scoped object is judged, and shown, in `default` (docs/policies.md).
    assert ("ClusterQueue", "default", "team-c", "queue-open-to-all") in rules, rules
    assert ("ClusterQueue", "default", "lonely", "queue-admits-nothing") in rules, rules
    assert ("ResourceQuota", "team-c", "limits-only", "quota-not-enforced") in rules, rules
    assert proc.returncode == 0, body["results"]  # only warnings: nothing here is denied
