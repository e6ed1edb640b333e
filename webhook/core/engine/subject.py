"""What is judged: one object with the facts of its request, built the same way by every shell.

`check`, `audit`, `diff`, `test` and the webhook each call `subject_of`, so an object is
judged in the same namespace wherever it is judged, and a policy narrowed to named
namespaces (`match.namespaces`) takes or skips it alike in a PR, an audit and at
admission.

The namespace is the one the object lives in, or would be created in:

1. the request's namespace when there is a request (the apiserver takes it from the
   URL, `/api/v1/namespaces/<ns>/pods`, and fills it in on the object: it wins);
2. else the object's own `metadata.namespace`;
3. else `default`, where `kubectl apply -f` puts an object without one (unless `-n` or
   the kubeconfig context says otherwise, which a file cannot know).

A Namespace is judged in itself (its own metadata.name): the apiserver's request
carries no namespace on a CREATE of one (POST /api/v1/namespaces) and the name on an
UPDATE, so reading the name everywhere makes `excludedNamespaces: [kube-system]` skip
the kube-system Namespace alike in check, audit and at admission. Other cluster-scoped
kinds get no namespace of their own (`""`): they are judged as if in `default` too.
Every built-in kind that holds a pod spec is namespaced (Pod, PodTemplate,
ReplicationController, Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob:
`kubectl api-resources --namespaced=true`), and so are the custom workloads we know
(PyTorchJob, RayCluster, JobSet, LeaderWorkerSet). A file or a dump does not say whether
a custom kind is cluster-scoped (only the cluster's discovery API does), so telling the
two apart would make `check` and the webhook disagree on the same object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from webhook.core.workloads.identity import namespace_of, shown_name

DEFAULT_NAMESPACE = "default"


# A NamedTuple rather than a frozen dataclass: every admission request makes one, and a
# tuple is several times cheaper to build.
class Subject(NamedTuple):
    """One object to judge, with the facts of its request."""

    obj: Mapping[str, Any]
    namespace: str = DEFAULT_NAMESPACE
    operation: str = "CREATE"
    # At admission only: the request's userInfo ({username, groups, ...}) and, on UPDATE,
    # the object before it. None in check, audit, diff and test (no request there).
    user: Mapping[str, Any] | None = None
    old: Mapping[str, Any] | None = None

    @property
    def kind(self) -> str:
        kind = self.obj.get("kind")
        return kind if isinstance(kind, str) else ""

    @property
    def name(self) -> str:
        """The object's name as every shell shows it (webhook.core.workloads.identity)."""
        meta = self.obj.get("metadata")
        return shown_name(meta) if isinstance(meta, Mapping) else ""


def subject_of(
    obj: Mapping[str, Any],
    *,
    namespace: str | None = None,
    operation: str = "CREATE",
    user: Mapping[str, Any] | None = None,
    old: Mapping[str, Any] | None = None,
) -> Subject:
    """The subject for `obj`: in `namespace` if the request names one (None or "": it does
    not), else in the object's metadata.namespace, else in `default`."""
    if obj.get("kind") == "Namespace":
        namespace = _own_name(obj) or DEFAULT_NAMESPACE
    elif not namespace:
        namespace = namespace_of(obj) or DEFAULT_NAMESPACE
    if user is None and old is None:
        return Subject(obj, namespace, operation)
    return Subject(obj, namespace, operation, user, old)


def _own_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""
