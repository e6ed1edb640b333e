"""The server's inventory under Node watch events: what changes it and what does not.

A heartbeat (conditions, resourceVersion, managedFields, the GFD timestamp) must leave
the very same Inventory in place, so the evaluation cache keeps its decisions; a change
a check reads must reach the next decision; a Node that does not parse is left out and
named in the readiness report until it is fixed or deleted.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import yaml

from tests.support.paths import ROOT
from tests.support.reviews import pod
from webhook.core.engine.evaluation import Subject
from webhook.serve.state import Settings, State

NODES = orjson.loads((ROOT / "examples/cluster/nodes.json").read_bytes())["items"]
MIG_POD = pod(limits={"nvidia.com/mig-3g.40gb": 1})


def live_state() -> State:
    state = State.start(Settings(str(ROOT / "policies")))
    state.set_nodes(copy.deepcopy(NODES))
    return state


def judge(state: State) -> bool:
    decision = state.cache.evaluate(state.policy_set, Subject(MIG_POD, "ml"), state.inventory)
    return not decision.denied


def mig_node() -> dict[str, Any]:
    return copy.deepcopy(next(n for n in NODES if n["metadata"]["name"] == "gpu-a100-mig-0"))


def test_a_heartbeat_keeps_the_inventory_and_the_evaluation_cache() -> None:
    state = live_state()
    before = state.inventory
    assert judge(state) and judge(state)
    beat = mig_node()
    beat["metadata"]["resourceVersion"] = "99999"
    beat["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = "1800000000"
    beat["metadata"]["managedFields"] = [{"manager": "kubelet", "operation": "Update"}]
    beat["status"]["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]

    state.update_nodes({"gpu-a100-mig-0": beat})

    assert state.inventory is before
    assert judge(state)
    assert (state.cache.misses, state.cache.hits) == (1, 2)


def test_a_change_a_check_reads_reaches_the_next_decision() -> None:
    state = live_state()
    assert judge(state)
    shrunk = mig_node()
    del shrunk["status"]["allocatable"]["nvidia.com/mig-3g.40gb"]

    state.update_nodes({"gpu-a100-mig-0": shrunk})

    assert not judge(state)
    assert state.inventory.node_count == len(NODES)
    state.update_nodes({"gpu-a100-mig-0": None})
    assert state.inventory.node_count == len(NODES) - 1
    assert "gpu-a100-mig-0" not in {n.name for n in state.inventory.nodes}


def test_a_node_that_does_not_parse_is_left_out_and_named() -> None:
    state = live_state()
    broken = mig_node()
    broken["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] = "four"

    state.update_nodes({"gpu-a100-mig-0": broken})

    assert state.inventory_error == (
        "node gpu-a100-mig-0: status.allocatable['nvidia.com/mig-3g.40gb'] = 'four' "
        "is not a quantity"
    )
    assert not judge(state)  # the only node with that profile is out
    state.update_nodes({"gpu-a100-mig-0": mig_node()})
    assert state.inventory_error is None
    assert judge(state)


def test_a_list_with_a_bad_node_serves_the_others() -> None:
    state = State.start(Settings(str(ROOT / "policies")))
    nodes = copy.deepcopy(NODES)
    nodes[1]["status"]["allocatable"]["nvidia.com/gpu"] = "eight"

    state.set_nodes(nodes)

    assert state.inventory_synced
    assert state.inventory.node_count == len(NODES) - 1
    assert state.inventory_error == (
        "node gpu-h100-0: status.allocatable['nvidia.com/gpu'] = 'eight' is not a quantity"
    )


# --- DRA objects from their watches ------------------------------------------------------

DRA_ITEMS = [
    o
    for o in yaml.safe_load((ROOT / "examples/dra/cluster.yaml").read_text())["items"]
    if o["kind"] != "Node"
]


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [copy.deepcopy(o) for o in DRA_ITEMS if o["kind"] == kind]


def test_dra_lists_and_events_reach_the_inventory_and_nodes_keep_them() -> None:
    state = live_state()
    slices = of_kind("ResourceSlice")
    assert len(slices) == 2
    state.set_dra("DeviceClass", of_kind("DeviceClass"))
    state.set_dra("ResourceSlice", slices)
    devices = state.inventory.dra.device_count
    assert devices > 0 and set(state.inventory.dra.slices) == {
        s["metadata"]["name"] for s in slices
    }
    # A Node list after the DRA lists keeps the DRA supply.
    state.set_nodes(copy.deepcopy(NODES))
    assert state.inventory.dra.device_count == devices
    # A relist without one slice drops it; a DELETED event drops the other.
    _, kept = slices
    state.set_dra("ResourceSlice", [kept])
    assert set(state.inventory.dra.slices) == {kept["metadata"]["name"]}
    before = state.inventory
    state.update_dra("ResourceSlice", {kept["metadata"]["name"]: copy.deepcopy(kept)})
    assert state.inventory is before  # the same slice again: nothing changed
    state.update_dra("ResourceSlice", {kept["metadata"]["name"]: None})
    assert not state.inventory.dra.slices and state.inventory.node_count == len(NODES)


def test_templates_are_kept_by_namespace_and_generated_claims_are_not() -> None:
    state = live_state()
    [template] = of_kind("ResourceClaimTemplate")
    namespace, name = template["metadata"]["namespace"], template["metadata"]["name"]
    state.update_dra("ResourceClaimTemplate", {f"{namespace}/{name}": template})
    assert ("ResourceClaimTemplate", namespace, name) in state.inventory.dra.claims
    generated = copy.deepcopy(template)
    generated["kind"] = "ResourceClaim"
    generated["spec"] = template["spec"]["spec"]
    generated["metadata"] = {
        "name": "trainer-gpu-x7k2p",
        "namespace": namespace,
        "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
    }
    before = state.inventory
    state.set_dra("ResourceClaim", [generated])
    assert state.inventory is before
    state.update_dra("ResourceClaimTemplate", {f"{namespace}/{name}": None})
    assert not state.inventory.dra.claims
