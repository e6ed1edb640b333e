"""gpu-queues: Kueue queues and ResourceQuotas that can never admit a job, and queue
objects that hand out GPUs wrongly.

A job (the `workload` target) is followed to the queue Kueue would put it in: its
`kueue.x-k8s.io/queue-name` label, else the namespace's LocalQueue `default`; then the
LocalQueue's ClusterQueue, whose namespaceSelector must take the namespace, and
Kueue's flavor assignment (webhook.core.queues.assign) on the job's pod sets against
the most the queue can ever get (webhook.core.queues.capacity). A ResourceQuota of the
namespace that one Pod, or a job's ranks together, exceed refuses them at creation.
Queue objects themselves (the `queue` target) are judged for what they hand out.

Nothing here looks at what is in use now: a job that fits only once others finish, or
by preemption, is allowed (`audit` reports use against quota).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from webhook.core.access.gpuresources import DEVICE_PLUGIN_GPUS
from webhook.core.engine.check import Check, CheckParams, Rule
from webhook.core.engine.context import Context
from webhook.core.engine.reads import Reads
from webhook.core.kit.dicts import as_dict
from webhook.core.kit.paths import Path
from webhook.core.kit.selectors import selects
from webhook.core.kit.text import glob_matcher, listing
from webhook.core.kit.violation import Violation
from webhook.core.queues.assign import Unassigned, first_unassigned
from webhook.core.queues.model import (
    DEPRECATED_VERSION,
    KUEUE_GROUP,
    ClusterQueue,
    LocalQueue,
    ResourceFlavor,
    ResourceQuota,
    parse,
    ref,
)
from webhook.core.queues.podsets import PodSet, pod_sets
from webhook.core.queues.supply import QueueSupply
from webhook.core.supply.inventory import Inventory
from webhook.core.workloads.kinds import WorkloadView
from webhook.core.workloads.targets import QueueView, TargetKind
from webhook.core.workloads.units import shown
from webhook.errors import InventoryError, UnreadableObject

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # pkg/controller/constants/constants.go QueueLabel
DEFAULT_QUEUE = "default"  # constants.go DefaultLocalQueueName: set when a job names none
# The integrations Kueue v0.19.2's shipped configuration turns on
# (config/components/manager/controller_manager_config.yaml; tests/data/kueue/FACTS.md f).
# kubeflow.org/pytorchjob and the other training-operator v1 kinds are off since v0.19.0.
KUEUE_INTEGRATIONS = (
    "batch/job",
    "kubeflow.org/mpijob",
    "ray.io/rayjob",
    "ray.io/raycluster",
    "ray.io/rayservice",
    "jobset.x-k8s.io/jobset",
    "workload.codeflare.dev/appwrapper",
    "trainer.kubeflow.org/trainjob",
    "pod",
    "deployment",
    "statefulset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
)
# The apiserver sets this label on every Namespace to its name (since 1.21).
NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Params(CheckParams):
    integrations: tuple[str, ...] = KUEUE_INTEGRATIONS  # Kueue's integrations.frameworks
    gpu_resources: tuple[str, ...] = DEVICE_PLUGIN_GPUS
    mig_resources: tuple[str, ...] = ("nvidia.com/mig-*",)

    @cached_property
    def is_gpu(self) -> Any:
        return glob_matcher(self.gpu_resources)

    @cached_property
    def is_mig(self) -> Any:
        return glob_matcher(self.mig_resources)


def run(target: Any, *, context: Context, params: Params) -> Iterator[Violation]:
    if isinstance(target, QueueView):
        yield from _queue_object(target, context.inventory, params)
    else:
        yield from _job(target, context, params)


# -- a job ------------------------------------------------------------------------


def _job(workload: WorkloadView, context: Context, params: Params) -> Iterator[Violation]:
    supply = context.inventory.queues
    if not supply.known or _owned(workload.obj):
        return  # no queue known to judge by; a Pod of a judged owner was judged there
    sets = pod_sets(workload)
    if not any(any(v > 0 for v in s.requests.values()) for s in sets):
        return
    namespace = context.namespace
    yield from _resource_quotas(workload, sets, supply.quotas_in(namespace), supply, namespace)
    if not supply.kueue:
        return
    named = workload.labels.get(QUEUE_LABEL)
    framework = _framework(workload)
    if named is not None and framework not in params.integrations:
        yield Violation(
            "integration-disabled",
            _label_path(workload),
            f"The {workload.kind} names LocalQueue {named!r}, but Kueue's "
            f"{framework} integration is not enabled (it is off by default since Kueue "
            f"v0.19; enabled here: {listing(params.integrations)}): the label is ignored and "
            f"the job runs unqueued. Enable {framework} in Kueue's integrations.frameworks, "
            "or set the policy's integrations to the cluster's.",
            advisory=True,
        )
        return
    if named is None:
        if framework not in params.integrations or (namespace, DEFAULT_QUEUE) not in (
            supply.local_queues
        ):
            return  # not queued: Kueue sets the default queue only where it exists
        named = DEFAULT_QUEUE
    yield from _queued(workload, sets, supply, namespace, named, context.inventory)


def _queued(
    workload: WorkloadView,
    sets: tuple[PodSet, ...],
    supply: QueueSupply,
    namespace: str,
    named: str,
    inventory: Inventory,
) -> Iterator[Violation]:
    path = _label_path(workload)
    local = supply.local_queues.get((namespace, named))
    if local is None and supply.why_unreadable("LocalQueue", named, namespace):
        yield _unreadable(workload, supply, "LocalQueue", named, namespace)
        return
    if local is None:
        here = sorted(n for ns, n in supply.local_queues if ns == namespace)
        yield Violation(
            "no-local-queue",
            path,
            f"The {workload.kind} names LocalQueue {named!r}, which does not "
            f"exist in namespace {namespace} ({_queues_here(here)}): Kueue keeps its Workload "
            f'inadmissible ("LocalQueue {named} doesn\'t exist"). Name one of them, or create it.',
        )
        return
    queue = supply.cluster_queues.get(local.cluster_queue)
    if queue is None and supply.why_unreadable("ClusterQueue", local.cluster_queue):
        yield _unreadable(workload, supply, "ClusterQueue", local.cluster_queue)
        return
    if queue is None:
        yield Violation(
            "no-cluster-queue",
            path,
            f"LocalQueue {namespace}/{named} points to ClusterQueue {local.cluster_queue!r}, "
            f"which does not exist ({_cluster_queues(supply)}): "
            f'Kueue keeps the Workload inadmissible ("ClusterQueue {local.cluster_queue} is '
            f"inactive\"). Fix the LocalQueue's spec.clusterQueue.",
        )
        return
    found = _namespace_rejected(queue, namespace, inventory)
    if found is not None:
        yield Violation("namespace-not-selected", path, found)
        return
    unassigned = first_unassigned(supply, queue, sets)
    if unassigned is not None:
        yield _never(workload, local, queue, sets, unassigned)


def _unreadable(
    workload: WorkloadView, supply: QueueSupply, kind: str, name: str, namespace: str = ""
) -> Violation:
    why = supply.why_unreadable(kind, name, namespace)
    shown_name = f"{namespace}/{name}" if namespace else name
    return Violation(
        "queue-unreadable",
        _label_path(workload),
        f"The {workload.kind} is queued through {kind} {shown_name}, which "
        f"could not be read ({why}): the job cannot be judged against it. Fix the {kind}.",
    )


def _cluster_queues(supply: QueueSupply) -> str:
    names = sorted(supply.cluster_queues)
    return f"ClusterQueues: {listing(names)}" if names else "there is no ClusterQueue"


def _namespace_rejected(queue: ClusterQueue, namespace: str, inventory: Inventory) -> str | None:
    selector = queue.namespace_selector
    if selector is None:
        return (
            f"ClusterQueue {queue.name} has no namespaceSelector, which selects no namespace: "
            f"it admits nothing, from {namespace} or anywhere (kueue: a null selector is a "
            "nothing selector). Give it a namespaceSelector that takes this namespace."
        )
    known = inventory.dra.namespaces.get(namespace)
    labels = {NAME_LABEL: namespace, **(known or {})}
    if selects(selector, labels):
        return None
    if known is None and not _decided_by_name(selector):
        return None  # the namespace's labels are not in the inventory: not judged
    return (
        f"ClusterQueue {queue.name}'s namespaceSelector {_selector_text(selector)} does not "
        f"take namespace {namespace} (labels {_labels_text(labels)}): Kueue never admits the "
        'job ("workload namespace doesn\'t match ClusterQueue selector"). Label the '
        "namespace, or use a LocalQueue whose ClusterQueue takes it."
    )


def _never(
    workload: WorkloadView,
    local: LocalQueue,
    queue: ClusterQueue,
    sets: tuple[PodSet, ...],
    unassigned: Unassigned,
) -> Violation:
    pod_set, resource = unassigned.pod_set, unassigned.resource
    asked = f"{pod_set.count} x {shown(resource, pod_set.requests[resource])}"
    who = f"The {workload.kind} (queue {local.namespace}/{local.name})"
    words = unassigned.kueue_words()
    if unassigned.group is None:
        covered = sorted({r for g in queue.groups for r in g.covered})
        return Violation(
            "resource-not-covered",
            (*pod_set.path,),
            f"{who}: pod set {pod_set.name} asks {resource} ({asked}), which ClusterQueue "
            f"{queue.name} does not cover (coveredResources: {listing(covered)}): Kueue can "
            f'never admit it ("{words}"). Add {resource} to a resource group of the '
            "ClusterQueue, or ask for a resource it covers.",
        )
    if not unassigned.shortfalls:
        return Violation(
            "no-flavor-matches",
            (*pod_set.path,),
            f"{who}: pod set {pod_set.name} can use no flavor of ClusterQueue {queue.name} for "
            f'{resource}: Kueue can never admit it ("{words}"). Tolerate the flavor\'s taints '
            "or drop the nodeSelector or affinity that excludes its labels.",
        )
    total = sum(s.total(resource) for s in sets)
    gives = "; ".join(
        f"at most {shown(s.resource, s.most.most)} {s.resource} in flavor {s.flavor} "
        f"(nominal {shown(s.resource, s.most.nominal)}, cohort lends "
        f"{shown(s.resource, s.most.lent)})"
        for s in unassigned.shortfalls
    )
    return Violation(
        "quota-never-admits",
        (*pod_set.path,),
        f"{who} asks {shown(resource, total)} {resource} in all (pod set {pod_set.name}: "
        f"{asked}); ClusterQueue {queue.name} gives {gives}: Kueue can never admit it, "
        f'however long it waits ("{words}"). Ask for less, or raise the quota or what '
        "the cohort may lend.",
    )


# -- ResourceQuota -----------------------------------------------------------------


def _resource_quotas(
    workload: WorkloadView,
    sets: tuple[PodSet, ...],
    quotas: tuple[ResourceQuota, ...],
    supply: QueueSupply,
    namespace: str,
) -> Iterator[Violation]:
    """A Pod whose own request exceeds a `requests.` (or a standard resource's bare)
    quota is refused at creation; so are ranks of one job beyond it, and a job whose
    ranks wait for each other never runs."""
    whole = workload.shape is not None and workload.shape.job is not None
    for quota in quotas:
        if quota.scoped:
            continue  # counts only some Pods (priority class, scopes): not judged
        for item, limit in quota.hard.items():
            resource = _enforced(item)
            if resource is None:
                continue
            for pod_set in sets:
                one = pod_set.requests.get(resource, 0)
                if one > limit:
                    yield _over(workload, quota, item, resource, limit, pod_set, one, "One Pod")
                    return
            total = sum(s.total(resource) for s in sets)
            if whole and total > limit:
                yield _over(workload, quota, item, resource, limit, sets[0], total, "All the ranks")
                return


def _over(
    workload: WorkloadView,
    quota: ResourceQuota,
    item: str,
    resource: str,
    limit: int,
    pod_set: PodSet,
    asked: int,
    who: str,
) -> Violation:
    said = (
        f"exceeded quota: {quota.name}, requested: {item}={shown(resource, asked)}, used: "
        f"{item}=0, limited: {item}={shown(resource, limit)}"
    )
    one = who == "One Pod"
    ranks = "" if one else ", and its ranks wait for each other"
    subject = (
        "The Pod asks"
        if workload.kind == "Pod"
        else f"One Pod of the {workload.kind} asks"
        if one
        else f"The ranks of the {workload.kind} together ask"
    )
    return Violation(
        "resource-quota-too-small",
        pod_set.path,
        f"{subject} {shown(resource, asked)} {resource}, "
        f"more than ResourceQuota {quota.namespace}/{quota.name} allows ({item}: "
        f"{shown(resource, limit)}) even when nothing else runs: the apiserver refuses the "
        f'Pods beyond it ("{said}"){ranks}. Ask for less, or raise the quota.',
    )


def _enforced(item: str) -> str | None:
    """The resource a spec.hard item enforces on Pods' requests; None when it is never
    enforced for them (limits. of an extended resource, a bare extended name; FACTS i)."""
    if item.startswith("requests."):
        return item.removeprefix("requests.")
    if item in ("cpu", "memory", "ephemeral-storage"):
        return item
    return None


# -- queue objects ----------------------------------------------------------------


def _queue_object(view: QueueView, inventory: Inventory, params: Params) -> Iterator[Violation]:
    try:
        record = parse(view.obj)
    except InventoryError as exc:
        raise UnreadableObject(str(exc)) from None
    version = str(view.obj.get("apiVersion", "")).removeprefix(KUEUE_GROUP + "/")
    if view.kind != "ResourceQuota" and version == DEPRECATED_VERSION:
        yield Violation(
            "deprecated-api",
            ("apiVersion",),
            f"{ref(view.obj)} is written in {KUEUE_GROUP}/{DEPRECATED_VERSION}, which Kueue "
            f"v0.19 deprecates (v1beta2 is stored{_renamed(view.kind)}). Write it in "
            f"{KUEUE_GROUP}/v1beta2.",
            advisory=True,
        )
    if isinstance(record, ClusterQueue):
        yield from _cluster_queue(record, inventory, params)
    elif isinstance(record, ResourceFlavor):
        yield from _flavor(record, inventory)
    elif isinstance(record, ResourceQuota):
        yield from _unenforced(record, params)


def _renamed(kind: str) -> str:
    return (
        "; a ClusterQueue's spec.cohort is spec.cohortName there" if kind == "ClusterQueue" else ""
    )


def _cluster_queue(
    queue: ClusterQueue, inventory: Inventory, params: Params
) -> Iterator[Violation]:
    covered = [r for g in queue.groups for r in g.covered]
    gpus = [r for r in covered if params.is_gpu(r)]
    if queue.namespace_selector is None:
        yield Violation(
            "queue-admits-nothing",
            ("spec",),
            f"ClusterQueue {queue.name} has no namespaceSelector, which selects no namespace: "
            "it admits no Workload at all. Set namespaceSelector (matchLabels of the "
            "namespaces it serves).",
            advisory=True,
        )
    elif gpus and _takes_all(queue.namespace_selector):
        yield Violation(
            "queue-open-to-all",
            ("spec", "namespaceSelector"),
            f"ClusterQueue {queue.name}'s namespaceSelector {{}} takes every namespace: "
            f"any tenant with a LocalQueue pointing here gets its {listing(gpus)} quota. "
            "Select the namespaces it serves by label.",
            advisory=True,
        )
    if gpus:
        yield from _mig_not_covered(queue, covered, inventory, params)


def _mig_not_covered(
    queue: ClusterQueue, covered: list[str], inventory: Inventory, params: Params
) -> Iterator[Violation]:
    """A flavor of the queue whose nodes (by its nodeLabels, as Kueue pins the Pods)
    offer MIG slices the queue does not cover: jobs asking for them are never admitted
    through it. A flavor without nodeLabels is not tied to nodes: not judged."""
    for group in queue.groups:
        for fq in group.flavors:
            flavor = inventory.queues.flavors.get(fq.flavor)
            if flavor is None or not flavor.node_labels:
                continue
            nodes = [n for n in inventory.nodes if _carries(n.labels, flavor.node_labels)]
            offered = sorted({r for n in nodes for r in n.allocatable if params.is_mig(r)})
            missing = [r for r in offered if r not in covered]
            if missing:
                yield Violation(
                    "mig-not-covered",
                    ("spec", "resourceGroups"),
                    f"ClusterQueue {queue.name}'s flavor {fq.flavor} selects nodes that offer "
                    f"{listing(missing)} ({_node_names(nodes, missing)}), which the queue does "
                    f"not cover: a job asking for them through it is never admitted "
                    f'("resource {missing[0]} unavailable in ClusterQueue"). Add them to '
                    "coveredResources with a quota, or narrow the flavor's nodeLabels.",
                    advisory=True,
                )
                return


def _carries(labels: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in wanted.items())


def _node_names(nodes: list[Any], resources: list[str]) -> str:
    names = [n.name for n in nodes if any(r in n.allocatable for r in resources)]
    return f"node{'s' if len(names) > 1 else ''} {listing(names)}"


def _flavor(flavor: ResourceFlavor, inventory: Inventory) -> Iterator[Violation]:
    if not flavor.node_labels or not inventory.known or not inventory.node_count:
        return
    nodes = inventory.nodes
    if any(_carries(n.labels, flavor.node_labels) for n in nodes):
        return
    yield Violation(
        "flavor-matches-no-node",
        ("spec", "nodeLabels"),
        f"ResourceFlavor {flavor.name}'s nodeLabels {_labels_text(flavor.node_labels)} match "
        f"none of the {len(nodes)} nodes: Kueue admits Workloads against its quota without "
        "looking at nodes, and their Pods stay Pending. Fix the labels, or label the nodes.",
        advisory=True,
    )


def _unenforced(quota: ResourceQuota, params: Params) -> Iterator[Violation]:
    for item in quota.hard:
        resource = item.removeprefix("limits.")
        if "/" in resource and _enforced(item) is None and params.is_gpu(resource):
            yield Violation(
                "quota-not-enforced",
                ("spec", "hard", item),
                f"ResourceQuota {quota.namespace}/{quota.name} sets {item}, which Kubernetes "
                f"accepts and never enforces for an extended resource: only "
                f"requests.{resource} limits what Pods may ask. Write requests.{resource}.",
                advisory=True,
            )


# -- helpers ----------------------------------------------------------------------


def _owned(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") == "Pod" and bool(as_dict(obj.get("metadata")).get("ownerReferences"))


def _framework(workload: WorkloadView) -> str:
    kind = workload.kind.lower()
    return kind if workload.group in ("", "apps") else f"{workload.group}/{kind}"


def _label_path(workload: WorkloadView) -> Path:
    return ("metadata", "labels", QUEUE_LABEL) if QUEUE_LABEL in workload.labels else ("metadata",)


def _queues_here(names: list[str]) -> str:
    return f"LocalQueues there: {listing(names)}" if names else "it has no LocalQueue"


def _takes_all(selector: Mapping[str, Any]) -> bool:
    return not selector.get("matchLabels") and not selector.get("matchExpressions")


def _decided_by_name(selector: Mapping[str, Any]) -> bool:
    """The selector reads no label but the namespace's name label, which is always set."""
    keys = set(as_dict(selector.get("matchLabels")))
    for expr in selector.get("matchExpressions") or ():
        keys.add(str(as_dict(expr).get("key")))
    return keys <= {NAME_LABEL}


def _selector_text(selector: Mapping[str, Any]) -> str:
    labels = as_dict(selector.get("matchLabels"))
    parts = [f"{k}={v}" for k, v in labels.items()]
    for expr in selector.get("matchExpressions") or ():
        e = as_dict(expr)
        values = ",".join(str(v) for v in e.get("values") or ())
        parts.append(
            f"{e.get('key')} {e.get('operator')} ({values})"
            if values
            else f"{e.get('key')} {e.get('operator')}"
        )
    return "{" + ", ".join(parts) + "}"


def _labels_text(labels: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) + "}"


def judges(params: Params) -> Mapping[TargetKind, Reads]:
    """A job is judged for what it requests (extended resources: its GPUs; a queue may
    lack cpu or memory too, but a Pod that asks for no extended resource is no GPU job),
    and its owners (a Pod a controller made is judged with it; its name is not quoted,
    so the replicas of one template share the server's cache);
    queue objects whole."""
    return {
        "workload": Reads(extended_resources=True, queue_supply=True, owners=True),
        "queue": Reads(every_field=True, queue_supply=True, names=True),
    }


CHECK = Check(
    name="queues",
    params=Params,
    run=run,
    judges=judges,
    rules={
        "no-local-queue": Rule(
            "A job whose kueue.x-k8s.io/queue-name names no LocalQueue in its namespace."
        ),
        "no-cluster-queue": Rule("A job whose LocalQueue points to no ClusterQueue."),
        "queue-unreadable": Rule(
            "A job whose LocalQueue or ClusterQueue could not be read: it cannot be judged."
        ),
        "namespace-not-selected": Rule(
            "A job whose ClusterQueue's namespaceSelector does not take its namespace."
        ),
        "resource-not-covered": Rule(
            "A job asking for a resource (a MIG slice, a GPU) its ClusterQueue does not cover."
        ),
        "no-flavor-matches": Rule(
            "A job that no flavor of its ClusterQueue can take (taints, node affinity)."
        ),
        "quota-never-admits": Rule(
            "A job asking for more than its ClusterQueue can ever give: nominal quota plus "
            "what its cohort may lend, in every flavor it could take."
        ),
        "integration-disabled": Rule(
            "A job naming a queue through a Kueue integration that is not enabled."
        ),
        "resource-quota-too-small": Rule(
            "A Pod, or a job's ranks together, asking for more than a ResourceQuota allows."
        ),
        "queue-admits-nothing": Rule(
            "A ClusterQueue without namespaceSelector: it admits nothing."
        ),
        "queue-open-to-all": Rule(
            "A ClusterQueue with GPU quota whose namespaceSelector {} takes every namespace."
        ),
        "mig-not-covered": Rule(
            "A GPU ClusterQueue whose flavor's nodes offer MIG slices it does not cover.",
            uses_inventory=True,
        ),
        "flavor-matches-no-node": Rule(
            "A ResourceFlavor whose nodeLabels match no node: quota that can never be used.",
            uses_inventory=True,
        ),
        "quota-not-enforced": Rule(
            "A ResourceQuota on limits.<gpu> or a bare <gpu>: accepted, never enforced."
        ),
        "deprecated-api": Rule("A Kueue object written in the deprecated v1beta1 API."),
    },
)
