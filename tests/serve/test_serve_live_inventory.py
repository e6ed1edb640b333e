"""`serve` without --inventory: Nodes from a cluster through the real kubernetes client.

The cluster is tests/support/fakeapiserver.py (no kube-apiserver can run here); the server is a
real `gpu-admission serve` process reading a kubeconfig that points at it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from tests.support.fakeapiserver import TOKEN, FakeApiServer
from tests.support.paths import ROOT
from tests.support.ports import free_port
from tests.support.reviews import pod, review

NODES = ("", "v1", "nodes")
MIG_POD = pod(limits={"nvidia.com/mig-3g.40gb": 1})


def example_nodes() -> list[dict[str, Any]]:
    items = orjson.loads((ROOT / "examples/cluster/nodes.json").read_bytes())["items"]
    return [{k: v for k, v in n.items() if k not in ("apiVersion", "kind")} for n in items]


class LiveServer:
    def __init__(self, tmp: Path, api: FakeApiServer) -> None:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": api.url}}],
            "users": [{"name": "me", "user": {"token": TOKEN}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me"}}],
        }  # fmt: skip
        (tmp / "kubeconfig").write_text(yaml.safe_dump(config))
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "webhook", "serve", "--host", "127.0.0.1",
             "--port", str(self.port), "--kubeconfig", str(tmp / "kubeconfig"),
             "--inventory-max-age", "2", "--stale-inventory", "warn"],
            stdout=(tmp / "decisions.log").open("wb"), stderr=(tmp / "serve.err").open("wb"),
            env=env,
        )  # fmt: skip
        self.client = httpx.Client(verify=False, timeout=10)  # the throwaway localhost CA

    def ready(self) -> httpx.Response:
        return self.client.get(self.url + "/readyz")

    def wait(self, predicate: Any, what: str, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if predicate():
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.1)

    def judge(self, obj: dict[str, Any]) -> dict[str, Any]:
        body = orjson.dumps(review(obj))
        resp = self.client.post(self.url + "/validate", content=body)
        assert resp.status_code == 200
        return resp.json()["response"]  # type: ignore[no-any-return]

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(15)


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        server.serve(*NODES, "Node", namespaced=False)
        yield server


def test_ready_only_after_the_first_sync_then_follows_the_watch(
    api: FakeApiServer, tmp_path: Path
) -> None:
    api.fail_next("/api/v1/nodes", 503, count=3)  # the first lists fail: not ready yet
    server = LiveServer(tmp_path, api)
    try:
        server.wait(lambda: server.ready().status_code == 503, "the server to answer")
        nodes = example_nodes()
        api.put_many(NODES, nodes)
        server.wait(lambda: server.ready().status_code == 200, "the first sync")
        assert server.ready().json()["inventoryNodes"] == len(nodes)
        assert server.judge(MIG_POD)["allowed"] is True

        # The watch breaks; while it is down the last inventory keeps serving.
        api.break_watches()
        assert server.judge(MIG_POD)["allowed"] is True
        # A change made while the watch is down arrives when it resumes.
        api.delete(NODES, "gpu-a100-mig-0")
        server.wait(
            lambda: server.ready().json()["inventoryNodes"] == len(nodes) - 1,
            "the deletion to arrive after the watch resumed",
        )
        denied = server.judge(MIG_POD)
        assert denied["allowed"] is False
        assert "[gpu-resource-names/unknown-resource]" in denied["status"]["message"]
        assert len(api.watch_requests("/api/v1/nodes")) >= 2
    finally:
        server.stop()


def test_an_inventory_too_old_turns_inventory_denials_into_warnings(
    api: FakeApiServer, tmp_path: Path
) -> None:
    api.put_many(NODES, example_nodes())
    server = LiveServer(tmp_path, api)
    try:
        server.wait(lambda: server.ready().status_code == 200, "the first sync")
        typo = pod(limits={"nvidia.com/mig-1g.10g": 1})
        assert server.judge(typo)["allowed"] is False
        # No events and no bookmarks for longer than --inventory-max-age (2 s).
        server.wait(
            lambda: (server.ready().json()["inventoryAgeSeconds"] or 0) > 2.5,
            "the inventory to age",
        )
        stale = server.judge(typo)
        assert stale["allowed"] is True
        assert "over the 2s limit: reported as warn" in " ".join(
            w.strip() for w in stale["warnings"]
        )
        api.bookmark(NODES)  # the watch speaks again: fresh
        server.wait(lambda: server.judge(typo)["allowed"] is False, "a fresh inventory")
    finally:
        server.stop()


def cache_hits(server: LiveServer) -> float:
    text = server.client.get(server.url + "/metrics").text
    (line,) = [ln for ln in text.splitlines() if ln.startswith("gpu_admission_eval_cache_lookups")
               and 'result="hit"' in ln]  # fmt: skip
    return float(line.rsplit(" ", 1)[1])


def test_heartbeats_keep_the_cache_and_real_changes_reach_decisions(
    api: FakeApiServer, tmp_path: Path
) -> None:
    nodes = example_nodes()
    api.put_many(NODES, nodes)
    server = LiveServer(tmp_path, api)
    try:
        server.wait(lambda: server.ready().status_code == 200, "the first sync")
        assert server.judge(MIG_POD)["allowed"] is True
        assert server.judge(MIG_POD)["allowed"] is True
        hits = cache_hits(server)
        (mig,) = [n for n in nodes if n["metadata"]["name"] == "gpu-a100-mig-0"]
        age = lambda: server.ready().json()["inventoryAgeSeconds"] or 0  # noqa: E731
        server.wait(lambda: age() >= 1.0, "a quiet watch")

        beat = {**mig, "status": {**mig["status"], "conditions": [{"type": "Ready"}]}}
        beat["metadata"] = {
            **mig["metadata"],
            "labels": {**mig["metadata"]["labels"], "nvidia.com/gfd.timestamp": "1800000000"},
        }
        api.put(NODES, beat)
        server.wait(lambda: age() < 0.5, "the heartbeat to arrive")
        assert server.judge(MIG_POD)["allowed"] is True
        assert cache_hits(server) == hits + 1  # the same inventory: the decision was kept

        allocatable = dict(mig["status"]["allocatable"])
        del allocatable["nvidia.com/mig-3g.40gb"]
        api.put(NODES, {**mig, "status": {**mig["status"], "allocatable": allocatable}})
        server.wait(lambda: server.judge(MIG_POD)["allowed"] is False, "the change to arrive")
        assert server.ready().json()["inventoryNodes"] == len(nodes)
    finally:
        server.stop()


def test_a_cluster_without_dra_serves_with_no_dra_supply(
    api: FakeApiServer, tmp_path: Path
) -> None:
    """The fake apiserver serves no resource.k8s.io (404, as a cluster before 1.34 does):
    not an error, just no DRA supply; the lists are asked for and retried later."""
    api.put_many(NODES, example_nodes())
    server = LiveServer(tmp_path, api)
    try:
        server.wait(lambda: server.ready().status_code == 200, "the first sync")
        ready = server.ready().json()
        assert ready["inventoryDraDevices"] == 0 and ready["inventoryError"] is None
        for plural in ("deviceclasses", "resourceslices", "resourceclaimtemplates"):
            path = f"/apis/resource.k8s.io/v1/{plural}"
            server.wait(lambda p=path: bool(api.list_requests(p)), f"a list of {plural}")
        assert server.judge(MIG_POD)["allowed"] is True
    finally:
        server.stop()
