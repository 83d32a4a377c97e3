"""Why is this pod terminating?  A pure, total function from evidence to a verdict.

The question: on SIGTERM, drain gracefully (a planned disruption) or
shed load and exit fast (the node or the scheduler wants the resources back, and
the kubelet may SIGKILL a slow drain — hard-threshold evictions get a 1 s grace
period, ``immediateEvictionGracePeriodSeconds`` in eviction_manager.go).
Treating an eviction as a drain is the unsafe error; the reverse only costs a
brief connection reset.  So **drain requires positive evidence of a voluntary
disruption**; everything else sheds load.

Decision order at SIGTERM — the seed's (docs/termination-detector.md, "The decision
order"): eviction event → node pressure → voluntary signals; the first that decides wins.

1. **An eviction record of this UID**: any ``Evicted`` event whose involved object is
   this UID, whatever its type and source (``kubelet``, ``Kubelet``, none at all) →
   involuntary_eviction, resource from the ``starved_resource`` annotation or the
   message; then the kubelet's own eviction record in the pod's status.  One exception,
   told apart by what the event says: Karpenter's record of its own Eviction API call
   (type ``Normal``, message ``Evicted pod``) when the pod's own object confirms that
   call (``DisruptionTarget`` ``EvictionByEvictionAPI``); without that confirmation it
   counts like any other.
2. **Node pressure**: a ``MemoryPressure``/``DiskPressure``/``PIDPressure`` condition not
   ``"False"`` (True, or Unknown: the kubelet is not reporting), or a
   ``node.kubernetes.io/*-pressure`` taint → involuntary_eviction with the resource.
3. **Any other involuntary record of this UID**: a ``DisruptionTarget=True`` naming the
   scheduler (preempted), the taint manager or PodGC (involuntary_eviction), the kubelet
   (refined by its status: eviction, critical-pod preemption, node shutdown); the
   kubelet's status (``Preempting``, node shutdown); a preemption event (the scheduler's
   ``Preempted``, a ``Preempting``) → preempted or involuntary_eviction.
4. **Malformed evidence**: a field of the wrong type, a list item that is not an object,
   a key the API server always writes but missing, a timestamp not strict RFC 3339 or
   implausible (before Kubernetes existed, or more than the grace period and an hour
   ahead) → shed, ``evidence_malformed``, naming the field (never "as if absent").
5. **Voluntary signals**, read only if nothing above decided: ``DisruptionTarget=True``
   ``EvictionByEvictionAPI`` (a drain), else a ``deletionTimestamp`` (delete, rollout,
   scale-down) — unless a DisruptionTarget of another status or reason, or a status
   reason no API deletion writes, says something else happened — else, when this pod's
   object is gone (404, or another incarnation under its name), graceful-drain's rollout
   marker (``restarted-at`` on the owning Deployment, a strict RFC 3339 time within
   ``rollout_timeout`` either side of ``now``).  **The gate**: a voluntary signal is a
   drain only when an eviction and pressure were excluded — the events were read and
   parsed whole within the deadline, this pod's UID is known, the absence of an Evicted
   event is informative under the retention rule, and the node was read.  Otherwise:
   ``cannot_determine``, indeterminate, shed load.

Fallback: nothing decided → indeterminate, shed load (the conservative fallback: assume
eviction unless a voluntary marker is present).

When a record of tiers 1-3 decides while a voluntary signal was there, the evidence says
so (``kubelet_eviction_override``, ``node_pressure_override``, ``preemption_override``,
``kubelet_termination_override``).  The Eviction API's ``UpdatePodCondition``
*replaces* an existing DisruptionTarget, so a pod the kubelet evicted (or the scheduler
preempted) and a drain then evicted again reads as ``EvictionByEvictionAPI``; the
earlier record is the truer one, and the safe direction besides.

Retention rule: the absence of an Evicted event for this UID is informative only if
``0 < event_retention_seconds`` and ``grace_period_seconds <= event_retention_seconds``
(the window in which the event would have been written lies within retention).  Past
retention the absence is "cannot determine", never "not evicted".

OOM kills deliver SIGKILL, never SIGTERM: at SIGTERM a ``lastState`` OOMKilled is
recorded as context only.  With ``Trigger.AFTER_RESTART`` the classifier reports
the previous container instance from ``lastState``: any OOMKilled →
``oom_killed``, else indeterminate; the action is always ``report_only``.

``classify`` never raises: an internal error yields an indeterminate,
shed-load (or report-only) verdict whose evidence names the error.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from graceful_drain.annotations import DEFAULT_ROLLOUT_TIMEOUT
from graceful_drain.kube.timefmt import as_utc
from graceful_drain.termination.evidence import Evidence, Trigger, Unavailable, UnavailableReason
from graceful_drain.termination.kubelet import KubeletTermination
from graceful_drain.termination.readings import (
    EventsReading,
    Finding,
    PodReading,
    Reading,
    absence_is_informative,
    make_item,
    read_events,
    read_node,
    read_owner,
    read_pod,
    read_shapes,
    termination_item,
    usable_pod,
)
from graceful_drain.termination.verdict import (
    Action,
    Cause,
    EvidenceItem,
    Fact,
    Source,
    Verdict,
)

__all__ = [
    "DEFAULT_EVENT_RETENTION_SECONDS",
    "Action",
    "Cause",
    "EvidenceItem",
    "Fact",
    "Source",
    "Verdict",
    "absence_is_informative",
    "classify",
]

DEFAULT_EVENT_RETENTION_SECONDS = 3600  # kube-apiserver --event-ttl default (1h)


def classify(
    evidence: Evidence,
    now: datetime,
    grace_period_seconds: int,
    event_retention_seconds: int = DEFAULT_EVENT_RETENTION_SECONDS,
    rollout_timeout: timedelta = DEFAULT_ROLLOUT_TIMEOUT,
) -> Verdict:
    """Classify why this pod is terminating; total (never raises).  ``rollout_timeout`` is
    the controller's ``--rollout-timeout``: a restarted-at stamp outside it is no marker."""
    try:
        if evidence.trigger is Trigger.AFTER_RESTART:
            return _after_restart(evidence, now)
        return _at_sigterm(
            evidence, now, grace_period_seconds, event_retention_seconds, rollout_timeout
        )
    except Exception as error:  # the SIGTERM path must always get an answer
        return _error_verdict(evidence, now, error)


def _at_sigterm(
    evidence: Evidence,
    now: datetime,
    grace_period_seconds: int,
    event_retention_seconds: int,
    rollout_timeout: timedelta,
) -> Verdict:
    pod = read_pod(evidence)
    events = read_events(
        evidence, now, grace_period_seconds, event_retention_seconds, eviction_api=pod.eviction_api
    )
    node = read_node(evidence)
    owner = read_owner(evidence, _pod_gone(evidence), now, rollout_timeout)
    malformed = read_shapes(evidence, now, grace_period_seconds)
    notes: list[EvidenceItem] = []

    voluntary = _voluntary_reading(pod, owner)
    tiers: tuple[Callable[[], Finding | None], ...] = (
        # 1. an eviction record: the Evicted event, then the kubelet's status
        lambda: _override(events.kubelet_eviction, voluntary, Fact.KUBELET_EVICTION_OVERRIDE,
                          "an Evicted event was recorded for this UID", notes),
        lambda: _record(pod, events, voluntary, notes, evictions_only=True),
        # 2. node pressure
        lambda: _override(node.finding, voluntary, Fact.NODE_PRESSURE_OVERRIDE,
                          "the node is under pressure", notes),
        # 3. any other record; 4. malformed evidence
        lambda: _record(pod, events, voluntary, notes),
        lambda: malformed[0] if malformed else None,
    )  # fmt: skip
    chosen = _first(tiers)
    if chosen is None and voluntary is not None:
        chosen = _gate(evidence, voluntary, events, grace_period_seconds, event_retention_seconds)
        if chosen is not voluntary:
            notes.append(chosen.item)
    if chosen is None:
        chosen = _fallback(evidence, (pod, events, node, owner))
        notes.append(chosen.item)

    items = pod.items + events.items + node.items + owner.items
    items += [finding.item for finding in malformed] + notes
    drain = chosen.cause is Cause.VOLUNTARY
    action = Action.DRAIN_GRACEFULLY if drain else Action.SHED_LOAD_AND_EXIT_FAST
    return _verdict(chosen, action, Trigger.SIGTERM, now, items)


def _first(tiers: tuple[Callable[[], Finding | None], ...]) -> Finding | None:
    """The first tier that decides; the later ones are not read (nor noted)."""
    for tier in tiers:
        finding = tier()
        if finding is not None:
            return finding
    return None


def _pod_gone(evidence: Evidence) -> bool:
    """This pod's object is gone: the API answered 404, or the name holds another
    incarnation.  A read that failed otherwise (timeout, 403, error) proves nothing."""
    pod = evidence.pod
    if isinstance(pod, Unavailable):
        return pod.reason is UnavailableReason.NOT_FOUND
    return bool(evidence.pod_uid) and pod.uid is not None and pod.uid != evidence.pod_uid


def _voluntary_reading(pod: PodReading, owner: Reading) -> Finding | None:
    """What reads as voluntary, before the gate: the pod's own object (DisruptionTarget
    EvictionByEvictionAPI, a deletionTimestamp), else the rollout marker of a pod gone."""
    for finding in (pod.finding, owner.finding):
        if finding is not None and finding.cause is Cause.VOLUNTARY:
            return finding
    return None


_KUBELET_RECORD_OVERRIDES = {
    KubeletTermination.EVICTION: (Fact.KUBELET_EVICTION_OVERRIDE, "an eviction"),
    KubeletTermination.PREEMPTION: (Fact.PREEMPTION_OVERRIDE, "a critical-pod preemption"),
    KubeletTermination.NODE_SHUTDOWN: (Fact.KUBELET_TERMINATION_OVERRIDE, "a node shutdown"),
}


def _record(
    pod: PodReading,
    events: EventsReading,
    voluntary: Finding | None,
    notes: list[EvidenceItem],
    *,
    evictions_only: bool = False,
) -> Finding | None:
    """Tier 3: any other record of an involuntary termination of this UID — the kubelet's
    status, a DisruptionTarget naming the scheduler, the taint manager or PodGC, a
    preemption event.  ``evictions_only``: tier 1's share, the kubelet's eviction record
    in the pod's status (the same record as its Evicted event)."""
    if evictions_only and pod.kubelet_kind is not KubeletTermination.EVICTION:
        return None
    if pod.finding is not None and pod.finding.cause is not Cause.VOLUNTARY:
        return pod.finding
    if pod.kubelet_record is not None and pod.kubelet_kind in _KUBELET_RECORD_OVERRIDES:
        fact, what = _KUBELET_RECORD_OVERRIDES[pod.kubelet_kind]
        detail = f"the pod's status records {what} by the kubelet"
        return _override(pod.kubelet_record, voluntary, fact, detail, notes)
    if evictions_only:
        return None
    return _override(
        events.preemption, voluntary, Fact.PREEMPTION_OVERRIDE,
        "this UID was preempted (a preemption event)", notes,
    )  # fmt: skip


def _override(
    record: Finding | None,
    voluntary: Finding | None,
    fact: Fact,
    detail: str,
    notes: list[EvidenceItem],
) -> Finding | None:
    """A record of an involuntary termination decides before any voluntary reading; when
    there is one, the evidence says what was overridden (module docstring)."""
    if record is None or voluntary is None:
        return record
    notes.append(
        make_item(
            Source.CLASSIFIER,
            fact,
            f"The evidence reads as voluntary ({voluntary.item.fact.value}), but {detail}; "
            "that record wins (the Eviction API replaces an earlier DisruptionTarget and a "
            "deletion keeps none, so the earlier record is the truer one; shedding is the "
            "safe direction).",
            overridden=voluntary.item.fact.value,
        )
    )
    return record


def _gate(
    evidence: Evidence,
    voluntary: Finding,
    events: EventsReading,
    grace_period_seconds: int,
    event_retention_seconds: int,
) -> Finding:
    """ "Voluntary" only when an eviction and node pressure were both excluded: the events
    read whole within the deadline (and their absence informative under the retention
    rule), the node read.  Otherwise: cannot determine, shed load."""
    doubts: list[str] = []
    if isinstance(evidence.events, Unavailable):
        doubts.append(f"the events were not read ({evidence.events})")
    elif not evidence.pod_uid:
        doubts.append("this pod's UID is unknown, so no event can be attributed to it")
    elif not events.absence_informative:
        doubts.append(
            f"the grace period ({grace_period_seconds}s) exceeds the events' retention "
            f"({event_retention_seconds}s), so an Evicted event may have expired"
        )
    if isinstance(evidence.node, Unavailable):
        doubts.append(f"the node was not read ({evidence.node}), so pressure cannot be excluded")
    if not doubts:
        return voluntary
    return Finding(
        Cause.INDETERMINATE,
        None,
        make_item(
            Source.CLASSIFIER,
            Fact.CANNOT_DETERMINE,
            f"The evidence reads as voluntary ({voluntary.item.fact.value}), but "
            + "; and ".join(doubts)
            + ": a kubelet eviction cannot be excluded, so the cause cannot be determined; "
            "shed load.",
            overridden=voluntary.item.fact.value,
        ),
    )


def _fallback(evidence: Evidence, readings: tuple[Reading, ...]) -> Finding:
    signals: dict[str, object] = {
        "pod": evidence.pod,
        "events": evidence.events,
        "node": evidence.node,
        "owner": evidence.owner,
    }
    unavailable = [name for name, value in signals.items() if isinstance(value, Unavailable)]
    if len(unavailable) == len(signals):
        detail = "Nothing was readable in time"
    else:
        detail = "No readable signal shows a voluntary disruption or names the cause"
    detail += (
        "; conservative fallback: assume an involuntary termination and shed load "
        "(draining through an eviction risks SIGKILL mid-drain)."
    )
    return Finding(
        Cause.INDETERMINATE,
        None,
        make_item(
            Source.CLASSIFIER,
            Fact.CONSERVATIVE_FALLBACK,
            detail,
            unavailable=",".join(unavailable) or None,
            items_considered=sum(len(r.items) for r in readings),
        ),
    )


def _after_restart(evidence: Evidence, now: datetime) -> Verdict:
    reading = Reading()
    pod = usable_pod(evidence, reading)
    terminations = pod.last_terminations if pod is not None else ()
    pairs = [(t, termination_item(t, at_sigterm=False)) for t in terminations]
    reading.items.extend(item for _, item in pairs)
    oom = [(termination, item) for termination, item in pairs if termination.oom_killed]
    if oom:
        latest = max(oom, key=lambda pair: as_utc(pair[0].finished_at or datetime.min))
        chosen = Finding(Cause.OOM_KILLED, None, latest[1])
        return _verdict(chosen, Action.REPORT_ONLY, Trigger.AFTER_RESTART, now, reading.items)
    if pod is None:
        detail = "The pod object is not usable, so lastState cannot be read: cause unknown."
    elif terminations:
        detail = "No container's previous instance was OOM-killed: cause not classified."
    else:
        detail = "No container has a previous terminated instance (lastState is empty)."
    chosen = Finding(
        Cause.INDETERMINATE, None, make_item(Source.CLASSIFIER, Fact.CONSERVATIVE_FALLBACK, detail)
    )
    items = [*reading.items, chosen.item]
    return _verdict(chosen, Action.REPORT_ONLY, Trigger.AFTER_RESTART, now, items)


def _verdict(
    chosen: Finding,
    action: Action,
    trigger: Trigger,
    now: datetime,
    items: list[EvidenceItem],
) -> Verdict:
    marked = tuple(item._replace(decisive=True) if item is chosen.item else item for item in items)
    return Verdict(
        cause=chosen.cause,
        action=action,
        resource=chosen.resource if chosen.cause is Cause.INVOLUNTARY_EVICTION else None,
        decided_by=chosen.item.source,
        trigger=trigger,
        decided_at=now,
        evidence=marked,
    )


def _error_verdict(evidence: object, now: datetime, error: Exception) -> Verdict:
    trigger = getattr(evidence, "trigger", Trigger.SIGTERM)
    after_restart = trigger is Trigger.AFTER_RESTART
    item = EvidenceItem(
        Source.CLASSIFIER,
        Fact.CLASSIFIER_ERROR,
        f"The classifier failed ({type(error).__name__}: {error}); "
        "conservative fallback: shed load.",
        True,
        (("error", f"{type(error).__name__}: {error}"),),
    )
    return Verdict(
        cause=Cause.INDETERMINATE,
        action=Action.REPORT_ONLY if after_restart else Action.SHED_LOAD_AND_EXIT_FAST,
        resource=None,
        decided_by=Source.CLASSIFIER,
        trigger=Trigger.AFTER_RESTART if after_restart else Trigger.SIGTERM,
        decided_at=now,
        evidence=(item,),
    )
