"""Built-in workloads that hold no GPU channel at all: passed without running the engine.

Most Pods of a cluster ask for no GPU and reach none, and evaluating one still costs
its pod views and access model (~25 us): half of what an audit spends per Pod. A
check can find something in a Pod, or a built-in controller's template, only through
a field it reads, and a plain pod spec has none of them:

- no extended resource at all (a `/` in a limits or requests key: GPU names have one;
  resource-names, memory-fit and slo-class judge only GPU requests);
- none of the access model's ways in (webhook.core.access.model): no hostPath volume, no
  `privileged` in a securityContext, no envFrom, no `resourceClaims`, no
  `resources.claims`, no env variable a device-injection policy names, no mount path
  holding its device-list directory's name, no annotation under its CDI or device
  prefixes, no KAI share annotation (webhook.core.access.shares.SHARE_ANNOTATIONS: a KAI
  share requests no resource).

Anything the filter does not understand (an unknown check, a field of an odd type, a
custom kind: its WorkloadKinds paths may match nothing, which is a finding) goes to the
engine. tests/core/test_prefilter.py checks, over the corpus, the examples and hostile
objects, that the engine finds nothing, and fails on nothing, in whatever this passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.access.model import AccessRules
from webhook.core.access.shares import SHARE_ANNOTATIONS
from webhook.core.engine.policy import PolicySet
from webhook.core.engine.subject import Subject
from webhook.core.kit.dicts import api_group
from webhook.core.workloads.pods import BUILTIN_TEMPLATES, CONTAINER_FIELDS

# Checks whose reads are the ones listed above; the device-injection policy's
# parameters carry its AccessRules (`params.rules`).
# dra-guardrails judges Namespaces, claims and pods with `resourceClaims`: none passes.
KNOWN_CHECKS = frozenset(
    {
        "device-injection",
        "resource-names",
        "memory-fit",
        "slo-class",
        "dra-claims",
        "dra-guardrails",
    }
)
_POD = ("", "Pod")


@dataclass(frozen=True, slots=True)
class Prefilter:
    env_vars: frozenset[str]
    leaves: tuple[str, ...]  # device-list directory names: a mount path holding one
    heads: frozenset[str]  # annotation key prefixes (before the "/")

    @classmethod
    def of(cls, policy_set: PolicySet) -> Prefilter | None:
        """None when some policy's check is not one whose reads are known."""
        env: set[str] = set()
        leaves: set[str] = set()
        heads: set[str] = set()
        for policy in policy_set.policies:
            if policy.check.name not in KNOWN_CHECKS:
                return None
            rules = getattr(policy.params, "rules", None)
            if policy.check.name == "device-injection":
                if not isinstance(rules, AccessRules) or not rules.device_list_leaf:
                    return None
                env |= rules.env_vars
                leaves.add(rules.device_list_leaf)
                heads |= set(rules.annotation_heads)
        return cls(frozenset(env), tuple(sorted(leaves)), frozenset(heads))

    def plain(self, obj: Mapping[str, Any]) -> bool:
        """`obj` is a Pod or a built-in controller whose pod specs hold no GPU channel."""
        kind = obj.get("kind")
        if kind == "Pod" and obj.get("apiVersion") == "v1":  # nearly every object audited
            return self._pod(obj)
        key = (api_group(obj.get("apiVersion")), kind if type(kind) is str else "")
        if key == _POD:
            return self._pod(obj)
        paths = BUILTIN_TEMPLATES.get(key)
        if paths is None:
            return False
        for path in paths:
            template: Any = obj
            for step in path:
                template = template.get(step) if type(template) is dict else None
            if template is not None and not (type(template) is dict and self._pod(template)):
                return False
        return True

    # Plain loops below, not all()/any() over generators: this runs on every Pod of an
    # audit, and a generator costs more to make than the few items it looks at.

    def _pod(self, holder: Mapping[str, Any]) -> bool:
        """A pod (or a template: metadata and spec) without any GPU channel. The
        containers come first: a GPU pod's resources end the walk at once."""
        spec = holder.get("spec")
        if spec is not None:
            if type(spec) is not dict or "resourceClaims" in spec:
                return False
            for field in CONTAINER_FIELDS:
                containers = spec.get(field)
                if containers is None:
                    continue
                if type(containers) is not list:
                    return False
                for c in containers:
                    if type(c) is not dict or not self._container(c):
                        return False
            volumes = spec.get("volumes")
            if volumes is not None:
                if type(volumes) is not list:
                    return False
                for v in volumes:
                    if type(v) is not dict or "hostPath" in v:
                        return False
        meta = holder.get("metadata")
        if meta is None:
            return True
        if type(meta) is not dict:
            return False
        annotations = meta.get("annotations")
        return annotations is None or self._annotations(annotations)

    def _annotations(self, annotations: Any) -> bool:
        if type(annotations) is not dict or not SHARE_ANNOTATIONS.isdisjoint(annotations):
            return False
        heads = self.heads
        for k in annotations:  # noqa: SIM110 (a loop, not all(): see above)
            if type(k) is not str or k.partition("/")[0] in heads:
                return False
        return True

    def _container(self, c: dict[str, Any]) -> bool:
        if "envFrom" in c:
            return False
        resources = c.get("resources")
        if resources is not None:
            if type(resources) is not dict or "claims" in resources:
                return False
            for amounts in (resources.get("limits"), resources.get("requests")):
                if amounts is None:
                    continue
                if type(amounts) is not dict:
                    return False
                for k in amounts:
                    if type(k) is not str or "/" in k:
                        return False
        security = c.get("securityContext")
        if security is not None and (type(security) is not dict or "privileged" in security):
            return False
        env = c.get("env")
        if env is not None and not self._env(env):
            return False
        mounts = c.get("volumeMounts")
        return mounts is None or self._mounts(mounts)

    def _env(self, env: Any) -> bool:
        if type(env) is not list:
            return False
        names = self.env_vars
        for e in env:
            name = e.get("name") if type(e) is dict else None
            if type(name) is not str or name in names:
                return False
        return True

    def _mounts(self, mounts: Any) -> bool:
        if type(mounts) is not list:
            return False
        leaves = self.leaves
        for m in mounts:
            if type(m) is not dict:
                return False
            path = m.get("mountPath")
            if path is None:
                continue
            if type(path) is not str:
                return False
            for leaf in leaves:
                if leaf in path:
                    return False
        return True


def plain_verdict(policy_set: PolicySet, subject: Subject) -> str | None:
    """What the engine decides on an object the filter passed: None (judged, nothing
    found) when some policy takes its kind and namespace, else the skip reason."""
    kind, namespace = subject.kind, subject.namespace
    if any(p.matches_object(kind, namespace) for p in policy_set.policies):
        return None
    return f"no policy matches {kind} in namespace {namespace}"
