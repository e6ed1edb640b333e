"""The evaluation cache gives exactly what `evaluate` gives, for replicas and for changes."""

from __future__ import annotations

import copy
import tracemalloc
from typing import Any

import yaml

from tests.support.builders import RAISE_LABEL, with_broken_check
from tests.support.paths import ROOT
from tests.support.reviews import pod
from webhook.core.engine.evaluation import Staleness, Subject, evaluate
from webhook.serve.evalcache import MAX_BYTES, MAX_ENTRY_BYTES, EvaluationCache
from webhook.sources.files import read_inventory
from webhook.sources.policy_files import load_policy_dir

POLICIES = load_policy_dir(ROOT / "policies")
INVENTORY = read_inventory(str(ROOT / "examples/cluster/nodes.json"))


def replica(obj: dict[str, Any], n: int) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].update(name=f"train-{n}", uid=f"uid-{n}", resourceVersion=str(n))
    return out


def test_replicas_hit_and_get_the_same_decision() -> None:
    cache = EvaluationCache()
    bad = pod(limits={"nvidia.com/mig-1g.10g": 1})
    decisions = [
        cache.evaluate(POLICIES, Subject(replica(bad, n), "ml"), INVENTORY) for n in range(5)
    ]
    assert (cache.misses, cache.hits) == (1, 4)
    assert all(d == evaluate(POLICIES, Subject(bad, "ml"), INVENTORY) for d in decisions)
    assert decisions[0].denied


def test_anything_a_check_reads_is_part_of_the_key() -> None:
    cache = EvaluationCache()
    base = pod(limits={"nvidia.com/mig-3g.40gb": 1})
    relabelled = copy.deepcopy(base)
    relabelled["metadata"]["labels"]["gpu-admission.io/slo-class"] = "gold"
    annotated = copy.deepcopy(base)
    annotated["metadata"]["annotations"] = {"cdi.k8s.io/x": "nvidia.com/gpu=all"}
    respec = pod(limits={"nvidia.com/mig-3g.40gb": 2})
    subjects = [
        Subject(base, "ml"),
        Subject(base, "kube-system"),
        Subject(relabelled, "ml"),
        Subject(annotated, "ml"),
        Subject(respec, "ml"),
    ]
    for subject in subjects:
        assert cache.evaluate(POLICIES, subject, INVENTORY) == evaluate(
            POLICIES, subject, INVENTORY
        )
    assert (cache.misses, cache.hits) == (5, 0)


def test_claims_that_differ_only_in_name_each_get_their_own_message() -> None:
    # A claim's findings name the claim ('ResourceClaim "a100-typo" ...'), so its name is
    # part of the key: a second claim must not be answered with the first one's name.
    inventory = read_inventory(str(ROOT / "examples/dra/cluster.yaml"))
    claim = yaml.safe_load((ROOT / "examples/dra/bad/selector-matches-nothing.yaml").read_text())
    cache = EvaluationCache()
    for name in ("first-claim", "second-claim"):
        renamed = copy.deepcopy(claim)
        renamed["metadata"]["name"] = name
        decision = cache.evaluate(POLICIES, Subject(renamed, "ml"), inventory)
        assert decision.denied
        assert all(f'"{name}"' in f.message for f in decision.findings)
    assert (cache.misses, cache.hits) == (2, 0)


def test_a_new_policy_set_or_inventory_empties_it() -> None:
    cache = EvaluationCache()
    subject = Subject(pod(limits={"nvidia.com/mig-3g.40gb": 1}), "ml")
    cache.evaluate(POLICIES, subject, INVENTORY)
    cache.evaluate(load_policy_dir(ROOT / "policies"), subject, INVENTORY)
    cache.evaluate(POLICIES, subject, read_inventory(str(ROOT / "examples/cluster/nodes.json")))
    assert (cache.misses, cache.hits) == (3, 0)


def test_stale_inventory_and_a_zero_size_bypass_it() -> None:
    subject = Subject(pod(limits={"nvidia.com/mig-1g.10g": 1}), "ml")
    stale = Staleness(3600, 600, "warn")
    cache = EvaluationCache()
    for _ in range(2):
        assert cache.evaluate(POLICIES, subject, INVENTORY, stale=stale) == evaluate(
            POLICIES, subject, INVENTORY, stale=stale
        )
    off = EvaluationCache(0)
    off.evaluate(POLICIES, subject, INVENTORY)
    assert (cache.hits, off.hits, off.misses) == (0, 0, 0)


def test_it_stays_within_its_size() -> None:
    cache = EvaluationCache(3)
    for n in range(10):
        cache.evaluate(
            POLICIES, Subject(pod(limits={"nvidia.com/mig-3g.40gb": n + 1}), "ml"), INVENTORY
        )
    assert len(cache._entries) == 3


def with_token_volume(obj: dict[str, Any], suffix: str, mount_at: str) -> dict[str, Any]:
    """The Pod as the ServiceAccount admission plugin leaves it, before any webhook."""
    out = copy.deepcopy(obj)
    name = f"kube-api-access-{suffix}"
    out["spec"].setdefault("volumes", []).append(
        {"name": name, "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
    )
    for container in out["spec"]["containers"]:
        container.setdefault("volumeMounts", []).append({"name": name, "mountPath": mount_at})
    return out


SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def test_replicas_with_their_own_token_volumes_still_hit() -> None:
    cache = EvaluationCache()
    bad = pod(limits={"nvidia.com/mig-1g.10g": 1})
    for n, suffix in enumerate(("x7k2p", "q9z4m", "a1b2c")):
        subject = Subject(replica(with_token_volume(bad, suffix, SA_MOUNT), n), "ml")
        assert cache.evaluate(POLICIES, subject, INVENTORY) == evaluate(
            POLICIES, subject, INVENTORY
        )
    assert (cache.misses, cache.hits) == (1, 2)


def test_a_decision_that_names_a_token_volume_is_never_reused() -> None:
    cache = EvaluationCache()
    base = pod(limits={"nvidia.com/mig-3g.40gb": 1})
    for suffix in ("x7k2p", "q9z4m"):
        obj = with_token_volume(base, suffix, "/var/run/nvidia-container-devices/all")
        decision = cache.evaluate(POLICIES, Subject(obj, "ml"), INVENTORY)
        assert f'"kube-api-access-{suffix}"' in decision.findings[0].message
    assert cache.hits == 0


def gpu_pod_with_env(n: int, size: int) -> dict[str, Any]:
    """A distinct GPU Pod carrying `size` bytes in one env value."""
    env = [{"name": "BLOB", "value": f"{n}-" + "x" * size}]
    return pod(limits={"nvidia.com/mig-3g.40gb": 1}, container={"env": env})


def test_an_entry_over_its_byte_limit_is_never_kept() -> None:
    cache = EvaluationCache()
    big = Subject(gpu_pod_with_env(0, MAX_ENTRY_BYTES), "ml")
    for _ in range(3):
        assert cache.evaluate(POLICIES, big, INVENTORY) == evaluate(POLICIES, big, INVENTORY)
    assert (cache.misses, cache.hits, len(cache._entries), cache.bytes) == (0, 0, 0, 0)


def test_it_stays_within_its_bytes_dropping_the_oldest() -> None:
    cache = EvaluationCache(max_entries=10_000, max_bytes=200_000)
    for n in range(60):
        cache.evaluate(POLICIES, Subject(gpu_pod_with_env(n, 20_000), "ml"), INVENTORY)
    kept = list(cache._entries.items())
    assert cache.bytes == sum(size for _, (_, size) in kept) <= 200_000
    assert 7 <= len(kept) <= 9  # about 21 KB each
    newest = Subject(gpu_pod_with_env(59, 20_000), "ml")
    oldest = Subject(gpu_pod_with_env(0, 20_000), "ml")
    cache.evaluate(POLICIES, newest, INVENTORY)
    cache.evaluate(POLICIES, oldest, INVENTORY)
    assert (cache.hits, cache.misses) == (1, 61)


def test_thousands_of_distinct_heavy_pods_hold_a_few_megabytes() -> None:
    # The probe that found it: 2,100 GPU Pods with a 250 KB env value took the server
    # from 70 to 613 MB. Kept entries are bounded by bytes now, whatever the objects.
    cache = EvaluationCache()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(300):
            cache.evaluate(POLICIES, Subject(gpu_pod_with_env(n, 250_000), "ml"), INVENTORY)
            cache.evaluate(POLICIES, Subject(gpu_pod_with_env(n, 30_000), "ml"), INVENTORY)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert cache.bytes <= MAX_BYTES
    assert held < MAX_BYTES + 4_000_000  # 300 x 250 KB would be 75 MB


def test_a_decision_that_could_not_be_evaluated_is_never_kept() -> None:
    policies = with_broken_check(POLICIES)
    broken = pod(limits={"nvidia.com/mig-3g.40gb": 1}, labels={RAISE_LABEL: "boom"})
    cache = EvaluationCache()
    decisions = [cache.evaluate(policies, Subject(broken, "ml"), INVENTORY) for _ in range(3)]
    assert [d.outcome for d in decisions] == ["error"] * 3
    assert (cache.hits, cache.misses, cache.bytes) == (0, 3, 0)
