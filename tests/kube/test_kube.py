"""The kube client and node watch through the real kubernetes client and a fake apiserver."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from tests.support.fakeapiserver import FakeApiServer, make_objects, wait_until
from webhook.kube import client as kube
from webhook.kube.client import (
    NODES,
    PODS,
    KubeApiError,
    KubeConfigError,
    KubeError,
    ListExpiredError,
    ResourceRef,
    api_client,
    list_objects,
)
from webhook.kube.node_watch import NodeWatcher

POD_KEY = ("", "v1", "pods")
NODE_KEY = ("", "v1", "nodes")
PYTORCHJOBS = ResourceRef("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob")


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        server.serve(*POD_KEY, "Pod", namespaced=True)
        server.serve(*NODE_KEY, "Node", namespaced=False)
        yield server


@pytest.fixture
def client(api: FakeApiServer) -> Iterator[k8s.ApiClient]:
    with k8s.ApiClient(api.configuration()) as c:
        yield c


# -- list_objects ----------------------------------------------------------------------


def test_list_objects_pages_through_everything(api: FakeApiServer, client: k8s.ApiClient) -> None:
    api.put_many(POD_KEY, list(make_objects("Pod", 1234, namespaces=3)))

    pods = list(list_objects(client, resource=PODS, namespace=None, page_size=100))

    assert len(pods) == 1234
    assert len({(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods}) == 1234
    assert all(list(p)[:2] == ["apiVersion", "kind"] for p in pods)
    assert {(p["apiVersion"], p["kind"]) for p in pods} == {("v1", "Pod")}
    requests = api.list_requests("/api/v1/pods")
    assert len(requests) == 13
    assert all(r.query["limit"] == "100" for r in requests)
    assert "continue" not in requests[0].query
    assert all(r.query["continue"] for r in requests[1:])
    assert len({r.query.get("continue") for r in requests}) == 13
    assert requests[0].headers["authorization"] == "Bearer fake-token"
    assert requests[0].headers["accept"] == "application/json"


def test_list_objects_is_lazy_one_page_at_a_time(api: FakeApiServer, client: k8s.ApiClient) -> None:
    api.put_many(POD_KEY, list(make_objects("Pod", 250)))
    objects = list_objects(client, resource=PODS, namespace=None, page_size=100)

    first = [next(objects) for _ in range(100)]

    assert len(first) == 100
    assert len(api.list_requests("/api/v1/pods")) == 1


def test_list_objects_in_one_namespace(api: FakeApiServer, client: k8s.ApiClient) -> None:
    api.put_many(POD_KEY, list(make_objects("Pod", 30, namespaces=3)))

    pods = list(list_objects(client, resource=PODS, namespace="ns-1", page_size=7))

    assert len(pods) == 10
    assert {p["metadata"]["namespace"] for p in pods} == {"ns-1"}
    assert {r.path for r in api.requests} == {"/api/v1/namespaces/ns-1/pods"}


def test_list_objects_custom_resource(api: FakeApiServer, client: k8s.ApiClient) -> None:
    api.serve("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", namespaced=True)
    api.put(("kubeflow.org", "v1", "pytorchjobs"), {"metadata": {"name": "j", "namespace": "ml"}})

    jobs = list(list_objects(client, resource=PYTORCHJOBS, namespace="ml"))

    assert [(j["apiVersion"], j["kind"], j["metadata"]["name"]) for j in jobs] == [
        ("kubeflow.org/v1", "PyTorchJob", "j")
    ]
    assert api.requests[0].path == "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs"


def test_unserved_custom_resource_is_skipped_with_a_note(client: k8s.ApiClient) -> None:
    notes: list[str] = []

    jobs = list(list_objects(client, resource=PYTORCHJOBS, namespace=None, notes=notes))

    assert jobs == []
    assert notes == [
        "skipped pytorchjobs.kubeflow.org/v1: not served by this cluster "
        "(is the PyTorchJob CRD installed?)"
    ]


@pytest.mark.parametrize(
    ("resource", "fail", "error", "message"),
    [
        (
            ResourceRef("apps", "v1", "deployments", "Deployment"),
            None,
            KubeApiError,
            "GET /apis/apps/v1/deployments: HTTP 404: the server could not find the requested "
            "resource",
        ),
        (PODS, 403, KubeApiError, "GET /api/v1/pods: HTTP 403: injected 403"),
        (PODS, 500, KubeApiError, "GET /api/v1/pods: HTTP 500: injected 500"),
        (
            PYTORCHJOBS,
            403,
            KubeApiError,
            "GET /apis/kubeflow.org/v1/pytorchjobs: HTTP 403: injected 403",
        ),
    ],
)
def test_list_errors(
    api: FakeApiServer,
    client: k8s.ApiClient,
    resource: ResourceRef,
    fail: int | None,
    error: type[Exception],
    message: str,
) -> None:
    if fail:
        api.fail_next(resource.plural, fail)
    with pytest.raises(error) as caught:
        list(list_objects(client, resource=resource, namespace=None, notes=[]))
    assert str(caught.value) == message


def test_bad_token_is_an_error(api: FakeApiServer) -> None:
    config = api.configuration()
    config.api_key = {"BearerToken": "Bearer wrong", "authorization": "Bearer wrong"}
    with k8s.ApiClient(config) as c, pytest.raises(KubeApiError) as caught:
        list(list_objects(c, resource=PODS, namespace=None))
    assert caught.value.status == 401


def test_expired_continue_token_raises(api: FakeApiServer, client: k8s.ApiClient) -> None:
    api.put_many(POD_KEY, list(make_objects("Pod", 250)))
    objects = list_objects(client, resource=PODS, namespace=None, page_size=100)
    seen = [next(objects) for _ in range(100)]
    api.expire_continue_tokens()

    with pytest.raises(ListExpiredError) as caught:
        seen.extend(objects)

    assert len(seen) == 100
    assert caught.value.status == 410
    assert str(caught.value) == (
        "the list of pods expired between pages: the server keeps a continue token for about "
        "5 minutes and the next page was asked for later; list again"
    )


def test_unreachable_server() -> None:
    config = k8s.Configuration(host="http://127.0.0.1:9")
    config.retries = False
    with (
        k8s.ApiClient(config) as c,
        pytest.raises(KubeError, match="cannot reach the Kubernetes API"),
    ):
        list(list_objects(c, resource=PODS, namespace=None))


@pytest.mark.parametrize(
    ("resource", "namespace", "path"),
    [
        (PODS, None, "/api/v1/pods"),
        (PODS, "a", "/api/v1/namespaces/a/pods"),
        (NODES, "a", "/api/v1/nodes"),
        (PYTORCHJOBS, "a", "/apis/kubeflow.org/v1/namespaces/a/pytorchjobs"),
        (PYTORCHJOBS, None, "/apis/kubeflow.org/v1/pytorchjobs"),
    ],
)
def test_resource_paths(resource: ResourceRef, namespace: str | None, path: str) -> None:
    assert resource.path(namespace) == path


def test_workload_table_covers_the_kinds() -> None:
    kinds = {(r.api_version, r.kind) for r in kube.WORKLOADS}
    assert ("apps/v1", "Deployment") in kinds
    assert ("batch/v1", "CronJob") in kinds
    assert ("kubeflow.org/v2beta1", "MPIJob") in kinds
    assert ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet") in kinds
    assert len(kube.WORKLOADS) == 15
    assert not NODES.namespaced


# -- NodeWatcher -----------------------------------------------------------------------


class Changes:
    """Records what on_change received, for assertions from the test thread."""

    def __init__(self, fail_first: int = 0) -> None:
        self.calls: list[list[dict[str, Any]]] = []
        self.fail_first = fail_first
        self.lock = threading.Lock()

    def __call__(self, nodes: list[dict[str, Any]]) -> None:
        with self.lock:
            self.calls.append(nodes)
            if len(self.calls) <= self.fail_first:
                raise RuntimeError("callback bug")

    def names(self) -> list[str] | None:
        with self.lock:
            return sorted(n["metadata"]["name"] for n in self.calls[-1]) if self.calls else None

    def wait_for(self, names: list[str]) -> None:
        wait_until(lambda: self.names() == names, 5, f"nodes {names} (last: {self.names()})")


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 1
        return self.now


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": {}}}


@pytest.fixture
def watching(
    api: FakeApiServer, client: k8s.ApiClient
) -> Iterator[tuple[NodeWatcher, Changes, FakeClock]]:
    for name in ("n1", "n2", "n3"):
        api.put(NODE_KEY, node(name))
    changes, clock = Changes(), FakeClock()
    watcher = NodeWatcher(
        client, on_change=changes, backoff_initial=0.05, backoff_max=0.2, clock=clock, page_size=2
    )
    watcher.start()
    changes.wait_for(["n1", "n2", "n3"])
    api.wait_for_watches(1)
    yield watcher, changes, clock
    watcher.stop()


def test_first_sync_lists_then_watches(
    api: FakeApiServer, watching: tuple[NodeWatcher, Changes, FakeClock]
) -> None:
    watcher, changes, clock = watching

    assert watcher.synced
    assert watcher.node_count == 3
    assert watcher.last_sync is not None and watcher.last_sync <= clock.now
    assert watcher.errors == 0
    assert all(n["kind"] == "Node" and n["apiVersion"] == "v1" for n in changes.calls[0])
    lists = api.list_requests("/api/v1/nodes")
    assert [r.query["limit"] for r in lists] == ["2", "2"]
    (watch,) = api.watch_requests("/api/v1/nodes")
    assert watch.query == {
        "watch": "true",
        "resourceVersion": "1003",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "300",
    }


def test_events_are_applied(
    api: FakeApiServer, watching: tuple[NodeWatcher, Changes, FakeClock]
) -> None:
    watcher, changes, _ = watching

    api.put(NODE_KEY, node("n4"))
    changes.wait_for(["n1", "n2", "n3", "n4"])
    api.put(NODE_KEY, node("n2", gpu="a100"))
    wait_until(lambda: any(n["metadata"]["labels"] for n in changes.calls[-1]))
    api.delete(NODE_KEY, "n1")
    changes.wait_for(["n2", "n3", "n4"])

    (n2,) = [n for n in changes.calls[-1] if n["metadata"]["name"] == "n2"]
    assert n2["metadata"]["labels"] == {"gpu": "a100"}
    assert watcher.node_count == 3
    assert len(api.list_requests("/api/v1/nodes")) == 2  # the first list only


def test_events_that_arrive_together_make_one_change(
    api: FakeApiServer, watching: tuple[NodeWatcher, Changes, FakeClock]
) -> None:
    _, changes, _ = watching
    calls = len(changes.calls)

    with api.batch():
        api.put(NODE_KEY, node("n4"))
        api.put(NODE_KEY, node("n5"))
        api.delete(NODE_KEY, "n1")
    changes.wait_for(["n2", "n3", "n4", "n5"])

    assert len(changes.calls) == calls + 1


def test_broken_stream_reconnects_and_keeps_nodes(
    api: FakeApiServer, watching: tuple[NodeWatcher, Changes, FakeClock]
) -> None:
    watcher, changes, _ = watching
    api.put(NODE_KEY, node("n4"))
    changes.wait_for(["n1", "n2", "n3", "n4"])
    api.fail_next("/api/v1/nodes", 503, count=2)  # the first two reconnects fail

    api.break_watches()
    wait_until(lambda: watcher.errors == 3, what="a break and two failed reconnects")
    assert watcher.node_count == 4
    api.wait_for_watches(1)
    api.put(NODE_KEY, node("n5"))
    changes.wait_for(["n1", "n2", "n3", "n4", "n5"])

    assert len(api.list_requests("/api/v1/nodes")) == 2  # resumed, not re-listed
    watches = api.watch_requests("/api/v1/nodes")
    assert watches[-1].query["resourceVersion"] == "1004"  # n4's resourceVersion
    assert watcher.relists == 0


@pytest.mark.parametrize("gone_as_http", [False, True])
def test_resume_after_compaction_relists(
    api: FakeApiServer, watching: tuple[NodeWatcher, Changes, FakeClock], gone_as_http: bool
) -> None:
    watcher, changes, _ = watching
    api.gone_as_http = gone_as_http
    api.break_watches()
    wait_until(lambda: watcher.errors == 1)
    # Missed while away, and the server no longer has the history:
    api.delete(NODE_KEY, "n1", quiet=True)
    api.put(NODE_KEY, node("n9"), quiet=True)
    api.compact()

    changes.wait_for(["n2", "n3", "n9"])

    assert watcher.relists == 1
    assert len(api.list_requests("/api/v1/nodes")) == 4  # two pages, twice


def test_gone_event_relists(
    api: FakeApiServer, watching: tuple[NodeWatcher, Changes, FakeClock]
) -> None:
    watcher, changes, _ = watching
    api.delete(NODE_KEY, "n3", quiet=True)

    api.error_event(NODE_KEY, 410)

    changes.wait_for(["n1", "n2"])
    assert (watcher.relists, watcher.errors) == (1, 0)
    api.wait_for_watches(1)


def test_bookmark_and_clean_end_resume_from_the_latest_version(
    api: FakeApiServer, watching: tuple[NodeWatcher, Changes, FakeClock]
) -> None:
    watcher, _, _ = watching
    before = watcher.last_sync

    rv = api.bookmark(NODE_KEY)
    wait_until(lambda: watcher.last_sync != before, what="the bookmark")
    api.end_watches()  # as when timeoutSeconds runs out
    wait_until(lambda: len(api.watch_requests("/api/v1/nodes")) == 2)

    assert api.watch_requests("/api/v1/nodes")[-1].query["resourceVersion"] == str(rv)
    assert watcher.errors == 0


def test_watches_that_end_at_once_back_off(api: FakeApiServer, client: k8s.ApiClient) -> None:
    # timeoutSeconds=0 makes the fake end every watch at once, with no event.
    watcher = NodeWatcher(
        client, on_change=Changes(), backoff_initial=0.2, backoff_max=0.4, watch_timeout=0
    )
    watcher.start()
    try:
        time.sleep(1.0)
        watches = len(api.watch_requests("/api/v1/nodes"))
    finally:
        watcher.stop()
    assert 1 <= watches <= 7  # 0.1-0.2 s, then 0.2-0.4 s apart; hundreds if it spun
    assert watcher.errors == 0


def test_initial_list_failure_retries(api: FakeApiServer, client: k8s.ApiClient) -> None:
    api.put(NODE_KEY, node("n1"))
    api.fail_next("/api/v1/nodes", 500, count=2)
    changes = Changes()
    watcher = NodeWatcher(client, on_change=changes, backoff_initial=0.02, backoff_max=0.05)
    assert not watcher.synced and watcher.last_sync is None

    watcher.start()
    try:
        changes.wait_for(["n1"])
        assert watcher.synced
        assert watcher.errors == 2
    finally:
        watcher.stop()


def test_callback_errors_do_not_stop_the_watch(api: FakeApiServer, client: k8s.ApiClient) -> None:
    api.put(NODE_KEY, node("n1"))
    changes = Changes(fail_first=2)
    watcher = NodeWatcher(client, on_change=changes)
    watcher.start()
    try:
        changes.wait_for(["n1"])
        api.wait_for_watches(1)
        api.put(NODE_KEY, node("n2"))
        changes.wait_for(["n1", "n2"])
        api.put(NODE_KEY, node("n3"))
        changes.wait_for(["n1", "n2", "n3"])
        assert watcher.errors == 0
    finally:
        watcher.stop()


def test_stop_is_prompt_during_an_idle_watch(
    api: FakeApiServer, watching: tuple[NodeWatcher, Changes, FakeClock]
) -> None:
    watcher, _, _ = watching

    started = time.monotonic()
    watcher.stop()

    assert time.monotonic() - started < 2.0
    api.wait_for_watches(0)
    assert watcher.errors == 0


def test_stop_is_prompt_during_backoff(client: k8s.ApiClient, api: FakeApiServer) -> None:
    api.fail_next("/api/v1/nodes", 500, count=1000)
    watcher = NodeWatcher(client, on_change=Changes(), backoff_initial=30, backoff_max=30)
    watcher.start()
    wait_until(lambda: watcher.errors == 1)

    started = time.monotonic()
    watcher.stop()

    assert time.monotonic() - started < 2.0


# -- api_client ------------------------------------------------------------------------


def kubeconfig(server: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "prod",
        "clusters": [
            {"name": "prod", "cluster": {"server": "https://prod.example:6443"}},
            {"name": "local", "cluster": {"server": server}},
        ],
        "users": [{"name": "me", "user": {"token": "fake-token"}}],
        "contexts": [
            {"name": "prod", "context": {"cluster": "prod", "user": "me"}},
            {"name": "local", "context": {"cluster": "local", "user": "me"}},
        ],
    }


@pytest.fixture(autouse=True)
def outside_a_pod(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_kubeconfig_current_and_chosen_context(api: FakeApiServer, tmp_path: Path) -> None:
    path = write(tmp_path / "config", yaml.safe_dump(kubeconfig(api.url)))

    assert api_client(kubeconfig=path).configuration.host == "https://prod.example:6443"
    with api_client(kubeconfig=path, context="local") as c:
        assert c.configuration.host == api.url
        assert c.user_agent.startswith("gpu-admission/")
        assert list(list_objects(c, resource=PODS, namespace=None)) == []


def test_kubeconfig_from_the_environment(
    api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", write(tmp_path / "k", yaml.safe_dump(kubeconfig(api.url))))
    assert api_client(context="local").configuration.host == api.url


@pytest.mark.parametrize(
    ("text", "context", "message"),
    [
        (
            None,
            None,
            "kubeconfig {path} (given) does not exist; pass a kubeconfig file, set KUBECONFIG, "
            "or run inside a Pod with a service account",
        ),
        (
            "clusters: [",
            None,
            "kubeconfig {path} is not valid YAML: expected the node content, "
            "but found '<stream end>' at line 1, column 12",
        ),
        ("", None, "kubeconfig {path}: Invalid kube-config. {path} file is empty"),
        (
            "- 1\n",
            None,
            "kubeconfig {path} is not a usable kubeconfig (TypeError: list indices "
            "must be integers or slices, not str)",
        ),
        (
            yaml.safe_dump(kubeconfig("http://x")),
            "staging",
            "kubeconfig {path} has no context 'staging'; it has: prod, local",
        ),
        (
            yaml.safe_dump({**kubeconfig("http://x"), "current-context": None}),
            None,
            "kubeconfig {path} sets no current-context; choose one of prod, local",
        ),
        (
            yaml.safe_dump(kubeconfig("")),
            "local",
            "kubeconfig {path}: the selected cluster has no server URL",
        ),
    ],
)
def test_kubeconfig_errors(
    tmp_path: Path, text: str | None, context: str | None, message: str
) -> None:
    path = tmp_path / "config"
    if text is not None:
        path.write_text(text)
    with pytest.raises(KubeConfigError) as caught:
        api_client(kubeconfig=str(path), context=context)
    assert str(caught.value) == message.format(path=path)


def test_default_kubeconfig_missing(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError) as caught:
        api_client()
    assert str(caught.value).startswith("kubeconfig ~/.kube/config (default) does not exist")


def test_in_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube, "SERVICE_ACCOUNT_DIR", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    write(tmp_path / "token", "sa-token")
    write(tmp_path / "ca.crt", "not checked until a request")

    config = api_client().configuration

    assert config.host == "https://10.0.0.1:443"
    assert config.auth_settings()["BearerToken"]["value"] == "bearer sa-token"
    assert config.ssl_ca_cert == str(tmp_path / "ca.crt")


def test_in_cluster_without_ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube, "SERVICE_ACCOUNT_DIR", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    write(tmp_path / "token", "sa-token")

    with pytest.raises(KubeConfigError) as caught:
        api_client()

    assert str(caught.value) == (
        f"in-cluster config (service account in {tmp_path}) is unusable: "
        "Service certification file does not exist."
    )


class Updates:
    """Records what on_update received (the changed Nodes of each batch)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, changed: dict[str, Any]) -> None:
        with self.lock:
            self.calls.append({k: v and v["metadata"].get("labels") for k, v in changed.items()})

    def wait_for(self, count: int) -> list[dict[str, Any]]:
        wait_until(lambda: len(self.calls) >= count, 5, f"{count} updates (got {self.calls})")
        with self.lock:
            return list(self.calls)


def test_watch_batches_go_to_on_update_with_only_the_changed_nodes(
    api: FakeApiServer, client: k8s.ApiClient
) -> None:
    for name in ("n1", "n2", "n3"):
        api.put(NODE_KEY, node(name))
    changes, updates = Changes(), Updates()
    watcher = NodeWatcher(client, on_change=changes, on_update=updates)
    watcher.start()
    try:
        changes.wait_for(["n1", "n2", "n3"])  # the list: every Node, to on_change
        api.wait_for_watches(1)
        api.put(NODE_KEY, node("n2", gpu="a100"))
        with api.batch():
            api.put(NODE_KEY, node("n4"))
            api.delete(NODE_KEY, "n1")
            api.put(NODE_KEY, node("n4", gpu="h100"))  # the last event of a node wins
        calls = updates.wait_for(2)
    finally:
        watcher.stop()
    assert calls == [{"n2": {"gpu": "a100"}}, {"n4": {"gpu": "h100"}, "n1": None}]
    assert len(changes.calls) == 1
    assert watcher.node_count == 3
