"""Pods that hold none of the fields any loaded check reads: judged without the engine.

Most Pods of a cluster ask for no GPU and reach none, and evaluating one still costs
its targets and access model (~25 us): half of what an audit spends per Pod. A check
finds something in a pod only through a field it declares as a trigger
(webhook.core.engine.reads): an extended resource, a DRA claim, a hostPath volume,
a securityContext key of a container or of the pod (privileged, capabilities,
windowsOptions), envFrom, an env variable (by name or by the start of its name) or
mount path or annotation it names. The
pre-filter is built from the union of what the loaded checks declare, so a new check
is filtered for exactly what it reads, and one that declares `every_field` turns the
filter off.

Anything the filter does not understand (a field of an odd type, a custom kind: its
WorkloadKinds paths may match nothing, which is a finding) goes to the engine.
tests/core/test_prefilter.py checks, over the corpus, the examples and hostile objects,
that the engine finds nothing, and fails on nothing, in whatever this passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.engine.reads import Reads
from webhook.core.kit.dicts import api_group
from webhook.core.supply.profiles import GENERIC, ClusterProfile
from webhook.core.workloads.kinds import template_paths
from webhook.core.workloads.pods import CONTAINER_FIELDS


@dataclass(frozen=True, slots=True)
class Prefilter:
    """The triggers of the loaded checks, as the walk below tests them."""

    extended: bool  # a resource name with "/"
    claims: bool
    host_paths: bool
    security: frozenset[str]  # keys of a container's securityContext
    pod_security: frozenset[str]  # keys of the pod's securityContext
    env_from: bool
    env_vars: frozenset[str]
    env_prefixes: tuple[str, ...]  # an env name starting with one of these
    mount_parts: tuple[str, ...]  # a mount path holding one of these
    annotations: frozenset[str]
    heads: frozenset[str]  # annotation key prefixes (before the "/")
    labels: frozenset[str]
    # Pods that may run on a GPU node (Reads.image_env): placed by nodeName, run by a
    # RuntimeClass, or tolerating one of these taint keys (or every key).
    placement: bool = False
    placement_taints: frozenset[str] = frozenset()

    @classmethod
    def of(cls, reads: Reads, profile: ClusterProfile = GENERIC) -> Prefilter | None:
        """The filter for what the checks that judge pods read; None if one of them
        reads fields it does not declare, or every pod holds a trigger (untainted GPU
        nodes, where an image's env may reach any pod: image_env_taints)."""
        taints = image_env_taints(reads, profile)
        if reads.every_field or taints is None:
            return None
        return cls(
            reads.extended_resources,
            reads.claims,
            reads.host_paths,
            reads.security,
            reads.pod_security,
            reads.env_from,
            reads.env,
            tuple(sorted(reads.env_prefixes)),
            tuple(sorted(reads.mount_paths)),
            reads.annotations,
            reads.annotation_prefixes,
            reads.labels,
            bool(taints),
            taints,
        )

    def plain_pods(
        self, obj: Mapping[str, Any], plain_nodes: frozenset[str] = frozenset()
    ) -> int | None:
        """How many pod specs `obj` holds when it is a Pod or a built-in controller whose
        pod specs hold no trigger; None when the engine must judge it. `plain_nodes`:
        nodes known to have no GPU, where a Pod bound by nodeName reaches none."""
        kind = obj.get("kind")
        api_version = obj.get("apiVersion")
        if kind == "Pod" and api_version == "v1":  # nearly every object audited
            return 1 if self._pod(obj, plain_nodes) else None
        paths = template_paths(api_version, kind)
        if paths is None:
            if kind == "Pod" and api_group(api_version) == "":  # another version of core
                return 1 if self._pod(obj, plain_nodes) else None
            return None
        pods = 0
        for path in paths:
            template: Any = obj
            for step in path:
                template = template.get(step) if type(template) is dict else None
            if template is None:
                continue
            if not (type(template) is dict and self._pod(template, plain_nodes)):
                return None
            pods += 1
        return pods

    # Plain loops below, not all()/any() over generators: this runs on every Pod of an
    # audit, and a generator costs more to make than the few items it looks at.

    def _pod(self, holder: Mapping[str, Any], plain_nodes: frozenset[str]) -> bool:
        """A pod (or a template: metadata and spec) without any trigger. The containers
        come first: a GPU pod's resources end the walk at once."""
        spec = holder.get("spec")
        if spec is not None:
            if type(spec) is not dict or (self.claims and "resourceClaims" in spec):
                return False
            if self.pod_security and not self._security(
                spec.get("securityContext"), self.pod_security
            ):
                return False
            if self.placement and not self._unplaced(spec, plain_nodes):
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
            if volumes is not None and self.host_paths:
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
        if self.labels:
            labels = meta.get("labels")
            if labels is not None and (
                type(labels) is not dict or not self.labels.isdisjoint(labels)
            ):
                return False
        annotations = meta.get("annotations")
        return annotations is None or self._annotations(annotations)

    def _unplaced(self, spec: dict[str, Any], plain_nodes: frozenset[str]) -> bool:
        """Neither nodeName nor a RuntimeClass, and no toleration of a GPU node's taint."""
        if "runtimeClassName" in spec:
            return False
        name = spec.get("nodeName")
        if name is not None and (type(name) is not str or name not in plain_nodes):
            return False
        tolerations = spec.get("tolerations")
        if tolerations is None:
            return True
        if type(tolerations) is not list:
            return False
        for t in tolerations:
            key = t.get("key") if type(t) is dict else None
            # No key: it tolerates every taint (an odd key goes to the engine too).
            if type(key) is not str or not key or key in self.placement_taints:
                return False
        return True

    def _annotations(self, annotations: Any) -> bool:
        if type(annotations) is not dict:
            return False
        if self.annotations and not self.annotations.isdisjoint(annotations):
            return False
        heads = self.heads
        if heads:
            for k in annotations:
                if type(k) is not str or k.partition("/")[0] in heads:
                    return False
        return True

    def _container(self, c: dict[str, Any]) -> bool:
        if self.env_from and "envFrom" in c:
            return False
        resources = c.get("resources")
        if resources is not None:
            if type(resources) is not dict or (self.claims and "claims" in resources):
                return False
            if self.extended:
                for amounts in (resources.get("limits"), resources.get("requests")):
                    if amounts is None:
                        continue
                    if type(amounts) is not dict:
                        return False
                    for k in amounts:
                        if type(k) is not str or "/" in k:
                            return False
        if self.security and not self._security(c.get("securityContext"), self.security):
            return False
        env = c.get("env")
        if env is not None and (self.env_vars or self.env_prefixes) and not self._env(env):
            return False
        mounts = c.get("volumeMounts")
        return mounts is None or not self.mount_parts or self._mounts(mounts)

    @staticmethod
    def _security(security: Any, keys: frozenset[str]) -> bool:
        """No securityContext, or one that holds none of these keys."""
        if security is None:
            return True
        return type(security) is dict and keys.isdisjoint(security)

    def _env(self, env: Any) -> bool:
        if type(env) is not list:
            return False
        names, prefixes = self.env_vars, self.env_prefixes
        for e in env:
            name = e.get("name") if type(e) is dict else None
            if type(name) is not str or name in names:
                return False
            if prefixes and name.startswith(prefixes):
                return False
        return True

    def _mounts(self, mounts: Any) -> bool:
        if type(mounts) is not list:
            return False
        parts = self.mount_parts
        for m in mounts:
            if type(m) is not dict:
                return False
            path = m.get("mountPath")
            if path is None:
                continue
            if type(path) is not str:
                return False
            for part in parts:
                if part in path:
                    return False
        return True


def image_env_taints(reads: Reads, profile: ClusterProfile) -> frozenset[str] | None:
    """The taint keys whose tolerations make a pod a trigger of `Reads.image_env` under
    this cluster profile (with nodeName and runtimeClassName). Empty when no check reads
    the image env, or the toolkit takes no device list from an unprivileged container's
    env; the taints the profile says every GPU node carries; None, every pod, when the
    profile describes GPU nodes with no such taint (any pod may land on one); else, the
    profile saying nothing, the keys the checks name by convention."""
    if not reads.image_env or not profile.container_toolkit.accept_envvar_unprivileged:
        return frozenset()
    facts = profile.gpu_nodes
    keys = frozenset(t.key for t in facts.taints if t.effect != "PreferNoSchedule")
    if keys:
        return keys
    return None if facts.taints or facts.labels else reads.image_env
