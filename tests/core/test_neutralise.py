"""The neutralising patch: NVIDIA_VISIBLE_DEVICES=void on containers that ask for no GPU,
and nothing on those whose devices come through the variable or a claim."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from webhook.core.access.neutralise import neutralising_patch

VOID = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}


def apply_patch(obj: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 `add`, the only operation the patch uses (the real apiserver applies it
    in tests/e2e/test_mutate_cluster.py)."""
    out = copy.deepcopy(obj)
    for op in ops:
        assert op["op"] == "add"
        *parents, last = op["path"].lstrip("/").split("/")
        node: Any = out
        for step in parents:
            node = node[int(step)] if isinstance(node, list) else node[step]
        if last == "-":
            node.append(op["value"])
        else:
            assert last not in node  # add over an existing member would replace it
            node[last] = op["value"]
    return out


def pod(
    *containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (), **meta: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **meta}, "spec": spec}


@pytest.mark.parametrize(
    ("container", "patched"),
    [
        ({"name": "web", "image": "nginx"}, True),
        ({"name": "web", "env": [{"name": "A", "value": "1"}]}, True),
        ({"name": "web", "envFrom": [{"configMapRef": {"name": "cfg"}}]}, True),  # env wins
        ({"name": "cpu", "resources": {"limits": {"cpu": "1", "amd.com/gpu": 1}}}, True),
        ({"name": "gpu", "resources": {"limits": {"nvidia.com/gpu": 1}}}, False),
        ({"name": "mig", "resources": {"requests": {"nvidia.com/mig-1g.10gb": 1}}}, False),
        ({"name": "hami", "resources": {"limits": {"nvidia.com/gpumem": 4000}}}, False),
        ({"name": "dra", "resources": {"claims": [{"name": "gpu"}]}}, False),
        (
            {"name": "ext", "resources": {"limits": {"deviceclass.resource.kubernetes.io/gpu": 1}}},
            False,
        ),
        ({"name": "own", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}, False),
        ({"name": "own", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]}, False),
    ],
)
def test_which_containers_are_patched(container: dict[str, Any], patched: bool) -> None:
    obj = pod(container)
    ops = neutralising_patch(obj)
    assert bool(ops) is patched
    after = apply_patch(obj, ops)
    env = after["spec"]["containers"][0].get("env", [])
    assert env.count(VOID) == (1 if patched or VOID in container.get("env", []) else 0)
    if patched:  # appended: what the container set before is kept, in order
        assert env[: len(container.get("env", []))] == container.get("env", [])


def test_init_and_regular_containers_each_get_it() -> None:
    obj = pod(
        {"name": "a"},
        {"name": "gpu", "resources": {"limits": {"nvidia.com/gpu": 1}}},
        init=({"name": "fetch", "env": []},),
    )
    after = apply_patch(obj, neutralising_patch(obj))
    assert after["spec"]["initContainers"][0]["env"] == [VOID]
    assert after["spec"]["containers"][0]["env"] == [VOID]
    assert "env" not in after["spec"]["containers"][1]


@pytest.mark.parametrize("annotation", ["gpu-fraction", "gpu-memory"])
def test_a_pod_with_a_gpu_share_is_left_alone(annotation: str) -> None:
    # KAI passes the shared device in the Pod's env (a ConfigMap): void would override it.
    obj = pod({"name": "a", "envFrom": [{"configMapRef": {"name": "kai"}}]},
              annotations={annotation: "0.5"})  # fmt: skip
    assert neutralising_patch(obj) == []


@pytest.mark.parametrize(
    "obj",
    [{}, {"spec": None}, {"spec": {"containers": None}}, {"spec": {"containers": [None, 3]}},
     {"spec": {"containers": [{"name": "a", "env": "x"}]}}],
)  # fmt: skip
def test_odd_objects_get_no_patch_and_no_error(obj: dict[str, Any]) -> None:
    assert neutralising_patch(obj) == []
