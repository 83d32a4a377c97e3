"""Why is this pod terminating?  A pure, total function from evidence to a verdict.

The question: on SIGTERM, drain gracefully (a planned disruption) or
shed load and exit fast (the node or the scheduler wants the resources back, and
the kubelet may SIGKILL a slow drain — hard-threshold evictions get a 1 s grace
period, ``immediateEvictionGracePeriodSeconds`` in eviction_manager.go).
Treating an eviction as a drain is the unsafe error; the reverse only costs a
brief connection reset.  So **drain requires positive evidence of a voluntary
disruption**; everything else sheds load.

Decision order at SIGTERM (first tier that decides wins; docs/termination-detector.md,
"What it reads"):

1. **The pod's own object**, used only when its UID equals ``Evidence.pod_uid``
   (a pod with the same name but another UID is another incarnation and is
   ignored entirely).  A ``DisruptionTarget=True`` condition maps by reason:
   ``EvictionByEvictionAPI`` → voluntary; ``PreemptionByScheduler`` → preempted;
   ``DeletionByTaintManager`` / ``DeletionByPodGC`` → involuntary_eviction;
   ``TerminationByKubelet`` → refined by the kubelet's status reason/message:
   eviction (resource parsed) → involuntary_eviction, critical-pod preemption →
   preempted, node shutdown or unknown → involuntary_eviction.  An unrecognised
   reason decides nothing but rules out a voluntary reading, and so does a
   DisruptionTarget whose status is neither ``"True"`` nor ``"False"`` (the API's
   ``"Unknown"``, or anything it does not define: something happened); ``"False"``
   reads as no condition.  Without the condition, a kubelet status (``Evicted``,
   ``Preempting``, node shutdown) decides as above; otherwise ``deletionTimestamp``
   set → voluntary (delete, rollout, scale-down); unset → "the kubelet started it",
   undecided.
2. **Events for this UID** (consulted when tier 1 did not decide): an ``Evicted``
   event from source ``kubelet``, whatever its type → involuntary_eviction (resource from the
   ``starved_resource`` annotation or the message); a kubelet ``Preempting`` or a
   scheduler ``Preempted`` (action ``Preempting``) → preempted.
3. **Node pressure** (True MemoryPressure/DiskPressure/PIDPressure conditions or
   the matching ``node.kubernetes.io/*-pressure`` taints) is corroboration only.
   Exact rule: it never overrides a decision of tiers 1-2; when they are
   undecided it *upgrades* the otherwise-unknown case from indeterminate to
   involuntary_eviction with the pressured resource ("event propagation
   lags"), and it beats tier 4.  The action is the same either
   way (shed load): pressure changes the label, never turns a drain into a shed.
4. **graceful-drain's rollout marker** (``restarted-at`` on the owning
   Deployment) → voluntary, but only when the stamp is a strict RFC 3339 time within
   the window the controller honours (``rollout_timeout`` either side of ``now``), and
   (a) the pod object is not usable (a
   readable, matching pod is authoritative: a rollout sets deletionTimestamp, so
   an unset one means the rollout is not why we are stopping) and (b) the
   absence of a kubelet Evicted event is informative (retention rule below).
   The marker is about the Deployment, not this pod; without (b) a kubelet
   eviction during a rollout could not be excluded.

Fallback: nothing decided → indeterminate, shed load (the conservative
fallback: assume eviction unless a voluntary marker is present).

The one exception to "higher tier wins" (the record overrides), applied in one place
(:func:`_override`) to whatever voluntary finding was chosen (DisruptionTarget
``EvictionByEvictionAPI``, ``deletionTimestamp``, the rollout marker): it yields to a
kubelet termination record in the pod's status (``Evicted``, ``Preempting``, node
shutdown), else to a kubelet ``Evicted`` event for this UID, else to a preemption
record for this UID (a scheduler ``Preempted`` or kubelet ``Preempting`` event).
The kubelet and the scheduler's preemption do set or keep no voluntary mark,
and the Eviction API's ``UpdatePodCondition`` *replaces* an existing DisruptionTarget,
so a pod the kubelet evicted (or the scheduler preempted) and a drain then evicted
again reads as ``EvictionByEvictionAPI``; the earlier record is then the truer one, and
the safe direction besides.

Retention rule: the absence of a kubelet Evicted event for this UID is
informative only if events were readable, the UID is known, and the window in
which such an event would have been emitted (at most ``grace_period_seconds``
before ``now``) lies within ``event_retention_seconds`` — i.e.
``0 < event_retention_seconds`` and ``grace_period_seconds <= event_retention_seconds``.
Past retention the absence is "cannot determine", never "not evicted".

OOM kills deliver SIGKILL, never SIGTERM: at SIGTERM a ``lastState`` OOMKilled is
recorded as context only.  With ``Trigger.AFTER_RESTART`` the classifier reports
the previous container instance from ``lastState``: any OOMKilled →
``oom_killed``, else indeterminate; the action is always ``report_only``.

``classify`` never raises: an internal error yields an indeterminate,
shed-load (or report-only) verdict whose evidence names the error.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from graceful_drain.annotations import DEFAULT_ROLLOUT_TIMEOUT
from graceful_drain.kube.timefmt import as_utc
from graceful_drain.termination.evidence import Evidence, Trigger, Unavailable
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
    "DEFAULT_ROLLOUT_TIMEOUT",
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
    events = read_events(evidence, now, grace_period_seconds, event_retention_seconds)
    node = read_node(evidence)
    owner = read_owner(
        evidence, pod.usable is not None, events.absence_informative, now, rollout_timeout
    )
    notes: list[EvidenceItem] = []

    chosen = pod.finding or events.finding or node.finding or owner.finding
    if chosen is not None and chosen.cause is Cause.VOLUNTARY:
        chosen = _override(chosen, pod, events, notes)
    if chosen is None:
        chosen = _fallback(evidence, (pod, events, node, owner))
        notes.append(chosen.item)

    items = pod.items + events.items + node.items + owner.items + notes
    drain = chosen.cause is Cause.VOLUNTARY
    action = Action.DRAIN_GRACEFULLY if drain else Action.SHED_LOAD_AND_EXIT_FAST
    return _verdict(chosen, action, Trigger.SIGTERM, now, items)


_KUBELET_RECORD_OVERRIDES = {
    KubeletTermination.EVICTION: (Fact.KUBELET_EVICTION_OVERRIDE, "an eviction"),
    KubeletTermination.PREEMPTION: (Fact.PREEMPTION_OVERRIDE, "a critical-pod preemption"),
    KubeletTermination.NODE_SHUTDOWN: (Fact.KUBELET_TERMINATION_OVERRIDE, "a node shutdown"),
}


def _override(
    voluntary: Finding, pod: PodReading, events: EventsReading, notes: list[EvidenceItem]
) -> Finding:
    """The one place a voluntary reading yields: to a kubelet, preemption or node-shutdown
    record of this UID (module docstring, "the record overrides")."""
    record: Finding | None = None
    if pod.kubelet_record is not None and pod.kubelet_kind in _KUBELET_RECORD_OVERRIDES:
        record = pod.kubelet_record
        fact, what = _KUBELET_RECORD_OVERRIDES[pod.kubelet_kind]
        detail = f"the pod's status records {what} by the kubelet"
    elif events.kubelet_eviction is not None:
        record, fact = events.kubelet_eviction, Fact.KUBELET_EVICTION_OVERRIDE
        detail = "the kubelet recorded an Evicted event for this UID"
    elif events.preemption is not None:
        record, fact = events.preemption, Fact.PREEMPTION_OVERRIDE
        detail = "this UID was preempted (a preemption event)"
    if record is None:
        return voluntary
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
    marked = tuple(
        dataclasses.replace(item, decisive=True) if item is chosen.item else item for item in items
    )
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
