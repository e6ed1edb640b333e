"""DRA: the supply model, CEL selectors as Kubernetes evaluates them, and the dra-claims
check through the real CLI (examples/dra, and NVIDIA's DRA driver demos verbatim)."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import pytest

from tests.support.clirun import gpu_admission
from tests.support.paths import ROOT, TESTS
from webhook.core.dra.cel import SelectorCache, SelectorError
from webhook.core.dra.model import Device, DraSupply, Slice, Version, parse_claim, parse_slice

DRA = ROOT / "examples" / "dra"
DATA = TESTS / "data" / "dra"
EXAMPLES = sorted((DRA / "bad").glob("*.yaml")) + sorted((DRA / "good").glob("*.yaml"))

A100 = Device(
    "gpu.nvidia.com",
    "n0",
    "gpu-0",
    "n0",
    {
        "gpu.nvidia.com": {
            "productName": "NVIDIA A100-SXM4-80GB",
            "driverVersion": Version("570.124.6"),
            "index": 0,
            "mig": False,
        }
    },
    {"gpu.nvidia.com": {"memory": Fraction(80 << 30)}},
)


@pytest.mark.parametrize(
    ("expression", "outcome"),
    [
        ("device.driver == 'gpu.nvidia.com'", True),
        ("device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA A100')", True),
        (
            "cel.bind(g, device.attributes['gpu.nvidia.com'], g.index == 0 && !g.mig)",
            True,
        ),
        # A missing attribute is a runtime error, as in the scheduler; .? is not.
        (
            "device.attributes['gpu.nvidia.com'].nope == 'x'",
            'NOT_FOUND: Key not found in map : "nope"',
        ),
        ("device.attributes['gpu.nvidia.com'].?nope.orValue('') == ''", True),
        # A domain no attribute has reads as an empty map (compile.go's mapper).
        ("device.attributes['other.example.com'].size() == 0", True),
        ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) == 0", True),
        ("device.capacity['gpu.nvidia.com'].memory == quantity('81920Mi')", True),
        ("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('90Gi'))", False),
        ("device.capacity['gpu.nvidia.com'].memory.asInteger() == 85899345920", True),
        (
            "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.54.15'))",
            True,
        ),
        ("device.attributes['gpu.nvidia.com'].driverVersion.major() == 570", True),
        # A version is never equal to a string: the selector silently matches nothing.
        ("device.attributes['gpu.nvidia.com'].driverVersion == '570.124.6'", False),
        ("cel.bind(g, device.attributes['gpu.nvidia.com'], g.productName.contains('A100'))", True),
        (
            "device.attributes['gpu.nvidia.com'].productName",
            "the expression evaluates to string, not bool",
        ),
    ],
)
def test_selector_outcomes(expression: str, outcome: object) -> None:
    cache = SelectorCache()
    got = cache.outcomes(expression, Slice("s", "gpu.nvidia.com", "n0", "n0", (A100,)))
    assert got == (outcome,)


@pytest.mark.parametrize("expression", ["device.driver ==", "ip('10.0.0.1').family() == 4"])
def test_selector_that_does_not_compile_here_is_an_error_not_a_miss(expression: str) -> None:
    with pytest.raises(SelectorError):
        SelectorCache().selector(expression)


def test_outcomes_are_cached_per_slice_object() -> None:
    cache = SelectorCache()
    one = Slice("s", "gpu.nvidia.com", "n0", "n0", (A100,))
    expression = "device.driver == 'gpu.nvidia.com'"
    first = cache.outcomes(expression, one)
    assert cache.outcomes(expression, one) is first
    replaced = Slice("s", "gpu.nvidia.com", "n0", "n0", (A100, A100))
    assert cache.outcomes(expression, replaced) == (True, True)


def test_slice_and_claim_versions_parse_alike() -> None:
    v1 = {
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n0",
            "pool": {"name": "n0"},
            "devices": [
                {
                    "name": "gpu-0",
                    "attributes": {"type": {"string": "gpu"}},
                    "capacity": {"memory": {"value": "80Gi"}},
                }
            ],
        },
    }
    v1beta1 = {
        **v1,
        "spec": {
            **v1["spec"],
            "devices": [
                {
                    "name": "gpu-0",
                    "basic": {
                        "attributes": {"type": {"string": "gpu"}},
                        "capacity": {"memory": "80Gi"},
                    },
                }
            ],
        },
    }
    assert parse_slice(v1) == parse_slice(v1beta1)
    claim_v1 = {
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ml"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "g", "count": 0}}]
            }
        },
    }
    claim_beta = {
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "g"}]}},
    }
    one, beta = parse_claim(claim_v1), parse_claim(claim_beta)
    # count 0 is stored as 1 by the apiserver (omitted when zero, then defaulted).
    assert one.requests[0].alternatives[0].count == beta.requests[0].alternatives[0].count == 1
    assert one.requests[0].alternatives[0].device_class == "g"


def test_supply_update_that_changes_nothing_keeps_the_supply() -> None:
    obj = {
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com", "resourceVersion": "1"},
        "spec": {"extendedResourceName": "nvidia.com/gpu"},
    }
    supply = DraSupply().with_object(obj)
    again = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "2"}}
    assert supply.with_object(again) is supply
    assert supply.extended_resources() == {
        "nvidia.com/gpu": ("gpu.nvidia.com",),
        "deviceclass.resource.kubernetes.io/gpu.nvidia.com": ("gpu.nvidia.com",),
    }
    assert supply.without("DeviceClass", "gpu.nvidia.com").classes == {}


def _expected(path: Path) -> list[tuple[str, str]]:
    found = re.findall(r"^# expect: (\S+)(?: \((warn)\))?$", path.read_text(), flags=re.MULTILINE)
    return sorted((rule, action or "deny") for rule, action in found)


@pytest.fixture(scope="module")
def examples_run() -> dict[str, list[tuple[str, str]]]:
    done = gpu_admission(
        "check", "--output", "json", "--inventory", str(DRA / "cluster.yaml"), str(DRA)
    )
    assert done.returncode == 1, done.stderr
    out: dict[str, list[tuple[str, str]]] = {str(p): [] for p in EXAMPLES}
    for r in json.loads(done.stdout)["results"]:
        out.setdefault(
            str(ROOT / r["file"]) if not r["file"].startswith("/") else r["file"], []
        ).append((f"{r['policy']}/{r['rule']}", r["action"]))
    return out


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_dra_example_yields_what_it_says(examples_run: dict, path: Path) -> None:
    assert sorted(examples_run[str(path)]) == _expected(path)


def test_messages_name_the_facts() -> None:
    done = gpu_admission(
        "check", "--output", "json", "--inventory", str(DRA / "cluster.yaml"), str(DRA / "bad")
    )
    messages = {r["rule"]: r["message"] for r in json.loads(done.stdout)["results"]}
    assert messages["unknown-device-class"] == (
        'ResourceClaimTemplate "single-gpu" request "gpu" names DeviceClass "gpu.nvidia.co", '
        'which does not exist: the scheduler says only "device class gpu.nvidia.co does not '
        'exist" and the Pod stays Pending; did you mean gpu.nvidia.com?'
    )
    assert messages["selector-matches-nothing"].endswith(
        "productName is NVIDIA A100-SXM4-80GB on the published devices, not 'NVIDIA A100-SXM4-80G'."
    )
    assert messages["memory-exceeds-device"] == (
        'pod claim "mig" (spec.resourceClaims[0]): ResourceClaim "one-mig" request "mig": the '
        "declared peak GPU memory 12 GiB (12288 MiB) is above the memory capacity of every "
        "device the request can match (largest 9.75 GiB (9984 MiB), of 2 devices); MIG slices "
        "expose less than their nominal size. Ask for a larger device."
    )
    assert messages["count-exceeds-node"] == (
        'ResourceClaimTemplate "four-gpus" request "gpus" asks for 4 devices of class '
        "gpu.nvidia.com; the most that match on one node is 2 (dra-a100-0), and all devices "
        "of a claim come from one node, so it is never allocated."
    )


def _rules(stdout: str) -> set[str]:
    return {r["rule"] for r in json.loads(stdout)["results"]}


def test_kep5004_plain_gpu_pod_is_not_denied_on_a_dra_cluster(tmp_path: Path) -> None:
    """NVIDIA's extended-resource demo, verbatim: a DeviceClass mapping nvidia.com/gpu and a
    Pod asking for nvidia.com/gpu: 1. No Node advertises nvidia.com/gpu."""
    sample = DATA / "demo__specs__extended-resources__mig-1g-12gb.yaml"
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(
        "kind: List\nitems:\n"
        "- {kind: Node, apiVersion: v1, metadata: {name: gh200-0}}\n"
        "- kind: ResourceSlice\n  apiVersion: resource.k8s.io/v1\n"
        "  metadata: {name: gh200-0-mig}\n  spec:\n    driver: gpu.nvidia.com\n"
        "    nodeName: gh200-0\n    pool: {name: gh200-0}\n    devices:\n"
        "    - name: mig-0\n      attributes: {type: {string: mig}, profile: {string: 1g.12gb}}\n"
        "      capacity: {memory: {value: 11008Mi}}\n"
    )
    done = gpu_admission("check", "--output", "json", "--inventory", str(inventory), str(sample))
    assert not _rules(done.stdout) & {"unknown-resource", "insufficient-capacity"}, done.stdout
    # Without the DeviceClass the same Pod is the false deny this prevents.
    pod_only = tmp_path / "pod.yaml"
    pod_only.write_text(
        sample.read_text().split("kind: DeviceClass")[0].rsplit("---", 1)[0]
        + "---\n"
        + sample.read_text().rsplit("---", 1)[1]
    )
    done = gpu_admission("check", "--output", "json", "--inventory", str(inventory), str(pod_only))
    assert "unknown-resource" in _rules(done.stdout)


def test_upstream_v1beta1_template_and_pod_resolve_in_the_same_input() -> None:
    sample = DATA / "demo__specs__quickstart__gpu-test7.yaml"
    done = gpu_admission(
        "check", "--output", "json", "--inventory", str(DRA / "cluster.yaml"), str(sample)
    )
    assert not [r for r in json.loads(done.stdout)["results"] if r["policy"] == "gpu-dra-claims"]
    assert done.returncode == 0, done.stdout
    # The Pod alone: its template is nowhere, so the reference is reported.
    pod = sample.read_text().rsplit("---", 1)[1]
    done = gpu_admission(
        "check", "--output", "json", "--inventory", str(DRA / "cluster.yaml"), "-", stdin=pod
    )
    assert _rules(done.stdout) == {"missing-claim-source"}
