"""Whether judging an object would first work out DRA device matches no one asked for yet.

A claim whose (class, selectors) pairs the supply has not matched yet walks every
published device on its first evaluation (most of a second at 10,000 devices): the
server judges such a request off its event loop. Which objects that is follows from
what the checks declare: the object makes a claim target, and a check that judges
claims reads the DRA supply (webhook.core.engine.reads).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.dra.match import claim_cached
from webhook.core.dra.model import parse_claim
from webhook.core.engine.policy import PolicySet
from webhook.core.supply.inventory import Inventory
from webhook.core.workloads.targets import CLAIM_KINDS, target_kinds


def cold_supply(policy_set: PolicySet, obj: Mapping[str, Any], inventory: Inventory) -> bool:
    if obj.get("kind") not in CLAIM_KINDS:  # every other request: one lookup
        return False
    kinds = target_kinds(obj, custom=policy_set.custom_kinds)
    if "claim" not in kinds or not policy_set.reads_of(kinds).dra_supply:
        return False
    return not claim_cached(inventory.dra, parse_claim(obj))
