"""The GPU access model: what each container reaches, through which field."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from tests.support.builders import container, pod
from webhook.checks import device_injection, memory_fit, resource_names, slo_class
from webhook.core.access.hostpaths import normalise
from webhook.core.access.model import (
    EnvFrom,
    HostPath,
    PodAccess,
    PodClaim,
    gpu_amounts,
    gpu_requests,
    gpu_resources,
    pod_access,
)
from webhook.core.workloads.pods import PodView
from webhook.core.workloads.targets import pod_views

RULES = device_injection.Params().rules
NVD = "NVIDIA_VISIBLE_DEVICES"
LIMIT = ("resources", "limits")


def view(obj: dict[str, Any]) -> PodView:
    (only,) = pod_views(obj) or []
    return only


def access_of(obj: dict[str, Any]) -> PodAccess:
    return pod_access(view(obj), rules=RULES)


def seen(obj: dict[str, Any]) -> list[tuple[str, list[tuple[str, tuple[str | int, ...], str]]]]:
    """Per container: its requests and grants as (channel, path, name)."""
    out = []
    for each in access_of(obj).by_container():
        items = [("resource", a.path, a.resource) for a in each.requests]
        items += [(g.channel, g.path, g.name) for g in each.grants]
        out.append((each.container.label, items))
    return out


C0 = ("spec", "containers", 0)
I0 = ("spec", "initContainers", 0)
E0 = ("spec", "ephemeralContainers", 0)
HOST = ("spec", "volumes", 0, "hostPath", "path")


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        # A zero count is no GPU request; the variable is a grant either way.
        (
            pod(container(limits={"nvidia.com/gpu": 0}, env=[{"name": NVD, "value": "all"}])),
            [('container "main"', [("env", (*C0, "env", 0), NVD)])],
        ),
        (
            pod(container(limits={"nvidia.com/gpu": 1}, env=[{"name": NVD, "value": "all"}])),
            [
                (
                    'container "main"',
                    [
                        ("resource", (*C0, *LIMIT, "nvidia.com/gpu"), "nvidia.com/gpu"),
                        ("env", (*C0, "env", 0), NVD),
                    ],
                )
            ],
        ),
        (
            pod(container(requests={"nvidia.com/mig-1g.10gb": "1"})),
            [
                (
                    'container "main"',
                    [
                        (
                            "resource",
                            (*C0, "resources", "requests", "nvidia.com/mig-1g.10gb"),
                            "nvidia.com/mig-1g.10gb",
                        )
                    ],
                )
            ],
        ),
        # Safe values and other variables are no grant; valueFrom is one.
        (
            pod(
                container(
                    env=[
                        {"name": NVD, "value": " Void "},
                        {"name": "CUDA_VISIBLE_DEVICES", "value": "0"},
                        {"name": "NVIDIA_IMEX_CHANNELS", "valueFrom": {"fieldRef": {}}},
                    ]
                )
            ),
            [('container "main"', [("env", (*C0, "env", 2), "NVIDIA_IMEX_CHANNELS")])],
        ),
        # A hostPath reaches every container that mounts it, init and ephemeral ones too.
        (
            pod(
                container(volumeMounts=[{"name": "d", "mountPath": "/d"}]),
                initContainers=[container("init", volumeMounts=[{"name": "d", "mountPath": "/d"}])],
                ephemeralContainers=[container("dbg")],
                volumes=[{"name": "d", "hostPath": {"path": "/dev/char/195:0"}}],
            ),
            [
                ('init container "init"', [("host-path", HOST, "/dev/char/195:0")]),
                ('container "main"', [("host-path", HOST, "/dev/char/195:0")]),
                ('ephemeral container "dbg"', []),
            ],
        ),
        (
            pod(
                container(securityContext={"privileged": True}),
                ephemeralContainers=[container("dbg", securityContext={"privileged": True})],
            ),
            [
                (
                    'container "main"',
                    [("privileged", (*C0, "securityContext", "privileged"), "main")],
                ),
                (
                    'ephemeral container "dbg"',
                    [("privileged", (*E0, "securityContext", "privileged"), "dbg")],
                ),
            ],
        ),
        # GKE's annotation is for the container it names; CDI's, for all of them.
        (
            pod(
                container("main"),
                container("side"),
                annotations={"devices.gke.io/container.side": "- path: /dev/nvidia0", "x": "y"},
            ),
            [
                ('container "main"', []),
                (
                    'container "side"',
                    [
                        (
                            "device-annotation",
                            ("metadata", "annotations", "devices.gke.io/container.side"),
                            "devices.gke.io/container.side",
                        )
                    ],
                ),
            ],
        ),
        (
            pod(container("a"), initContainers=[container("b")], annotations={"cdi.k8s.io/x": "y"}),
            [
                (
                    'init container "b"',
                    [
                        (
                            "cdi-annotation",
                            ("metadata", "annotations", "cdi.k8s.io/x"),
                            "cdi.k8s.io/x",
                        )
                    ],
                ),
                (
                    'container "a"',
                    [
                        (
                            "cdi-annotation",
                            ("metadata", "annotations", "cdi.k8s.io/x"),
                            "cdi.k8s.io/x",
                        )
                    ],
                ),
            ],
        ),
        (
            pod(
                container(
                    volumeMounts=[
                        {"name": "v", "mountPath": "/var/run/nvidia-container-devices/all"}
                    ]
                )
            ),
            [
                (
                    'container "main"',
                    [
                        (
                            "device-list-mount",
                            (*C0, "volumeMounts", 0, "mountPath"),
                            "/var/run/nvidia-container-devices/all",
                        )
                    ],
                )
            ],
        ),
        # DRA: claims are recorded per container, with no judgement yet.
        (
            pod(
                container(resources={"claims": [{"name": "gpu"}, {"name": "none-such"}]}),
                resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            ),
            [
                (
                    'container "main"',
                    [
                        ("claim", (*C0, "resources", "claims", 0), "gpu"),
                        ("claim", (*C0, "resources", "claims", 1), "none-such"),
                    ],
                )
            ],
        ),
        # Hostile shapes are no grant and no crash.
        (
            pod(
                container(
                    env=["x", None, {"name": [NVD]}, {"name": NVD, "value": {"a": 1}}],
                    envFrom="all",
                    volumeMounts=[None, {"name": ["d"]}, {"mountPath": 7}],
                    securityContext=["privileged"],
                    resources={"claims": "gpu"},
                ),
                volumes=[None, {"name": "d", "hostPath": "/dev"}, {"hostPath": {"path": 1}}],
                resourceClaims={"gpu": {}},
            ),
            [('container "main"', [("env", (*C0, "env", 3), NVD)])],
        ),
    ],
    ids=[
        "zero-gpus-visible-all",
        "one-gpu-visible-all",
        "request-only",
        "safe-values-and-valueFrom",
        "hostpath-users",
        "privileged-ephemeral",
        "gke-annotation",
        "cdi-annotation",
        "device-list-mount",
        "dra-claims",
        "hostile-shapes",
    ],
)
def test_what_each_container_reaches(obj: dict[str, Any], expected: list[Any]) -> None:
    assert seen(obj) == expected


def test_grant_details() -> None:
    obj = pod(
        container(
            env=[{"name": NVD, "valueFrom": {"configMapKeyRef": {"name": "g", "key": "k"}}}],
            envFrom=[{"secretRef": {"name": "creds"}, "prefix": "NVIDIA_MIG_"}],
            volumeMounts=[{"name": "p", "mountPath": "/p", "subPath": "driver/nvidia"}],
            resources={"claims": [{"name": "gpu", "request": "big"}]},
        ),
        volumes=[
            {"name": "p", "hostPath": {"path": "/proc/"}},
            {"name": "spare", "hostPath": {"path": "//proc/1/root"}},
        ],
        resourceClaims=[{"name": "gpu", "resourceClaimName": "shared-gpu"}],
    )
    access = access_of(obj)
    by = {g.channel: g for g in access.grants}
    # valueFrom: nothing to show, nothing proven
    assert by["env"].value.setting[:3] == ("unknowable", None, 0)
    assert by["env"].value.setting.why == "valueFrom"
    assert by["env-from"].unknowable
    assert by["env-from"].value == EnvFrom(
        "Secret",
        "creds",
        "NVIDIA_MIG_",
        ("NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES"),
    )
    claim = PodClaim("gpu", "resourceClaimName", "shared-gpu", ("spec", "resourceClaims", 0))
    assert access.claims == (claim,)
    assert by["claim"].value == claim
    host = [(g.path, g.reaches, g.value) for g in access.grants if g.channel == "host-path"]
    main = access.containers[0]
    assert host == [
        # The unmounted volume first (it reaches no container yet), then the subPath.
        (
            ("spec", "volumes", 1, "hostPath", "path"),
            (),
            HostPath("spare", "//proc/1/root", "/proc/1/root"),
        ),
        (
            (*C0, "volumeMounts", 0, "subPath"),
            (main,),
            HostPath("p", "/proc/", "/proc", "driver/nvidia"),
        ),
    ]


def test_worked_out_once_per_pod_and_policy() -> None:
    v = view(pod(container(limits={"nvidia.com/gpu": 2})))
    assert pod_access(v, rules=RULES) is pod_access(v, rules=RULES)
    # Checks with the same GPU globs share one selection, so one list of requests.
    gpus = memory_fit.Params().gpus
    assert gpus is slo_class.Params().gpus is RULES.gpus
    assert gpu_requests(v, gpus=gpus) is pod_access(v, rules=RULES).requests


@pytest.mark.parametrize(
    ("limits", "amounts", "requests"),
    [
        (
            {"nvidia.com/gpu": 1, "amd.com/gpu": 0},
            ["nvidia.com/gpu", "amd.com/gpu"],
            ["nvidia.com/gpu"],
        ),
        ({"nvidia.com/gpu": "500m"}, ["nvidia.com/gpu"], ["nvidia.com/gpu"]),  # a fraction asks
        ({"nvidia.com/gpu": "one"}, ["nvidia.com/gpu"], []),  # not a quantity: asks nothing
        ({"nvidia.com/hostdev": 1, "example.com/gpu": 1}, [], []),  # not GPUs by these rules
    ],
)
def test_requests_are_counts_above_zero(
    limits: dict[str, Any], amounts: list[str], requests: list[str]
) -> None:
    v = view(pod(container(limits=limits)))
    gpus = resource_names.Params().gpus
    assert [a.resource for a in gpu_amounts(v, gpus=gpus)] == amounts
    assert [a.resource for a in gpu_requests(v, gpus=gpus)] == requests


def test_gpu_selections_are_shared_by_value() -> None:
    assert gpu_resources(include=("a/*",)) is gpu_resources(include=("a/*",))
    # A glob character in a vendor prefix stays literal.
    odd = gpu_resources(prefixes=("we[ir]d.com/",))
    assert odd.is_gpu("we[ir]d.com/gpu") and not odd.is_gpu("wei.com/gpu")


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("/dev/nvidia0", "/dev/nvidia0"),
        ("//dev/./nvidia0/", "/dev/nvidia0"),
        ("dev/../../dev/nvidia0", "/dev/nvidia0"),
        ("/" * 1_000_000 + "dev", "/dev"),
        ("/a" * 500_000, "/a" * 500_000),
        ("", "/"),
    ],
    ids=["plain", "dots", "climb", "1MB-slashes", "1MB-deep", "empty"],
)
def test_normalise(raw: str, normal: str) -> None:
    assert normalise(raw) == normal


def test_a_huge_path_is_classified_without_a_cache() -> None:
    devices = RULES.devices
    assert devices.reason("/dev/nvidia0" + "x" * 1_000_000) == "a GPU device node"
    assert devices.reason("/data/" + "x" * 1_000_000) is None
    # Nothing keyed by user text is kept: the normaliser has no cache to grow.
    assert not hasattr(normalise, "cache_info")


def test_parameters_pickle_after_their_rules_are_built() -> None:
    params = device_injection.Params(device_paths=("/dev/vfio/*",))
    assert params.rules.devices.reason("/dev/vfio/3") == "a GPU device node"
    copy = pickle.loads(pickle.dumps(params))  # the compiled rules are not state
    assert copy == params and copy.rules.devices.reason("/dev/vfio/3") == "a GPU device node"
