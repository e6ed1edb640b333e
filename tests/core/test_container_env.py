"""The container env as the kubelet resolves it (makeEnvironmentVariables, expansion.Expand)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.builders import container, pod
from webhook.core.access.container_env import MAX_VALUE, ContainerEnv, pod_sets
from webhook.core.access.runtimes import amd_devices, nvidia_devices
from webhook.core.workloads.targets import pod_views

NVD = "NVIDIA_VISIBLE_DEVICES"
CM = {"configMapKeyRef": {"name": "gpus", "key": "list"}}


def v(name: str, value: Any = None, **more: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"name": name, **more}
    if value is not None:
        item["value"] = value
    return item


@pytest.mark.parametrize(
    ("env", "env_from", "expected"),
    [
        # Unset: the image decides.
        ([], [], ("unset", None, None)),
        ([v("OTHER", "all")], [], ("unset", None, None)),
        # A later entry of the same name wins (tmpEnv[name] = value, in order).
        ([v(NVD, "all"), v(NVD, "void")], [], ("set", "void", 1)),
        ([v(NVD, "void"), v(NVD, "all")], [], ("set", "all", 1)),
        # An empty value is set, and empty.
        ([v(NVD, "")], [], ("set", "", 0)),
        ([v(NVD)], [], ("set", "", 0)),
        # valueFrom cannot be known; a non-empty value wins over it, as the kubelet reads it.
        ([v(NVD, valueFrom=CM)], [], ("unknowable", None, 0)),
        ([v(NVD, "void", valueFrom=CM)], [], ("set", "void", 0)),
        # env wins over envFrom; envFrom alone is unknowable.
        ([v(NVD, "void")], [{"configMapRef": {"name": "c"}}], ("set", "void", 0)),
        ([], [{"configMapRef": {"name": "c"}}], ("unknowable", None, None)),
        ([], [{"configMapRef": {"name": "c"}, "prefix": "NVIDIA_"}], ("unknowable", None, None)),
        ([], [{"configMapRef": {"name": "c"}, "prefix": "APP_"}], ("unset", None, None)),
        ([], [{"configMapRef": {"name": "c"}, "prefix": NVD}], ("unset", None, None)),
        # $(VAR) takes the value of an earlier entry.
        ([v("X", "all"), v(NVD, "$(X)")], [], ("set", "all", 1)),
        ([v("X", "0"), v(NVD, "$(X),1")], [], ("set", "0,1", 1)),
        ([v("X", "a"), v("Y", "$(X)ll"), v(NVD, "$(Y)")], [], ("set", "all", 2)),
        # ... not of a later one, nor of an undefined one: those stay as written.
        ([v(NVD, "$(X)"), v("X", "all")], [], ("set", "$(X)", 0)),
        ([v(NVD, "$(NOPE)")], [], ("set", "$(NOPE)", 0)),
        # A reference to itself is its earlier value.
        ([v(NVD, "0"), v(NVD, "$(NVIDIA_VISIBLE_DEVICES),1")], [], ("set", "0,1", 1)),
        # $$ is one $; $x and a trailing $ stay; an unclosed $( stays.
        ([v("X", "all"), v(NVD, "$$(X)")], [], ("set", "$(X)", 1)),
        ([v(NVD, "a$$b$x$")], [], ("set", "a$b$x$", 0)),
        ([v("X", "all"), v(NVD, "$(X")], [], ("set", "$(X", 1)),
        # A reference to valueFrom, to envFrom, or to a service link cannot be known.
        ([v("X", valueFrom=CM), v(NVD, "$(X)")], [], ("unknowable", None, 1)),
        ([v(NVD, "$(X)")], [{"secretRef": {"name": "s"}}], ("unknowable", None, 0)),
        ([v(NVD, "$(GPU_SERVICE_PORT)")], [], ("unknowable", None, 0)),
        ([v(NVD, "$(DB_PORT_5432_TCP_PORT)")], [], ("unknowable", None, 0)),
    ],
)
def test_kubelet_precedence_and_expansion(
    env: list[Any], env_from: list[Any], expected: tuple[str, str | None, int | None]
) -> None:
    got = ContainerEnv(env, env_from).get(NVD)
    assert (got.state, got.value, got.entry) == expected


def test_expansion_that_grows_without_bound_is_not_built() -> None:
    env = [v("A", "x" * 1000)]
    for i in range(1, 12):  # doubles each time: 2 MB by the end
        env.append(v(f"A{i}" if i > 1 else "A1", f"$(A{i - 1 if i > 1 else ''})" * 2))
    env.append(v(NVD, "$(A11)"))
    resolved = ContainerEnv(env, [])
    assert resolved.get("A6")[:2] == ("set", "x" * 64000)
    assert resolved.get("A7").why == f"its expansion grows past {MAX_VALUE} characters"
    assert resolved.get(NVD).why == "$(A11) cannot be known either"


def test_unknowable_says_why() -> None:
    env = [v("X", valueFrom=CM), v(NVD, "$(X),$(Y_SERVICE_HOST)")]
    got = ContainerEnv(env, []).get(NVD)
    assert got.why == "$(X) comes from valueFrom; $(Y_SERVICE_HOST) may be a service link variable"
    assert got.written == "$(X),$(Y_SERVICE_HOST)"


@pytest.mark.parametrize("field", ["containers", "initContainers", "ephemeralContainers"])
def test_pod_sets_answers_per_container(field: str) -> None:
    c = container("x", env=[v("G", "all"), v(NVD, "$(G)")])
    obj = pod(container("app"), **{field: [c]}) if field != "containers" else pod(c)
    (view,) = pod_views(obj)
    ref = next(r for r in view.containers if r.name == "x")
    assert pod_sets(view, ref, NVD)[:2] == ("set", "all")
    assert pod_sets(view, ref, "AMD_VISIBLE_DEVICES").state == "unset"


@pytest.mark.parametrize(
    ("value", "devices"),
    [
        ("all", ("all",)),
        (" all ", ("all",)),
        ("0,1", ("0", "1")),
        ("GPU-8a3e", ("GPU-8a3e",)),
        ("void", ()),
        ("all,void", ()),  # void anywhere wins
        ("0, void", ()),
        ("none", ()),
        ("none,all", ()),  # the first of all/none decides
        ("0,all", ("all",)),
        ("", ()),
        (" , ", ()),
        ("VOID", ("VOID",)),  # case matters to the toolkit: a device named VOID
    ],
)
def test_nvidia_device_list(value: str, devices: tuple[str, ...]) -> None:
    assert nvidia_devices(value) == devices


def test_imex_all_is_ignored() -> None:
    assert nvidia_devices("all", imex=True) == ()
    assert nvidia_devices("0,1", imex=True) == ("0", "1")


@pytest.mark.parametrize(
    ("value", "gpus"),
    [
        ("all", ("all",)),
        ("ALL", ("all",)),
        ("aLL", ()),
        ("0", ("0",)),
        ("0-3,5", ("0-3", "5")),
        ("3-1", ()),
        ("0xEF2C1799A1F3E2ED", ("0xEF2C1799A1F3E2ED",)),
        ("EF2C1799A1F3E2ED", ("EF2C1799A1F3E2ED",)),
        ("none", ()),
        ("void", ()),
        ("", ()),
        (" 1", ()),  # not trimmed: Atoi fails, the item is ignored
        ("-1", ()),
    ],
)
def test_amd_device_list(value: str, gpus: tuple[str, ...]) -> None:
    assert amd_devices(value) == gpus
