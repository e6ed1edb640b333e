"""Objects that hold no GPU channel at all, told from their bytes: no engine run for them.

Most Pods of a cluster ask for no GPU and reach none: building their pod views and
access model (tens of microseconds each) only to find nothing is most of an audit's
time. A check can find something in a built-in workload only through a field it reads,
and every such field has a name or a value that must appear in the object's text:

- a GPU resource name: the literal head of each GPU resource glob of each policy
  (`nvidia.com/gpu`, `nvidia.com/mig-`, the resource-names vendor prefixes);
- the access model's fields (webhook.core.access): `hostPath` volumes, `privileged`,
  `envFrom`, `resources.claims` and `resourceClaims` (both hold `laims`), the policy's
  device-list variable names, its CDI and device annotation prefixes, and the last name
  of its device-list mount directory.

The markers are derived from the loaded policies' own parameters (the same
GpuResources and AccessRules the checks use), per check kind: a check this module does
not know, or a glob with no literal head, turns the filter off. Only built-in kinds are
filtered (a Pod, a PodTemplate and the controllers of core.workloads.BUILTIN_TEMPLATES):
a custom kind has WorkloadKinds paths that may match nothing, which is a finding
without any GPU field. JSON escapes could spell a marker without its bytes (`\\u0068ostPath`,
`nvidia.com\\/gpu`): text with `\\u` or `\\/` is never filtered.
tests/test_prefilter.py checks, over the corpus and hostile objects, that the engine
finds nothing in any object this filter passes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.checks import device_injection, dra_claims, memory_fit, resource_names, slo_class
from webhook.core.access import AccessRules, GpuResources
from webhook.core.policy import PolicySet
from webhook.core.subject import Subject
from webhook.core.workloads import BUILTIN_TEMPLATES, api_group

# What the access model reads whatever a policy's parameters say.
ACCESS_FIELDS = ("hostPath", "privileged", "envFrom", "laims")
_GLOB_SPECIALS = "*?["
_ESCAPES = (b"\\u", b"\\/")  # a JSON escape could spell a marker without its bytes
_FILTERED_KINDS = frozenset({("", "Pod"), *BUILTIN_TEMPLATES})


def gpu_heads(gpus: GpuResources) -> tuple[str, ...] | None:
    """The literal text every GPU resource name of `gpus` starts with, per glob; None
    when a glob starts with a wildcard (any name could be a GPU)."""
    heads = []
    for glob in gpus.include:
        cut = min((glob.find(c) for c in _GLOB_SPECIALS if c in glob), default=len(glob))
        if cut == 0:
            return None
        heads.append(glob[:cut])
    return tuple(heads)


def _access_markers(rules: AccessRules) -> tuple[str, ...] | None:
    heads = gpu_heads(rules.gpus)
    if heads is None or not rules.device_list_leaf:
        return None
    return (
        *heads,
        *ACCESS_FIELDS,
        *rules.env_vars,
        *rules.annotation_heads,
        rules.device_list_leaf,
    )


def check_markers(params: Any) -> tuple[str, ...] | None:
    """The text without which a check with these parameters finds nothing in a built-in
    workload; None for a check this module does not know (no filtering then)."""
    if isinstance(params, device_injection.Params):
        return _access_markers(params.rules)
    if isinstance(params, resource_names.Params | memory_fit.Params | slo_class.Params):
        return gpu_heads(params.gpus)
    if isinstance(params, dra_claims.Params):
        # Pods: only their resourceClaims; claim objects are not a filtered kind.
        return ("laims",)
    return None


def minimal(markers: Iterable[str]) -> tuple[bytes, ...]:
    """The markers without those that contain another (finding the shorter suffices)."""
    unique = sorted(set(markers), key=len)
    kept: list[str] = []
    for m in unique:
        if not any(k in m for k in kept):
            kept.append(m)
    return tuple(m.encode() for m in kept)


@dataclass(frozen=True, slots=True)
class Prefilter:
    """`Prefilter.of(policy_set)`; `plain(data, obj)` says whether `obj`, parsed from
    `data`, can be passed without evaluation."""

    markers: tuple[bytes, ...]

    @classmethod
    def of(cls, policy_set: PolicySet) -> Prefilter | None:
        found: list[str] = []
        for policy in policy_set.policies:
            markers = check_markers(policy.params)
            if markers is None or not all(markers):
                return None
            found.extend(markers)
        return cls(minimal(found))

    def plain(self, data: bytes, obj: Mapping[str, Any]) -> bool:
        """No marker in `data`, which is the JSON text of `obj`, a built-in workload."""
        kind = obj.get("kind")
        if type(kind) is not str or (api_group(obj.get("apiVersion")), kind) not in _FILTERED_KINDS:
            return False
        return not any(m in data for m in self.markers) and not any(e in data for e in _ESCAPES)


def plain_verdict(policy_set: PolicySet, subject: Subject) -> str | None:
    """What the engine decides on an object the filter passed: None (judged, nothing
    found) when some policy takes its kind and namespace, else the skip reason."""
    kind, namespace = subject.kind, subject.namespace
    if any(p.matches_object(kind, namespace) for p in policy_set.policies):
        return None
    return f"no policy matches {kind} in namespace {namespace}"
