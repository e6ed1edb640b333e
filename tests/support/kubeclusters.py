"""Real Kubernetes control planes for end-to-end tests (../shared/tools/kubecluster).

One cluster per Kubernetes version per test session (and xdist worker), started when a
test first asks for it and stopped at the end whatever happens. The tests of one
version carry one `xdist_group`, so that with `--dist loadgroup` (scripts/test) a
single worker runs them all and no version is started twice.

The versions are the oldest and the newest the kit ships, the range the chart supports
(`kubeVersion` in charts/gpu-admission/Chart.yaml).
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
import ssl
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tests.support.paths import ROOT, TOOLS

KIT = TOOLS / "kubecluster"
HELM = TOOLS / "helm" / "helm"
OLDEST, NEWEST = "v1.34.4", "v1.37.2"
VERSIONS = (OLDEST, NEWEST)

Obj = dict[str, Any]


def missing(version: str) -> str | None:
    """Why a cluster of this version cannot start here, or None."""
    if not (KIT / "start").exists():
        return f"kubecluster not found at {KIT}"
    if not (KIT / "bin" / version).is_dir():
        return f"kubecluster has no {version} in {KIT / 'bin'}"
    if not HELM.exists():
        return f"helm not found at {HELM}"
    return None


def group(version: str) -> str:
    return f"kubecluster-{version}"


def on(version: str) -> pytest.MarkDecorator:
    """For a test that needs the cluster of one version: its worker, or a skip."""
    reason = missing(version)
    if reason:
        return pytest.mark.skip(reason=reason)
    return pytest.mark.xdist_group(group(version))


def version_params() -> list[Any]:
    """Parameters for a test that runs on every supported version."""
    return [pytest.param(v, marks=on(v), id=v) for v in VERSIONS]


@dataclass
class Cluster:
    version: str
    dir: Path
    kubeconfig: Path
    api: k8s.ApiClient
    info: Obj
    _ips: int = 0
    _nodes: bool = False
    env: dict[str, str] = field(default_factory=dict)

    @functools.cached_property
    def http(self) -> httpx.Client:
        """The admin, over plain HTTPS (the static token of kubeconfig-token)."""
        config = yaml.safe_load((self.dir / "kubeconfig-token").read_text())
        token = config["users"][0]["user"]["token"]
        return httpx.Client(
            base_url=self.info["server"],
            verify=ssl.create_default_context(cafile=self.info["ca"]),
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )

    @property
    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.api)

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        run = subprocess.run(
            [str(KIT / "kubectl"), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
            check=False,
        )
        if check and run.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {run.stderr}")
        return run

    def helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        run = subprocess.run(
            [str(HELM), *args], capture_output=True, text=True, env=self.env, timeout=180
        )
        if check and run.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)}:\n{run.stdout}\n{run.stderr}")
        return run

    def cluster_ip(self) -> str:
        """A fresh address of the Service range (loopback here) for a fixed ClusterIP."""
        self._ips += 1
        network = ipaddress.ip_network(self.info["service_cidr"])
        return str(network[200 + self._ips])

    def namespace(self, name: str) -> str:
        """Create the namespace (if new) and wait for its default service account, which
        Pod admission needs."""
        if self.kubectl("get", "namespace", name, check=False).returncode != 0:
            self.kubectl("create", "namespace", name)
        deadline = time.monotonic() + 30
        while self.kubectl("-n", name, "get", "sa", "default", check=False).returncode:
            assert time.monotonic() < deadline, f"no default service account in {name}"
            time.sleep(0.2)
        return name

    def example_nodes(self) -> None:
        """The Nodes of examples/cluster/nodes.json, with their capacity (once)."""
        if self._nodes:
            return
        items = orjson.loads((ROOT / "examples/cluster/nodes.json").read_bytes())["items"]
        for node in items:
            meta = {k: node["metadata"][k] for k in ("name", "labels")}
            spec = {"taints": node["spec"]["taints"]} if "taints" in node["spec"] else {}
            body = {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec}
            self.core.create_node(body)
            status = {k: node["status"][k] for k in ("capacity", "allocatable")}
            self.core.patch_node_status(meta["name"], {"status": status})
        self._nodes = True


class Clusters:
    """The session's clusters, by version, started on first use."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.started: dict[str, Cluster] = {}

    def get(self, version: str) -> Cluster:
        reason = missing(version)
        if reason:
            pytest.skip(reason)
        if version not in self.started:
            self.started[version] = self._start(version)
        return self.started[version]

    def _start(self, version: str) -> Cluster:
        return start_cluster(self.base / version, version)

    def stop_all(self) -> None:
        """Stop every cluster (kubecluster's stop, by the PIDs start recorded).

        The stop goes on in the background: after each process exits, the kit waits up
        to 3 s for it to be reaped, which the init process of a container may never do,
        and a session should not spend that time waiting."""
        for version, cluster in self.started.items():
            cluster.api.close()
            if "http" in cluster.__dict__:  # made on first use
                cluster.http.close()
            env = {**os.environ, "KUBECLUSTER_BIN": str(KIT / "bin" / version)}
            subprocess.Popen(
                [str(KIT / "stop"), str(cluster.dir)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=(cluster.dir / "stop.log").open("wb"),
                start_new_session=True,
            )


def start_cluster(directory: Path, version: str, args: Sequence[str] = ()) -> Cluster:
    """One kubecluster of `version` in `directory`, started with the kit's `start` ARGS
    (feature gates and the like); stopped by `stop DIR` if it does not come up."""
    env = {**os.environ, "KUBECLUSTER_BIN": str(KIT / "bin" / version)}
    run = subprocess.run(
        [str(KIT / "start"), str(directory), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    if run.returncode != 0:
        subprocess.run([str(KIT / "stop"), str(directory)], env=env, check=False)
        raise RuntimeError(f"kubecluster {version} did not start:\n{run.stderr}")
    kubeconfig = Path(run.stdout.strip())
    env["KUBECONFIG"] = str(kubeconfig)
    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    info = json.loads((directory / "cluster.json").read_text())
    return Cluster(version, directory, kubeconfig, api, info, env=env)


@pytest.fixture(scope="session")
def kubeclusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    clusters = Clusters(tmp_path_factory.mktemp("kubeclusters"))
    try:
        yield clusters
    finally:
        clusters.stop_all()


@pytest.fixture(params=version_params())
def cluster(request: pytest.FixtureRequest, kubeclusters: Clusters) -> Cluster:
    """The cluster of each supported version (the test runs once per version)."""
    return kubeclusters.get(request.param)
