"""One primary failure domain per Pending Pod, with its evidence.

The domains are tried in the order in which fixing one can matter: a gate first (the
scheduler has not looked at the Pod), then the GPU resource names (nothing else helps
while no node offers the name), then what no node can ever hold, then placement, then
nodes out of service, then room now, then DRA claims (webhook.core.diagnosis.dra); a Pod that
passes them all fits now. Pure: the caller gives the time (`now`) along with the facts.
"""

from __future__ import annotations

from datetime import datetime

from webhook.core.access.gpuresources import GpuResources
from webhook.core.diagnosis import dra
from webhook.core.diagnosis.absent import absent, broken_finding
from webhook.core.diagnosis.capacity import can_hold, fit_now
from webhook.core.diagnosis.case import SHOWN_NODES, Case
from webhook.core.diagnosis.cluster import ClusterFacts
from webhook.core.diagnosis.evidence import Agreement, Diagnosis, Domain, Evidence, Fact
from webhook.core.diagnosis.facts import PendingPod, SchedulerEvent
from webhook.core.diagnosis.gpunodes import broken_nodes
from webhook.core.diagnosis.placement import placement
from webhook.core.diagnosis.room import exceeds, exhausted
from webhook.core.diagnosis.scheduler import parse_message
from webhook.core.diagnosis.verdicts import excluded, fits, gated, no_gpu, unavailable
from webhook.core.workloads.units import PODS, shown


def diagnose(
    pod: PendingPod,
    *,
    cluster: ClusterFacts,
    gpus: GpuResources,
    event: SchedulerEvent | None,
    now: datetime | None,
) -> Evidence:
    """The evidence record of one Pending Pod."""
    gpu_want = {r: n for r, n in pod.want.items() if gpus.is_gpu(r)}
    case = Case(pod, cluster, gpus, placement(pod.spec, cluster), gpu_want)
    finding, candidates = judge(case, now)
    agreement_, why = agreement(finding.domain, event)
    facts = finding.facts
    if event is not None:
        facts = (*facts, Fact("scheduler", "FailedScheduling", event.message))
    nodes = list(cluster.named(candidates))
    names = (
        sorted(n.name for n in nodes)[:SHOWN_NODES]
        if len(nodes) < 1000
        else ([n.name for n in nodes[:SHOWN_NODES]])
    )
    return Evidence(
        time=now,
        pod=pod.ref,
        owner=pod.owner,
        domain=finding.domain,
        verdict=finding.verdict,
        facts=facts,
        candidates=candidates.bit_count(),
        candidate_nodes=tuple(names),
        requests={r: shown(r, n) for r, n in pod.want.items() if r != PODS},
        scheduler_message=event.message if event else None,
        scheduler_time=event.time if event else None,
        agreement=agreement_,
        disagreement=why,
        next_action=finding.next_action,
        also=finding.also,
        commands=commands(pod.ref, facts, names),
    )


def commands(ref: str, facts: tuple[Fact, ...], candidates: list[str]) -> tuple[str, ...]:
    """The kubectl commands that show a record's facts: the Pod and its scheduler
    events, and the nodes the facts are about (else the first candidates)."""
    namespace, _, name = ref.partition("/")
    nodes = list(dict.fromkeys(f.about[5:] for f in facts if f.about.startswith("node ")))
    out = [
        f"kubectl describe pod -n {namespace} {name}",
        f"kubectl get events -n {namespace} --field-selector "
        f"involvedObject.name={name},reason=FailedScheduling",
    ]
    out += [f"kubectl describe node {n}" for n in (nodes or candidates)[:3]]
    return tuple(out)


def judge(case: Case, now: datetime | None) -> tuple[Diagnosis, int]:
    """(the primary finding, the nodes that could take the Pod but for this finding)."""
    pod, cluster, place = case.pod, case.cluster, case.place
    if pod.gates:
        return gated(case), 0
    if not pod.asks_for_gpus:
        return no_gpu(case), 0
    for resource in case.gpu_want:
        if not cluster.offering(resource):
            return absent(case, resource), 0
    pool = cluster.all
    for resource in case.gpu_want:
        pool &= cluster.offering(resource)
    ever = can_hold(cluster, pod.want, pool)
    if not ever:
        return exceeds(case, pool), 0
    candidates = ever & place.placed
    if not candidates:
        broken = _broken(case, place.placed)
        return (broken or excluded(case, ever)), 0
    up = candidates & ~place.unavailable
    if not up:
        return unavailable(case, candidates), candidates
    fit = fit_now(cluster, pod.want, up, gpus=frozenset(case.gpu_want))
    if not fit.fits:
        finding = exhausted(case, up, fit)
        broken = _broken(case, place.placed & ~up)
        if broken is not None:
            also = f"{broken.domain}: {broken.verdict}"
            finding = Diagnosis(
                finding.domain, finding.verdict, finding.next_action, finding.facts, (also,)
            )
        return finding, candidates
    if pod.access.claims:
        claims = dra.judge(case, usable=fit.fits)
        if claims is not None:
            return claims, candidates
    return fits(case, fit.fits, now), candidates


def _broken(case: Case, bits: int) -> Diagnosis | None:
    """A MIG change or an unregistered device plugin on nodes of `bits` that would
    offer the Pod's GPU resources otherwise."""
    for resource in case.gpu_want:
        found = list(broken_nodes(case.cluster, resource, bits, case.gpus))
        if found:
            return broken_finding(case, resource, found)
    return None


def agreement(domain: Domain, event: SchedulerEvent | None) -> tuple[Agreement, str]:
    """Whether the scheduler's last message is evidence for `domain`, and if not, why."""
    if event is None:
        return "no-event", ""
    message = parse_message(event.message)
    if domain == "not-stuck":
        return "disagrees", (
            "the scheduler's last attempt failed, but the Pod fits now: the cluster changed "
            "since (a Pod ended, a node came back or was added)"
        )
    domains = message.domains()
    if domain in domains:
        return "agrees", ""
    if not domains:
        return "disagrees", (
            f"the scheduler names {message.reason_text() or 'nothing'}, which is outside "
            f"what diagnose judges (Pod affinity, volumes, topology spread, ports); "
            f"{domain} holds too and comes first"
        )
    return "disagrees", (
        f"the scheduler names {message.reason_text()} ({' or '.join(sorted(domains))}): it "
        f"reports only the first filter each node failed, or the cluster changed since; "
        f"{domain} holds now and must be fixed first"
    )
