"""What the tenancy rules judge one Pod template of a workload with."""

from __future__ import annotations

from typing import NamedTuple

from webhook.core.kit.paths import Path
from webhook.core.supply.inventory import Inventory
from webhook.core.tenancy.tenants import Tenant
from webhook.core.tenancy.use import Use
from webhook.core.workloads.pods import PodView


class Judged(NamedTuple):
    pod: PodView
    who: str  # how a message names the role: 'in role "Worker", ', or "" for one role
    tenant: Tenant
    inventory: Inventory
    uses: tuple[Use, ...]
    pinned: frozenset[str] | None  # GPU products its nodeSelector pins (no inventory)
    pinned_path: Path
    labels: tuple[str, ...]  # the node labels that name a GPU product
