"""What a Pod takes from a node, every resource, as the scheduler counts it.

The rule of `k8s.io/component-helpers/resource.PodRequests` (NodeResourcesFit's filter):
the containers, sidecars and init steps as webhook.core.workloads.requests counts them,
then pod-level `spec.resources.requests` for cpu and memory where set
(PodLevelResources), then `spec.overhead` added. A container's request defaults to its
limit (the apiserver's defaulting; a hand-made dump may not have had it). Ephemeral
containers take nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast

from webhook.core.workloads.requests import ContainerRole, container_role, effective_requests
from webhook.core.workloads.units import CPU, MEMORY, PODS, amount

Want = dict[str, int]
_POD_LEVEL = (CPU, MEMORY)
_SEEN: dict[tuple[Any, ...], Want] = {}  # pure memoisation, bounded
_SEEN_MAX = 4096


def pod_requests(spec: Mapping[str, Any]) -> Want:
    """Every resource the Pod requests, in the units of `units.amount`, with `pods: 1`."""
    total = cast(Want, effective_requests(_asks(spec)))  # whole units in: whole out
    level = _map(_map(spec.get("resources")).get("requests"))
    for resource in _POD_LEVEL:
        if resource in level:
            value = amount(resource, level[resource])
            if value is not None:
                total[resource] = value
    overhead = _map(spec.get("overhead"))
    if overhead:
        _add(total, _amounts(overhead))
    total[PODS] = total.get(PODS, 0) + 1
    return {r: v for r, v in total.items() if v > 0}


def _asks(spec: Mapping[str, Any]) -> Iterator[tuple[ContainerRole, str, int]]:
    # The order of the rule: regular containers, then the init containers in their own.
    for field in ("containers", "initContainers"):
        for container in _items(spec.get(field)):
            role = container_role(field, container)
            for resource, value in container_requests(container).items():
                yield role, resource, value


def container_requests(container: Mapping[str, Any]) -> Want:
    """What one container requests (a copy: the caller may change it)."""
    resources = _map(container.get("resources"))
    requests, limits = _map(resources.get("requests")), _map(resources.get("limits"))
    try:
        # The containers of a workload's Pods are written alike: parse each wording once.
        key = (tuple(requests.items()), tuple(limits.items()))
        found = _SEEN.get(key)
    except TypeError:  # an unhashable value (a list where a quantity belongs)
        key, found = None, None
    if found is None:
        found = _amounts({**limits, **requests}) if limits else _amounts(requests)
        if key is not None:
            if len(_SEEN) >= _SEEN_MAX:
                _SEEN.clear()
            _SEEN[key] = found
    return dict(found)


def _amounts(raw: Mapping[str, Any]) -> Want:
    out: Want = {}
    for resource, value in raw.items():
        parsed = amount(resource, value) if type(resource) is str else None
        if parsed is not None:
            out[resource] = parsed
    return out


def _add(into: Want, more: Want) -> None:
    for resource, value in more.items():
        into[resource] = into.get(resource, 0) + value


def _items(value: object) -> list[Mapping[str, Any]]:
    return [c for c in value if isinstance(c, Mapping)] if type(value) is list else []


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
