"""The Helm chart on real control planes (kubecluster), on every supported version.

`helm install` puts the chart into the cluster; tests/support/kubelet.py runs its Pods here (the
certs hook Jobs, one webhook replica behind the Service's loopback ClusterIP, with the
chart's own arguments, volumes and service account). Then GPU objects go through the
apiserver's admission, judged through the chart's own ValidatingWebhookConfiguration:
allowed and refused as the policies say. `helm upgrade` with a new certificate keeps
every request answered while the Pods still serve the old one; `helm uninstall`
removes the webhook configuration first and leaves none behind.
"""

from __future__ import annotations

import base64
import socket
import threading
import time
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import watch

from tests.support.admitting import UNREACHABLE, Traffic, admit, expected
from tests.support.clirun import gpu_admission
from tests.support.kubeclusters import NEWEST, Cluster, Clusters, kubeclusters, on  # noqa: F401
from tests.support.kubeclusters import cluster as cluster  # (fixtures)
from tests.support.kubelet import Kubelet, Process, decisions, served_certificate
from tests.support.paths import ROOT
from tests.support.reviews import CLEAN, GOOD_LABELS, VIOLATIONS, deployment, pod

CHART = ROOT / "charts/gpu-admission"
ML = "ml"
CERTS_PODS = "app.kubernetes.io/component=certs"
PODS, WORKLOADS = "pods.gpu-admission.io", "workloads.gpu-admission.io"

Obj = dict[str, Any]
RULE = dict(VIOLATIONS)
GOOD = dict(CLEAN)
VISIBLE_ALL = {"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}

# (case, object, webhook, rule that refuses it; None: admitted)
Case = tuple[str, Obj, str | None, str | None]
ADMISSION: list[Case] = [
    (rule, RULE[rule], PODS, rule)
    for rule in (
        "gpu-device-injection/hostpath-device",
        # 9 GPUs where the nodes have 8: known only from the Nodes (watch, or file)
        "gpu-resource-names/insufficient-capacity",
        "gpu-memory-fit/exceeds-device-memory",
        "gpu-slo-class/sharing-mode-not-accepted",
    )
]
ADMISSION += [
    (
        "deployment/visible-devices-env",
        # a real apiserver checks that the selector (app: d) matches the template
        deployment(pod(container=VISIBLE_ALL, labels={**GOOD_LABELS, "app": "d"})),
        WORKLOADS,
        "gpu-device-injection/visible-devices-env",
    ),
    ("batch pod on a MIG slice", GOOD["batch pod on a MIG slice"], None, None),
    ("cpu-only pod", GOOD["cpu-only pod"], None, None),
]
# Steady traffic during upgrades: one refused, one admitted, both through the webhook.
TRAFFIC = [
    (RULE["gpu-device-injection/hostpath-device"], PODS, "gpu-device-injection/hostpath-device"),
    (GOOD["batch pod on a MIG slice"], None, None),
]


# --- helpers ------------------------------------------------------------------------


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def secret_data(cluster: Cluster, namespace: str, name: str) -> dict[str, bytes]:
    secret = cluster.core.read_namespaced_secret(name, namespace)
    return {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}


def ca_bundles(cluster: Cluster, name: str) -> set[bytes]:
    """The distinct caBundles of the configuration's webhooks (one, when they agree)."""
    vwc = k8s.AdmissionregistrationV1Api(cluster.api).read_validating_webhook_configuration(name)
    return {base64.b64decode(w.client_config.ca_bundle or "") for w in vwc.webhooks}


def pem_blocks(bundle: bytes) -> list[bytes]:
    end = b"-----END CERTIFICATE-----"
    return [b.strip() + b"\n" + end + b"\n" for b in bundle.split(end) if b.strip()]


def assert_admission(cluster: Cluster, cases: list[Case]) -> None:
    failed = []
    for case, obj, webhook, rule in cases:
        outcome = admit(cluster.http, obj, namespace=ML)
        if not expected(outcome, webhook=webhook, rule=rule):
            failed.append(f"{case}: {outcome}")
    assert not failed, "\n".join(failed)


def wait_serving(process: Process, host: str, port: int, cert: bytes, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while served_certificate(host, port) != cert.decode().strip():
        assert process.popen.poll() is None, process.log.read_text()
        assert time.monotonic() < deadline, "the new certificate was never served"
        time.sleep(0.1)


class Deletions:
    """The order in which objects are deleted, from watches started before the deletion.

    The resourceVersion of a DELETED event is the etcd revision of the deletion; one
    etcd serves the whole cluster, so revisions of different resources compare."""

    def __init__(self, cluster: Cluster, namespace: str, name: str) -> None:
        admission = k8s.AdmissionregistrationV1Api(cluster.api)
        apps = k8s.AppsV1Api(cluster.api)
        selector = f"metadata.name={name}"
        self.revisions: dict[str, int] = {}
        self._threads = [
            self._watch("ValidatingWebhookConfiguration",
                        admission.list_validating_webhook_configuration, field_selector=selector),
            self._watch("Deployment", apps.list_namespaced_deployment, namespace,
                        field_selector=selector),
        ]  # fmt: skip

    def _watch(self, kind: str, list_fn: Any, *args: Any, **kwargs: Any) -> threading.Thread:
        rv = list_fn(*args, **kwargs).metadata.resource_version

        def run() -> None:
            for event in watch.Watch().stream(
                list_fn, *args, resource_version=rv, timeout_seconds=60, **kwargs
            ):
                if event["type"] == "DELETED":
                    meta = event["raw_object"]["metadata"]
                    self.revisions[kind] = int(meta["resourceVersion"])
                    return

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def wait(self) -> dict[str, int]:
        for thread in self._threads:
            thread.join(60)
        return self.revisions


def install_values(ip: str, port: int) -> list[str]:
    return [
        "--set", f"service.clusterIP={ip}", "--set", f"service.port={port}",
        # The kubelet refreshes mounts within a minute or so; here `Kubelet.sync` does, and
        # the server looks for the new files often, to keep the test short.
        "--set-json", 'serve.extraArgs=["--reload-interval","0.2"]',
    ]  # fmt: skip


def uninstall_and_check(cluster: Cluster, *, release: str, namespace: str) -> None:
    deletions = Deletions(cluster, namespace, release)
    cluster.helm("uninstall", release, "-n", namespace, "--timeout", "60s")
    order = deletions.wait()
    assert set(order) == {"ValidatingWebhookConfiguration", "Deployment"}, order
    assert order["ValidatingWebhookConfiguration"] < order["Deployment"], order
    assert not cluster.kubectl(
        "get", "validatingwebhookconfigurations", "-o", "name"
    ).stdout.strip()
    left = cluster.kubectl(
        "get", "clusterroles,clusterrolebindings", "-o", "name",
        "-l", f"app.kubernetes.io/instance={release}",
    ).stdout.strip()  # fmt: skip
    assert not left, left
    # Nothing is left to refuse what the webhook refused.
    outcome = admit(cluster.http, TRAFFIC[0][0], namespace=ML)
    assert outcome.status == 201, outcome


# --- the lifecycle, on every version ----------------------------------------------------


def test_install_admit_rotate_uninstall(cluster: Cluster, tmp_path: Path) -> None:
    """The default install (certificates by the certs Jobs, Nodes from a watch)."""
    release = namespace = "gpu-admission"
    cluster.example_nodes()
    cluster.namespace(ML)
    cluster.namespace(namespace)
    ip = cluster.cluster_ip()
    port = free_port(ip)
    kubelet = Kubelet(cluster, namespace, tmp_path)
    kubelet.run_jobs(selector=CERTS_PODS)
    try:
        cluster.helm(
            "install", release, str(CHART), "-n", namespace, "--timeout", "90s",
            *install_values(ip, port),
            # short-lived, so that the upgrade below must rotate it
            "--set", "tls.certsJob.days=2", "--set", "tls.certsJob.renewBeforeDays=1",
        )  # fmt: skip
        assert not kubelet.failures, kubelet.failures
        assert kubelet.ran == [
            f"{release}-certs-secret",
            f"{release}-certs-cabundle",
        ]
        tls = secret_data(cluster, namespace, f"{release}-tls")
        assert ca_bundles(cluster, release) == {tls["ca.crt"]}
        hook_rbac = cluster.kubectl("get", "clusterrole", f"{release}-certs-hook", check=False)
        assert "NotFound" in hook_rbac.stderr  # deleted once the hooks succeeded

        served = kubelet.serve(deployment=release, service=release)
        assert_admission(cluster, ADMISSION)
        names = {d.get("name") for d in decisions(served)}
        assert {"p", "d"} <= names  # what the webhook judged reached this process
        assert "web" not in names  # the cpu-only Pod: the matchConditions never sent it

        with Traffic(cluster.http, ML, TRAFFIC, phase="upgrade") as traffic:
            cluster.helm(
                "upgrade", release, str(CHART), "-n", namespace, "--reuse-values",
                "--timeout", "90s",
                "--set", "tls.certsJob.days=3", "--set", "tls.certsJob.renewBeforeDays=2",
            )  # fmt: skip
            rotated = secret_data(cluster, namespace, f"{release}-tls")
            assert rotated["tls.crt"] != tls["tls.crt"]
            [bundle] = ca_bundles(cluster, release)
            assert pem_blocks(bundle) == [rotated["ca.crt"], tls["ca.crt"]]
            # The Pods serve the old certificate until the kubelet refreshes the mount.
            traffic.during("old certificate, new caBundle", seconds=1.5)
            kubelet.sync(served)
            wait_serving(served, ip, port, rotated["tls.crt"])
            traffic.during("new certificate", seconds=1.0)
        assert not kubelet.failures, kubelet.failures
        assert not traffic.unexpected, traffic.unexpected
        assert len(traffic.counts) == 3, traffic.counts
        assert min(traffic.counts.values()) >= 4, traffic.counts

        uninstall_and_check(cluster, release=release, namespace=namespace)
        # The Secret was made by the certs Job, not by Helm: it stays (docs/deploy.md).
        assert secret_data(cluster, namespace, f"{release}-tls")["ca.crt"] == rotated["ca.crt"]
    finally:
        kubelet.close()
        cluster.helm("uninstall", release, "-n", namespace, "--ignore-not-found", check=False)
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


# --- one version: a certificate of your own, a webhook that is down ----------------------


@on(NEWEST)
def test_provided_certificate_outage_and_rotation(
    kubeclusters: Clusters,  # noqa: F811
    tmp_path: Path,
) -> None:
    """tls.mode=secret (the chart writes the Secret you give it), Nodes from a file."""
    cluster = kubeclusters.get(NEWEST)
    release = namespace = "gpu-admission-provided"
    cluster.example_nodes()
    cluster.namespace(ML)
    cluster.namespace(namespace)
    ip = cluster.cluster_ip()
    port = free_port(ip)

    def certificate(name: str) -> list[str]:
        out = tmp_path / name
        run = gpu_admission("certs", "--service", release, "--namespace", namespace,
                            "--out", str(out), "--days", "2")  # fmt: skip
        assert run.returncode == 0, run.stderr
        return [
            "--set", "tls.mode=secret", "--set", "tls.secret.create=true",
            "--set-file", f"tls.secret.cert={out / 'tls.crt'}",
            "--set-file", f"tls.secret.key={out / 'tls.key'}",
            "--set-file", f"tls.secret.ca={out / 'ca.crt'}",
        ]  # fmt: skip

    kubelet = Kubelet(cluster, namespace, tmp_path)
    try:
        cluster.helm(
            "install", release, str(CHART), "-n", namespace, "--timeout", "60s",
            *install_values(ip, port), *certificate("a"),
            "--set", "inventory.source=file",
            "--set-file", f"inventory.nodes={ROOT / 'examples/cluster/nodes.json'}",
        )  # fmt: skip
        first = (tmp_path / "a" / "ca.crt").read_bytes()
        assert ca_bundles(cluster, release) == {first}

        # Nothing serves yet: failurePolicy Fail refuses what the filter sends, and
        # only that.
        privileged = pod(container={"securityContext": {"privileged": True}})
        refused = admit(cluster.http, privileged, namespace=ML)
        assert refused.status == 500 and UNREACHABLE.format(PODS) in refused.message, refused
        for obj, ns in ((GOOD["cpu-only pod"], ML), (privileged, "kube-system"),
                        (privileged, namespace)):  # fmt: skip
            outcome = admit(cluster.http, obj, namespace=ns)
            assert outcome.status == 201, (ns, outcome)

        served = kubelet.serve(deployment=release, service=release)
        assert_admission(cluster, ADMISSION)

        with Traffic(cluster.http, ML, TRAFFIC, phase="upgrade") as traffic:
            cluster.helm("upgrade", release, str(CHART), "-n", namespace, "--reuse-values",
                         *certificate("b"))  # fmt: skip
            second = (tmp_path / "b" / "ca.crt").read_bytes()
            [bundle] = ca_bundles(cluster, release)
            assert pem_blocks(bundle) == [second, first]
            traffic.during("old certificate, new caBundle", seconds=1.5)
            kubelet.sync(served)
            wait_serving(served, ip, port, (tmp_path / "b" / "tls.crt").read_bytes())
            traffic.during("new certificate", seconds=1.0)
        assert not traffic.unexpected, traffic.unexpected
        assert len(traffic.counts) == 3, traffic.counts
        assert min(traffic.counts.values()) >= 4, traffic.counts

        uninstall_and_check(cluster, release=release, namespace=namespace)
    finally:
        kubelet.close()
        cluster.helm("uninstall", release, "-n", namespace, "--ignore-not-found", check=False)
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
