"""The evaluation cache gives exactly what `evaluate` gives, for replicas and for changes."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from reviews import pod

from webhook.core.engine import Staleness, Subject, evaluate
from webhook.serve.evalcache import EvaluationCache
from webhook.sources.files import read_inventory
from webhook.sources.policy_files import load_policy_dir

ROOT = Path(__file__).resolve().parents[1]
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
