"""Plays the kubelet for the chart's Pods, on this machine.

kubecluster runs no kubelet: Pods are created and scheduled but never run. The chart
tests run the containers of its Pods as local processes, the way a kubelet would:

- the command is the image's entrypoint (`gpu-admission`; here `python -m webhook`)
  with the container's `args`, `$(VAR)` expanded from its `env` (values and the
  `metadata.namespace` / `metadata.name` field references);
- Secret, ConfigMap and emptyDir volumes become directories laid out as the kubelet
  lays them out (the files behind a `..data` link that `sync` swaps atomically, as the
  kubelet does when the object changes), and mount paths in the args point there;
- the Pod's service account reaches the process as a kubeconfig holding a token from
  the TokenRequest API (`--kubeconfig`): same identity, same RBAC, but the in-cluster
  files cannot be faked without root;
- a webhook Pod listens where kube-proxy would send its Service's traffic: the
  Service's ClusterIP and port (`--host`, `--port`);
- a Job's Pod runs to completion, and its status (Succeeded or Failed) is written back,
  so the Job controller completes the Job and Helm's hook wait ends.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import yaml

from tests.support.kubeclusters import Cluster
from webhook.kube.client import get as kube_get

Obj = dict[str, Any]


class VolumeDir:
    """A directory laid out like a mounted Secret or ConfigMap."""

    def __init__(self, base: Path) -> None:
        self.base, self.version = base, 0
        base.mkdir(parents=True)

    def write(self, files: dict[str, bytes]) -> None:
        self.version += 1
        target = self.base / f"..v{self.version}"
        target.mkdir()
        for name, data in files.items():
            (target / name).write_bytes(data)
            link = self.base / name
            if not link.is_symlink():
                link.symlink_to(Path("..data") / name)
        tmp = self.base / "..data_tmp"
        tmp.symlink_to(target.name)
        os.replace(tmp, self.base / "..data")  # the kubelet's atomic swap


@dataclass
class Mounted:
    """A Secret or ConfigMap volume and where its files are."""

    kind: str  # "secret" | "configMap"
    name: str
    directory: VolumeDir


@dataclass
class Process:
    """A running container."""

    popen: subprocess.Popen[bytes]
    mounts: list[Mounted]
    log: Path

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


@dataclass
class Kubelet:
    cluster: Cluster
    namespace: str
    workdir: Path
    failures: list[str] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)  # the Jobs whose Pods ran, in order
    _processes: list[Process] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _count: int = 0

    # -- Job Pods ---------------------------------------------------------------------

    def run_jobs(self, *, selector: str) -> None:
        """Run every Pod matching the label selector in the namespace, once, until close."""
        self._thread = threading.Thread(target=self._jobs, args=(selector,), daemon=True)
        self._thread.start()

    def _jobs(self, selector: str) -> None:
        seen: set[str] = set()
        while not self._stop.is_set():
            path = f"/api/v1/namespaces/{self.namespace}/pods"
            try:
                pods = self._get(path, labelSelector=selector)["items"]
            except Exception as exc:  # the test reports it; the thread must go on
                self.failures.append(f"listing Pods: {exc!r}")
                pods = []
            for pod in pods:
                uid = pod["metadata"]["uid"]
                if uid not in seen and pod.get("status", {}).get("phase") == "Pending":
                    seen.add(uid)
                    self._run_to_completion(pod)
            self._stop.wait(0.1)

    def _run_to_completion(self, pod: Obj) -> None:
        name = pod["metadata"]["name"]
        [container] = pod["spec"]["containers"]
        try:
            command, mounts = self._prepare(pod, container, extra=())
            run = subprocess.run(command, capture_output=True, text=True, timeout=60)
        except Exception as exc:  # the test reports it; the thread must go on
            self.failures.append(f"{name}: {exc!r}")
            self._finish(name, ok=False)
            return
        for mount in mounts:
            shutil.rmtree(mount.directory.base, ignore_errors=True)
        if run.returncode != 0:
            self.failures.append(f"{name}: exit {run.returncode}: {run.stderr.strip()}")
        self.ran.append(pod["metadata"]["labels"]["batch.kubernetes.io/job-name"])
        self._finish(name, ok=run.returncode == 0)

    def _finish(self, name: str, *, ok: bool) -> None:
        phase = "Succeeded" if ok else "Failed"
        self.cluster.core.patch_namespaced_pod_status(
            name, self.namespace, {"status": {"phase": phase}}
        )

    # -- Deployment Pods --------------------------------------------------------------

    def serve(self, *, deployment: str, service: str) -> Process:
        """Run one replica of the Deployment behind the Service's ClusterIP and port."""
        obj = self._get(f"/apis/apps/v1/namespaces/{self.namespace}/deployments/{deployment}")
        svc = self._get(f"/api/v1/namespaces/{self.namespace}/services/{service}")
        host, port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["port"]
        pod = {"metadata": {"name": f"{deployment}-0"}, "spec": obj["spec"]["template"]["spec"]}
        [container] = pod["spec"]["containers"]
        command, mounts = self._prepare(pod, container, extra=("--host", host, "--port", str(port)))
        self._count += 1
        log = self.workdir / f"{deployment}-{self._count}.log"
        popen = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
        process = Process(popen, mounts, log)
        self._processes.append(process)
        wait_ready(host, port, process)
        return process

    def sync(self, process: Process) -> None:
        """What the kubelet does when a mounted object changes: new files, one swap."""
        for mount in process.mounts:
            mount.directory.write(self._files(mount.kind, mount.name))

    # -- containers -------------------------------------------------------------------

    def _prepare(
        self, pod: Obj, container: Obj, *, extra: tuple[str, ...]
    ) -> tuple[list[str], list[Mounted]]:
        assert "command" not in container, "only the image's entrypoint is emulated"
        self._count += 1
        root = self.workdir / f"{pod['metadata']['name']}-{self._count}"
        volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
        paths: dict[str, Path] = {}
        mounts: list[Mounted] = []
        for mount in container.get("volumeMounts", []):
            volume = volumes[mount["name"]]
            directory = VolumeDir(root / mount["name"])
            for kind, key in (("secret", "secretName"), ("configMap", "name")):
                if kind in volume:
                    mounted = Mounted(kind, volume[kind][key], directory)
                    directory.write(self._files(kind, mounted.name))
                    mounts.append(mounted)
            paths[mount["mountPath"]] = directory.base
        env = self._env(pod, container)
        args = [_mapped(_expand(a, env), paths) for a in container.get("args", [])]
        kubeconfig = self._token_kubeconfig(pod["spec"]["serviceAccountName"], root)
        command = [sys.executable, "-m", "webhook", *args, "--kubeconfig", str(kubeconfig)]
        return command + list(extra), mounts

    def _env(self, pod: Obj, container: Obj) -> dict[str, str]:
        fields = {"metadata.namespace": self.namespace, "metadata.name": pod["metadata"]["name"]}
        env: dict[str, str] = {}
        for var in container.get("env", []):
            if "value" in var:
                env[var["name"]] = _expand(var["value"], env)
            else:
                env[var["name"]] = fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
        return env

    def _files(self, kind: str, name: str) -> dict[str, bytes]:
        plural = "secrets" if kind == "secret" else "configmaps"
        obj = self._get(f"/api/v1/namespaces/{self.namespace}/{plural}/{name}")
        if kind == "secret":
            return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        return {k: v.encode() for k, v in (obj.get("data") or {}).items()}

    def _token_kubeconfig(self, service_account: str, root: Path) -> Path:
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                   "spec": {"expirationSeconds": 3600}}  # fmt: skip
        answer = self.cluster.core.create_namespaced_service_account_token(
            service_account, self.namespace, request
        )
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "pod",
            "clusters": [{"name": "c", "cluster": {
                "server": self.cluster.info["server"],
                "certificate-authority": self.cluster.info["ca"]}}],
            "users": [{"name": service_account, "user": {"token": answer.status.token}}],
            "contexts": [{"name": "pod", "context": {"cluster": "c", "user": service_account}}],
        }  # fmt: skip
        root.mkdir(parents=True, exist_ok=True)
        path = root / "kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return path

    def _get(self, path: str, **query: str) -> Obj:
        result: Obj = orjson.loads(kube_get(self.cluster.api, path, list(query.items())).data)
        return result

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        for process in self._processes:
            process.stop()


def _expand(text: str, env: dict[str, str]) -> str:
    """`$(NAME)` as the kubelet expands it (an unknown name stays as written)."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), text)


def _mapped(arg: str, paths: dict[str, Path]) -> str:
    for mount_path, directory in paths.items():
        if arg == mount_path or arg.startswith(mount_path + "/"):
            return str(directory) + arg[len(mount_path) :]
    return arg


def wait_ready(host: str, port: int, process: Process, timeout: float = 20) -> None:
    """Until /readyz answers 200 (no certificate check: the apiserver does the real one)."""
    deadline = time.monotonic() + timeout
    with httpx.Client(verify=False, timeout=2) as client:
        while time.monotonic() < deadline:
            assert process.popen.poll() is None, process.log.read_text()
            try:
                if client.get(f"https://{host}:{port}/readyz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    raise AssertionError(f"webhook not ready: {process.log.read_text()}")


def served_certificate(host: str, port: int) -> str:
    """The PEM certificate the server presents right now."""
    return ssl.get_server_certificate((host, port)).strip()


def decisions(process: Process) -> Iterator[Obj]:
    """The decision-log lines the server wrote so far."""
    for line in process.log.read_text().splitlines():
        if line.startswith("{"):
            yield orjson.loads(line)
