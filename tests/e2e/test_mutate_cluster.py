"""The optional mutating entry on a real kube-apiserver: the chart's
MutatingWebhookConfiguration, pointed at a real `gpu-admission serve` over TLS, patches a
new Pod's containers that ask for no GPU with NVIDIA_VISIBLE_DEVICES=void, and the
apiserver stores the patched Pod. Scoped to one namespace (the cluster is shared)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.test_chart import render
from tests.support.kubeclusters import NEWEST, Clusters, kubeclusters, on  # noqa: F401
from tests.support.servers import Server

NAMESPACE = "mutate-e2e"


def configuration(server: Server) -> dict[str, Any]:
    [mwc] = [
        d
        for d in render("--set", "mutating.neutraliseDeviceEnv=true")
        if d["kind"] == "MutatingWebhookConfiguration"
    ]
    mwc["metadata"] = {"name": "gpu-admission-mutate-e2e"}
    [entry] = mwc["webhooks"]
    entry["clientConfig"] = {
        "url": f"{server.url}/mutate",
        "caBundle": base64.b64encode(server.ca.cert_pem).decode(),
    }
    entry["failurePolicy"] = "Fail"  # here a missed call must fail the test, not pass it
    entry["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
    return dict(mwc)


def pod(name: str, **resources: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "nvcr.io/nvidia/cuda:12.4.0-base"}
    if resources:
        container["resources"] = {"limits": resources}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "containers": [container],
            "initContainers": [
                {"name": "fetch", "image": "busybox", "env": [{"name": "A", "value": "1"}]}
            ],
        },
    }


@on(NEWEST)
def test_the_apiserver_stores_the_neutralised_pod(kubeclusters: Clusters, tmp_path: Path) -> None:  # noqa: F811
    cluster = kubeclusters.get(NEWEST)
    cluster.namespace(NAMESPACE)
    server = Server(tmp_path)
    mwc = configuration(server)
    try:
        cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(mwc))
        cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(pod("cpu")))
        cluster.kubectl(
            "apply", "-f", "-", stdin=yaml.safe_dump(pod("gpu", **{"nvidia.com/gpu": 1}))
        )
        cpu = cluster.core.read_namespaced_pod("cpu", NAMESPACE)
        assert [(e.name, e.value) for e in cpu.spec.containers[0].env] == [
            ("NVIDIA_VISIBLE_DEVICES", "void")
        ]
        # appended after what the init container set itself
        assert [(e.name, e.value) for e in cpu.spec.init_containers[0].env] == [
            ("A", "1"),
            ("NVIDIA_VISIBLE_DEVICES", "void"),
        ]
        gpu = cluster.core.read_namespaced_pod("gpu", NAMESPACE)
        assert gpu.spec.containers[0].env is None  # its GPU comes through the variable
    finally:
        cluster.kubectl(
            "delete", "mutatingwebhookconfiguration", mwc["metadata"]["name"], check=False
        )
        cluster.kubectl("-n", NAMESPACE, "delete", "pod", "--all", "--wait=false", check=False)
        server.stop()
