"""webhook.kube.match_conditions: the CEL form of what the checks read.

Whether the apiserver sends what the conditions say is proven on its own admission code
(tests/e2e/test_match_conditions_send.py, tests/e2e/test_redteam.py); here, that the
derivation covers every declaration and follows the cluster profile."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from webhook.core.engine.reads import Reads
from webhook.core.supply.profiles import GENERIC, ContainerToolkit, GpuNodes, TaintFact
from webhook.kube import match_conditions as mc


def test_every_reads_field_is_translated_or_known_to_be_no_trigger() -> None:
    assert mc.untranslated() == frozenset()
    assert {f.name for f in fields(Reads)} == mc.TRANSLATED | mc.NOT_TRIGGERS


def test_a_check_that_reads_every_field_turns_the_filter_off() -> None:
    assert mc.pod_condition(Reads(every_field=True), spec="S", meta="M") is None
    assert mc.pod_condition(Reads(), spec="S", meta="M") == "false"


@pytest.mark.parametrize(
    ("reads", "fragment"),
    [
        (Reads(env=frozenset({"A'B"})), r"in ['A\'B']"),  # quoted for CEL
        (Reads(env_prefixes=frozenset({"P_"})),
         "['P_'].exists(p, e.?name.orValue('').startsWith(p))"),
        (Reads(security=frozenset({"privileged"})),
         "c.?securityContext.orValue({}).exists(k, k in ['privileged'])"),
        (Reads(pod_security=frozenset({"windowsOptions"})), "S.?securityContext.orValue({})"),
        (Reads(annotation_prefixes=frozenset({"cdi.k8s.io"})), "k == h || k.startsWith(h + '/')"),
        (Reads(mount_paths=frozenset({"nvidia-container-devices"})),
         "contains('nvidia-container-devices')"),
        (Reads(host_paths=True), "S.?volumes.orValue([]).exists(v, has(v.hostPath))"),
    ],
)  # fmt: skip
def test_each_trigger_has_its_cel(reads: Reads, fragment: str) -> None:
    expression = mc.pod_condition(reads, spec="S", meta="M")
    assert expression is not None and fragment in expression


IMAGE = Reads(image_env=frozenset({"nvidia.com/gpu"}))
TAINTED = GpuNodes(taints=(TaintFact("example.com/gpu", None, "NoSchedule"),))


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        (GENERIC, "in ['nvidia.com/gpu']"),  # nothing declared: the conventional keys
        (replace(GENERIC, gpu_nodes=TAINTED), "in ['example.com/gpu']"),  # the profile's
        (replace(GENERIC, gpu_nodes=GpuNodes(labels=(("gpu", None),))), "true"),  # untainted
        (replace(GENERIC, container_toolkit=ContainerToolkit(False, "volume-mounts")), "false"),
    ],
    ids=["undeclared", "tainted", "untainted", "hardened"],
)
def test_the_image_env_entry_follows_the_profile(profile: object, expected: str) -> None:
    condition = mc.image_env_condition(IMAGE, profile)  # type: ignore[arg-type]
    if expected in ("true", "false"):
        assert condition == expected
    else:
        assert expected in condition and "has(object.spec.nodeName)" in condition
    assert mc.image_env_condition(Reads(), profile) == "false"  # no check reads it  # type: ignore[arg-type]


def test_every_entry_gets_conditions_and_the_image_entry_excludes_the_others() -> None:
    reads = Reads(extended_resources=True, image_env=frozenset({"nvidia.com/gpu"}))
    found = mc.entry_conditions(reads, Reads(labels=frozenset({"l"})), GENERIC)
    assert set(found) == {*mc.POD_ENTRIES, mc.NAMESPACE_ENTRY, mc.IMAGE_ENV_ENTRY}
    [not_sent, may_run] = found[mc.IMAGE_ENV_ENTRY]
    assert not_sent["expression"].startswith("!(") and "r.contains('/')" in not_sent["expression"]
    assert "nvidia.com/gpu" in may_run["expression"]
    # the image env is no trigger of the other entries: it has its own
    assert all("nodeName" not in c["expression"] for c in found[mc.POD_ENTRY])
