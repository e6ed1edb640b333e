"""A real control plane from ../shared/tools/kubecluster (kube-apiserver, kube-scheduler,
kube-controller-manager, etcd; no kubelets) and a small JSON client for setting it up.

Nodes are API objects whose status a test writes through the status subresource;
Pods bound with `spec.nodeName` hold capacity in the scheduler's view, Pods patched to
`Succeeded` hold none, and the scheduler leaves the others Pending with its real
FailedScheduling event.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import time
from http.client import HTTPSConnection
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from tests.support.paths import TOOLS

KIT = TOOLS / "kubecluster"
Obj = dict[str, Any]


def start(directory: Path) -> Path:
    """Start a cluster in `directory`; the admin kubeconfig's path."""
    run = subprocess.run(
        [str(KIT / "start"), str(directory)], capture_output=True, text=True, timeout=180
    )
    if run.returncode != 0:
        raise RuntimeError(f"kubecluster start failed:\n{run.stderr[-2000:]}")
    return Path(run.stdout.strip())


def stop(directory: Path, *, wait: bool = True) -> None:
    """Stop what `start` recorded in `directory`. Stopping takes the kit 7-9 s (each
    component's graceful shutdown); `wait=False` leaves that to a process of its own."""
    cmd = [str(KIT / "stop"), str(directory)]
    if wait:
        subprocess.run(cmd, capture_output=True, timeout=60)
    else:
        out = subprocess.DEVNULL
        subprocess.Popen(cmd, stdout=out, stderr=out, start_new_session=True)


def kubectl(kubeconfig: Path, *args: str) -> str:
    run = subprocess.run(
        [str(KIT / "kubectl"), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if run.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {run.stderr}")
    return run.stdout


class Api:
    """JSON over HTTPS with the kubeconfig's admin client certificate."""

    def __init__(self, kubeconfig: Path) -> None:
        config = json.loads(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        self._server = urlsplit(cluster["server"])
        self._tls = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self._tls.load_cert_chain(user["client-certificate"], user["client-key"])

    def call(self, method: str, path: str, body: Obj | None = None, **query: str) -> Obj:
        conn = HTTPSConnection(self._server.hostname or "", self._server.port, context=self._tls)
        headers = {"Accept": "application/json"}
        if body is not None:
            kind = "merge-patch+json" if method == "PATCH" else "json"
            headers["Content-Type"] = f"application/{kind}"
        url = path + (f"?{urlencode(query)}" if query else "")
        try:
            conn.request(method, url, json.dumps(body) if body is not None else None, headers)
            resp = conn.getresponse()
            data = json.loads(resp.read() or b"{}")
        finally:
            conn.close()
        if resp.status >= 300:
            raise RuntimeError(f"{method} {path}: HTTP {resp.status}: {data.get('message')}")
        return dict(data)

    def create(self, obj: Obj) -> Obj:
        return self.call("POST", collection(obj), obj)

    def patch_status(self, obj: Obj, status: Obj) -> Obj:
        path = f"{collection(obj)}/{obj['metadata']['name']}/status"
        return self.call("PATCH", path, {"status": status})

    def wait_for(self, what: str, test: Any, timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            found = test()
            if found:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout} s for {what}")
            time.sleep(0.2)


# DRA kinds (resource.k8s.io/v1): plural, namespaced.
_DRA = {
    "DeviceClass": ("deviceclasses", False),
    "ResourceSlice": ("resourceslices", False),
    "ResourceClaim": ("resourceclaims", True),
    "ResourceClaimTemplate": ("resourceclaimtemplates", True),
}


def collection(obj: Obj) -> str:
    kind = obj["kind"]
    if kind in _DRA:
        plural, namespaced = _DRA[kind]
        base = "/apis/resource.k8s.io/v1"
        if namespaced:
            base += f"/namespaces/{obj['metadata'].get('namespace', 'default')}"
        return f"{base}/{plural}"
    plural = {"Node": "nodes", "Pod": "pods", "Namespace": "namespaces"}.get(kind)
    if plural is None:
        plural = {"PriorityClass": "priorityclasses"}[kind]
        return f"/apis/scheduling.k8s.io/v1/{plural}"
    if kind in ("Node", "Namespace"):
        return f"/api/v1/{plural}"
    return f"/api/v1/namespaces/{obj['metadata'].get('namespace', 'default')}/{plural}"
