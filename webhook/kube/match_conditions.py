"""The webhook's matchConditions, derived from what the loaded checks declare they read.

The apiserver evaluates a ValidatingWebhookConfiguration's matchConditions (CEL) before
it calls the webhook: a request whose conditions are false is admitted without a call.
A condition that is narrower than what a check reads is a hole no fix in the checks
closes (a Pod the webhook never sees is never denied), so the conditions are not
written by hand: they are the CEL form of the triggers in `webhook.core.engine.reads`,
the same declarations the pre-filter and the evaluation cache follow.

Every `Reads` field is either translated here or named in `NOT_TRIGGERS` (a field
that says what a check reads besides the object: who asks, the DRA supply), and
`tests/kube/test_match_conditions.py` fails on a field that is neither. The shipped
configuration (manifests/base, the chart) is generated from the shipped policies by
`scripts/sync-manifest-policies`; a test fails when it drifts. For other policies,
`gpu-admission match-conditions --policies DIR` prints the conditions.

CEL written here must never fail on an odd object, since an error counts as a webhook
failure (failurePolicy Fail refuses the request): every field is read through `.?` and
`orValue`, and a list that the API may send as `null` (a PodSpec's containers) is
tested with `!= null` first. Kubernetes' CEL environment (k8s.io/apiserver
pkg/cel/environment/base.go, v1.30 and later) has the optional types and the strings
extension this uses.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields, replace

from webhook.core.engine.prefilter import image_env_taints
from webhook.core.engine.reads import Reads
from webhook.core.supply.profiles import ClusterProfile

# What a check reads besides the object's own fields: no condition can test it, and
# the object is sent on its other triggers (a claim is sent whatever it holds).
NOT_TRIGGERS = frozenset({"requester", "names", "owners", "dra_supply", "queue_supply"})

# Pod-spec triggers by Reads field. Each takes the field's value and the CEL for one
# container (`c`), and returns the CEL that is true when that container holds it, or ""
# when the field's value triggers nothing. Pod-level triggers are in _POD.
_C = "c"


def _cel_list(names: Iterable[str]) -> str:
    return "[" + ", ".join(_cel_string(n) for n in sorted(names)) + "]"


def _cel_string(text: str) -> str:
    # CEL single-quoted string: backslash and quote escaped (names come from policies).
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _container_terms(reads: Reads) -> list[str]:
    terms: list[str] = []
    if reads.extended_resources:
        # A resource name with a "/" (an extended resource): limits or requests.
        terms += [
            f"{_C}.?resources.?limits.orValue({{}}).exists(r, r.contains('/'))",
            f"{_C}.?resources.?requests.orValue({{}}).exists(r, r.contains('/'))",
        ]
    if reads.claims:
        terms.append(f"{_C}.?resources.?claims.orValue([]).size() > 0")
    names: list[str] = []
    if reads.env:
        names.append(f"e.?name.orValue('') in {_cel_list(reads.env)}")
    if reads.env_prefixes:
        prefixes = _cel_list(reads.env_prefixes)
        names.append(f"{prefixes}.exists(p, e.?name.orValue('').startsWith(p))")
    if names:
        terms.append(f"{_C}.?env.orValue([]).exists(e, {' || '.join(names)})")
    if reads.env_from:
        terms.append(f"{_C}.?envFrom.orValue([]).size() > 0")
    if reads.security:
        fields = _cel_list(reads.security)
        terms.append(f"{_C}.?securityContext.orValue({{}}).exists(k, k in {fields})")
    if reads.mount_paths:
        parts = " || ".join(
            f"m.?mountPath.orValue('').contains({_cel_string(p)})"
            for p in sorted(reads.mount_paths)
        )
        terms.append(f"{_C}.?volumeMounts.orValue([]).exists(m, {parts})")
    return terms


def _pod_terms(reads: Reads, spec: str, meta: str) -> list[str]:
    terms: list[str] = []
    if reads.host_paths:
        terms.append(f"{spec}.?volumes.orValue([]).exists(v, has(v.hostPath))")
    if reads.pod_security:
        fields = _cel_list(reads.pod_security)
        terms.append(f"{spec}.?securityContext.orValue({{}}).exists(k, k in {fields})")
    if reads.claims:
        terms.append(f"{spec}.?resourceClaims.orValue([]).size() > 0")
    keys: list[str] = []
    if reads.annotations:
        keys.append(f"k in {_cel_list(reads.annotations)}")
    if reads.annotation_prefixes:
        # The part before the first "/", as the pre-filter compares it.
        keys.append(
            f"{_cel_list(reads.annotation_prefixes)}.exists(h, k == h || k.startsWith(h + '/'))"
        )
    if keys:
        terms.append(f"{meta}.?annotations.orValue({{}}).exists(k, {' || '.join(keys)})")
    if reads.labels:
        terms.append(f"{meta}.?labels.orValue({{}}).exists(k, k in {_cel_list(reads.labels)})")
    return terms


# The Reads fields the two functions above translate (tests/kube/test_match_conditions.py
# compares this with the dataclass).
TRANSLATED = frozenset(
    {
        "extended_resources",
        "claims",
        "host_paths",
        "security",
        "pod_security",
        "env_from",
        "env",
        "env_prefixes",
        "mount_paths",
        "annotations",
        "annotation_prefixes",
        "labels",
        "every_field",
        "image_env",  # its own entry: image_env_condition
    }
)


def untranslated() -> frozenset[str]:
    """Reads fields this module neither translates nor knows to be no trigger."""
    return frozenset(f.name for f in fields(Reads)) - TRANSLATED - NOT_TRIGGERS


def pod_condition(reads: Reads, *, spec: str, meta: str) -> str | None:
    """CEL that is true for a pod spec (at `spec`, its metadata at `meta`) holding any
    trigger the reads declare; None when every pod must be sent (`every_field`)."""
    missing = untranslated()
    if missing:  # a new Reads field: sending less than the checks read is a hole
        raise ValueError(f"Reads fields with no matchCondition translation: {sorted(missing)}")
    if reads.every_field:
        return None
    inner = _container_terms(reads)
    lines: list[str] = []
    if inner:
        body = " ||\n  ".join(inner)
        lines.append(
            "[\n"
            f"  {spec}.?containers.orValue([]),\n"
            f"  {spec}.?initContainers.orValue([]),\n"
            f"  {spec}.?ephemeralContainers.orValue([])\n"
            f"].exists(cs, cs != null && cs.exists({_C},\n  {body}\n))"
        )
    lines += _pod_terms(reads, spec, meta)
    if not lines:
        return "false"
    return " ||\n".join(lines)


def label_condition(labels: frozenset[str], *, meta: str = "object.metadata") -> str:
    """CEL for an object judged by its labels (a Namespace): sent when CREATE sets one
    of them, or UPDATE sets or changes one."""
    if not labels:
        return "false"
    new, old = f"{meta}.?labels[?l]", "oldObject.metadata.?labels[?l]"
    return (
        f"{_cel_list(labels)}.exists(l, {new}.hasValue() && (request.operation == 'CREATE' || "
        f"!{old}.hasValue() || {new}.value() != {old}.value()))"
    )


# A Pod UPDATE (outside a subresource) is judged only for what it adds, and all it can
# add that a check reads is in the metadata: the spec of a running Pod is immutable but
# for images, tolerations added and activeDeadlineSeconds (k8s.io/kubernetes
# pkg/apis/core/validation/validation.go ValidatePodUpdate). Ephemeral containers
# arrive through their own subresource.
def pod_update_condition(reads: Reads) -> str:
    """CEL that is true for a request other than a Pod UPDATE, and for an UPDATE that
    changes the annotations or labels the checks read."""
    changes = ["request.?subResource.orValue('') == 'ephemeralcontainers'"]
    if reads.every_field:
        return "true"
    for field, read in (
        ("annotations", reads.annotations or reads.annotation_prefixes),
        ("labels", reads.labels),
    ):
        if read:
            changes.append(
                f"object.metadata.?{field}.orValue({{}}) != "
                f"oldObject.metadata.?{field}.orValue({{}})"
            )
    return "request.operation != 'UPDATE' ||\n" + " ||\n".join(changes)


# The entries of the shipped ValidatingWebhookConfiguration that judge pod specs, and
# where each finds the pod spec and its metadata (one expression per place: CEL in a
# matchCondition cannot define a function).
POD_ENTRIES: dict[str, tuple[str, str]] = {
    "pods.gpu-admission.io": ("object.?spec", "object.?metadata"),
    "workloads.gpu-admission.io": (
        "object.?spec.?template.?spec",
        "object.?spec.?template.?metadata",
    ),
    "podtemplates.gpu-admission.io": ("object.?template.?spec", "object.?template.?metadata"),
    "cronjobs.gpu-admission.io": (
        "object.?spec.?jobTemplate.?spec.?template.?spec",
        "object.?spec.?jobTemplate.?spec.?template.?metadata",
    ),
}
NAMESPACE_ENTRY = "namespaces.gpu-admission.io"
POD_ENTRY = "pods.gpu-admission.io"
# Pods sent only for what their image may set (Reads.image_env): an entry of its own,
# failurePolicy Ignore, since what it judges cannot be proven at admission anyway, and a
# webhook outage must not stop every Pod that tolerates a GPU taint (DaemonSets do).
IMAGE_ENV_ENTRY = "pods-on-gpu-nodes.gpu-admission.io"
COULD_VIOLATE = "could-violate-a-gpu-policy"


def image_env_condition(reads: Reads, profile: ClusterProfile) -> str:
    """CEL true for a Pod that may run on a GPU node, as Reads.image_env reads it under
    this profile (webhook.core.engine.prefilter image_env_taints)."""
    taints = image_env_taints(reads, profile)
    if taints is None:
        return "true"  # GPU nodes without a taint of their own: any Pod may land there
    if not taints:
        return "false"
    keys = _cel_list(taints)
    return (
        "has(object.spec.nodeName) || has(object.spec.runtimeClassName) ||\n"
        f"object.spec.?tolerations.orValue([]).exists(t, t.?key.orValue('') == '' ||\n"
        f"  t.?key.orValue('') in {keys})"
    )


def entry_conditions(
    pod_reads: Reads, namespace_reads: Reads | None, profile: ClusterProfile
) -> dict[str, list[dict[str, str]]]:
    """The matchConditions of each entry that has any, by entry name: what the pod
    specs' and the Namespaces' checks read (claims and custom resources: all sent)."""
    out: dict[str, list[dict[str, str]]] = {}
    image_env = image_env_condition(pod_reads, profile)
    pod_reads = replace(pod_reads, image_env=frozenset())
    for entry, (spec, meta) in POD_ENTRIES.items():
        conditions = []
        if entry == POD_ENTRY:
            conditions.append(
                {"name": "judged-on-update", "expression": pod_update_condition(pod_reads)}
            )
        expression = pod_condition(pod_reads, spec=spec, meta=meta)
        if expression is not None:
            conditions.append({"name": COULD_VIOLATE, "expression": expression})
        out[entry] = conditions
    could = pod_condition(pod_reads, spec="object.?spec", meta="object.?metadata")
    out[IMAGE_ENV_ENTRY] = (
        [
            # Not sent twice: what the Pod entry sends, it judges whole.
            {"name": "not-sent-to-the-pod-entry", "expression": f"!(\n{could}\n)"},
            {"name": "may-run-on-a-gpu-node", "expression": image_env},
        ]
        if could is not None
        else [{"name": "may-run-on-a-gpu-node", "expression": "false"}]
    )
    labels = namespace_reads.labels if namespace_reads is not None else frozenset()
    if namespace_reads is None or not namespace_reads.every_field:
        out[NAMESPACE_ENTRY] = [
            {"name": "sets-a-judged-label", "expression": label_condition(labels)}
        ]
    return out
