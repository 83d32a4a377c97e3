"""What each signal says: evidence items in report order, and the finding it offers.

Pure helpers for :mod:`graceful_drain.termination.classify`, which owns the
decision order; see its docstring for the rules these readings implement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from graceful_drain.kube.timefmt import as_utc, format_go_duration, format_rfc3339_exact
from graceful_drain.termination.evidence import (
    ConditionState,
    ContainerTermination,
    DisruptionTargetCondition,
    EventRecord,
    EventsSnapshot,
    Evidence,
    OwnerRollout,
    PodSnapshot,
    Unavailable,
)
from graceful_drain.termination.kubelet import (
    EVICTED_REASON,
    PREEMPTING_REASON,
    EvictionMessage,
    KubeletTermination,
    PressuredResource,
    kubelet_termination_kind,
    parse_eviction_message,
)
from graceful_drain.termination.verdict import Cause, EvidenceItem, Fact, Source

EVICTION_BY_EVICTION_API = "EvictionByEvictionAPI"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
DELETION_BY_TAINT_MANAGER = "DeletionByTaintManager"
DELETION_BY_POD_GC = "DeletionByPodGC"
TERMINATION_BY_KUBELET = "TerminationByKubelet"
PREEMPTED_REASON = "Preempted"
EVICTION_API_RECORD_MESSAGE = "Evicted pod"  # Karpenter's EvictPod event

_RESOURCE_ORDER = (
    PressuredResource.MEMORY,
    PressuredResource.EPHEMERAL_STORAGE,
    PressuredResource.PID,
    PressuredResource.OTHER,
)


def absence_is_informative(grace_period_seconds: int, event_retention_seconds: int) -> bool:
    """The retention rule, for readable events and a known UID."""
    return event_retention_seconds > 0 and max(grace_period_seconds, 0) <= event_retention_seconds


class Finding(NamedTuple):
    cause: Cause
    resource: PressuredResource | None
    item: EvidenceItem


@dataclass
class Reading:
    """What one signal says: items in report order, and the finding it offers, if any."""

    items: list[EvidenceItem] = field(default_factory=list)
    finding: Finding | None = None

    def offer(self, finding: Finding) -> Finding:
        self.items.append(finding.item)
        if self.finding is None:
            self.finding = finding
        return finding


@dataclass
class PodReading(Reading):
    """What the pod's own object says, and the records in it that later tiers weigh."""

    usable: PodSnapshot | None = None
    # The kubelet's own termination record in the pod's status (eviction, critical-pod
    # preemption, node shutdown): it overrides a voluntary reading (classify).
    kubelet_record: Finding | None = None
    kubelet_kind: KubeletTermination | None = None
    # DisruptionTarget=True EvictionByEvictionAPI: the Eviction API was called on this pod.
    eviction_api: bool = False


@dataclass
class EventsReading(Reading):
    """What this UID's events say: a kubelet eviction, a preemption, and whether their
    absence is informative."""

    kubelet_eviction: Finding | None = None
    preemption: Finding | None = None  # the latest preemption record for this UID
    absence_informative: bool = False


def make_item(
    source: Source, fact: Fact, detail: str, /, **values: str | int | datetime | None
) -> EvidenceItem:
    rendered = tuple(
        (key, format_rfc3339_exact(value) if isinstance(value, datetime) else str(value))
        for key, value in values.items()
        if value is not None
    )
    return EvidenceItem(source, fact, detail, False, rendered)


def _unavailable_values(why: Unavailable) -> dict[str, str | None]:
    return {"reason": str(why.reason), "error": why.detail or None}


def _describe_unavailable(what: str, why: Unavailable) -> str:
    return f"{what} could not be read ({why})."


# --- tier 1: the pod's own object -----------------------------------------------------


def usable_pod(evidence: Evidence, reading: Reading) -> PodSnapshot | None:
    pod = evidence.pod
    expected = evidence.pod_uid or None
    if isinstance(pod, Unavailable):
        reading.items.append(
            make_item(
                Source.POD,
                Fact.POD_UNAVAILABLE,
                _describe_unavailable("The pod's own object", pod),
                **_unavailable_values(pod),
            )
        )
        return None
    if expected is None:
        reading.items.append(
            make_item(
                Source.POD,
                Fact.POD_UID_UNKNOWN,
                "This pod's UID is unknown (POD_UID unset), so the pod object cannot be "
                "verified as ours and is not used.",
                observed_uid=pod.uid,
            )
        )
        return None
    if pod.uid != expected:
        reading.items.append(
            make_item(
                Source.POD,
                Fact.POD_UID_MISMATCH,
                f"The pod object read has UID {pod.uid!r}, not ours ({expected!r}): another "
                "incarnation of the same name; ignored.",
                expected_uid=expected,
                observed_uid=pod.uid,
            )
        )
        return None
    return pod


def read_pod(evidence: Evidence) -> PodReading:
    reading = PodReading()
    pod = usable_pod(evidence, reading)
    if pod is None:
        return reading
    reading.usable = pod
    condition = pod.disruption_target
    state = condition.state if condition is not None else None
    condition_true = condition if state is ConditionState.TRUE else None
    # Evidence that something happened (True, or a status the API does not define); a
    # False condition has been withdrawn and reads as absent.
    disrupted = condition if state in (ConditionState.TRUE, ConditionState.UNKNOWN) else None
    condition_message = disrupted.message if disrupted is not None else None
    kind = kubelet_termination_kind(pod.reason, pod.message, condition_message)
    kubelet_finding = _kubelet_status_finding(pod, kind, condition_message)

    if condition is not None and state is not ConditionState.TRUE:
        reading.items.append(_condition_not_true_item(condition))
    if condition_true is not None:
        reading.eviction_api = condition_true.reason == EVICTION_BY_EVICTION_API
        cause = _condition_cause(condition_true.reason, kubelet_finding)
        item = make_item(
            Source.POD,
            Fact.DISRUPTION_TARGET,
            _condition_detail(condition_true.reason, recognised=cause is not None),
            reason=condition_true.reason,
            message=condition_true.message,
            last_transition_time=condition_true.last_transition_time,
        )
        if cause is not None:
            reading.offer(Finding(cause[0], cause[1], item))
        else:
            reading.items.append(item)
    if kubelet_finding is not None:
        # Recorded next to the condition; decides only if the condition did not, and
        # overrides it if it reads as voluntary (classify).
        reading.offer(kubelet_finding)
        reading.kubelet_record = kubelet_finding
        reading.kubelet_kind = kind
    unrecognised = (pod.reason is not None or pod.message is not None) and kubelet_finding is None
    if unrecognised:
        reading.items.append(
            make_item(
                Source.POD,
                Fact.STATUS_REASON_UNRECOGNISED,
                "The pod's status carries a reason or message that no API deletion writes "
                "(the kubelet or the node controller recorded something) and that is not "
                "recognised: it decides nothing and rules out a voluntary reading.",
                reason=pod.reason,
                message=pod.message,
            )
        )
    if reading.finding is None and disrupted is None and not unrecognised:
        _read_deletion(pod, reading)
    for termination in pod.last_terminations:
        if termination.oom_killed:
            reading.items.append(termination_item(termination, at_sigterm=True))
    return reading


def _read_deletion(pod: PodSnapshot, reading: PodReading) -> None:
    """No condition and no status record: a deletion through the API, or the kubelet's own
    termination whose cause is not on the pod yet."""
    if pod.deletion_timestamp is not None:
        reading.offer(
            Finding(
                Cause.VOLUNTARY,
                None,
                make_item(
                    Source.POD,
                    Fact.DELETION_REQUESTED,
                    "deletionTimestamp is set and there is no DisruptionTarget condition: "
                    "the pod was deleted through the API (delete, rollout, scale-down).",
                    deletion_timestamp=pod.deletion_timestamp,
                    deletion_grace_period_seconds=pod.deletion_grace_period_seconds,
                ),
            )
        )
    else:
        reading.items.append(
            make_item(
                Source.POD,
                Fact.KUBELET_INITIATED,
                "deletionTimestamp is unset and there is no DisruptionTarget condition: "
                "the kubelet started this termination; its cause is not on the pod yet.",
                phase=pod.phase,
                reason=pod.reason,
            )
        )


def _condition_cause(
    reason: str | None, kubelet_finding: Finding | None
) -> tuple[Cause, PressuredResource | None] | None:
    """The cause a True DisruptionTarget names; None for an unrecognised reason."""
    if reason == EVICTION_BY_EVICTION_API:
        return Cause.VOLUNTARY, None
    if reason == PREEMPTION_BY_SCHEDULER:
        return Cause.PREEMPTED, None
    if reason in (DELETION_BY_TAINT_MANAGER, DELETION_BY_POD_GC):
        return Cause.INVOLUNTARY_EVICTION, None
    if reason == TERMINATION_BY_KUBELET:
        if kubelet_finding is not None:
            return kubelet_finding.cause, kubelet_finding.resource
        return Cause.INVOLUNTARY_EVICTION, None
    return None


def _condition_not_true_item(condition: DisruptionTargetCondition) -> EvidenceItem:
    if condition.state is ConditionState.FALSE:
        detail = (
            "DisruptionTarget=False: a disruption that did not go ahead (the disruption "
            "controller resets a stale one to False); read as no condition."
        )
    else:
        status = "no status" if condition.status is None else f"status {condition.status!r}"
        detail = (
            f'DisruptionTarget with {status} (the API defines only "True", "False" and '
            f'"Unknown"), reason {condition.reason!r}: something disrupted this pod, but '
            "not known to be voluntary; it decides nothing and rules out a voluntary reading."
        )
    return make_item(
        Source.POD,
        Fact.DISRUPTION_TARGET_NOT_TRUE,
        detail,
        status=condition.status,
        reason=condition.reason,
        message=condition.message,
        last_transition_time=condition.last_transition_time,
    )


def _condition_detail(reason: str | None, *, recognised: bool) -> str:
    meaning = {
        EVICTION_BY_EVICTION_API: "evicted through the Eviction API (a drain; PDB-governed)",
        PREEMPTION_BY_SCHEDULER: "preempted by the scheduler for a higher-priority pod",
        DELETION_BY_TAINT_MANAGER: "deleted by the taint manager (NoExecute taint)",
        DELETION_BY_POD_GC: "deleted by the pod garbage collector (node gone or out of service)",
        TERMINATION_BY_KUBELET: "terminated by the kubelet",
    }
    if not recognised:
        return (
            f"DisruptionTarget=True with unrecognised reason {reason!r}: a disruption, "
            "but not a known voluntary one."
        )
    return f"DisruptionTarget=True, reason {reason}: {meaning.get(reason or '', reason)}."


def _kubelet_status_finding(
    pod: PodSnapshot, kind: KubeletTermination, condition_message: str | None
) -> Finding | None:
    values: dict[str, str | None] = {"reason": pod.reason, "message": pod.message}
    if kind is KubeletTermination.EVICTION:
        parsed = parse_eviction_message(pod.message)
        if not parsed.recognised and condition_message:
            parsed = parse_eviction_message(condition_message)
        return _eviction_finding(
            parsed,
            Source.POD,
            Fact.KUBELET_STATUS,
            f"The kubelet evicted this pod (node pressure or local-storage limit); "
            f"pressured resource: {parsed.resource}.",
            values,
        )
    if kind is KubeletTermination.PREEMPTION:
        return Finding(
            Cause.PREEMPTED,
            None,
            make_item(
                Source.POD,
                Fact.KUBELET_STATUS,
                "The kubelet preempted this pod to admit a critical pod.",
                **values,
            ),
        )
    if kind is KubeletTermination.NODE_SHUTDOWN:
        return Finding(
            Cause.INVOLUNTARY_EVICTION,
            None,
            make_item(
                Source.POD,
                Fact.KUBELET_STATUS,
                "The kubelet is terminating this pod because the node is shutting down.",
                **values,
            ),
        )
    return None


def termination_item(termination: ContainerTermination, *, at_sigterm: bool) -> EvidenceItem:
    name = termination.container or "?"
    when = (
        format_rfc3339_exact(termination.finished_at)
        if termination.finished_at
        else "an unknown time"
    )
    if termination.oom_killed:
        detail = f"The previous instance of container {name} was OOM-killed at {when}"
        detail += (
            "; an OOM kill delivers SIGKILL, so it is not why this SIGTERM arrived."
            if at_sigterm
            else "."
        )
        fact = Fact.CONTAINER_OOM_KILLED
    else:
        detail = (
            f"The previous instance of container {name} ended at {when} "
            f"with reason {termination.reason!r}, exit code {termination.exit_code}."
        )
        fact = Fact.CONTAINER_TERMINATED
    return make_item(
        Source.POD,
        fact,
        detail,
        container=termination.container,
        reason=termination.reason,
        exit_code=termination.exit_code,
        finished_at=termination.finished_at,
    )


# --- tier 2: events -------------------------------------------------------------------


def is_eviction_api_record(event: EventRecord) -> bool:
    """Karpenter's event for an Eviction API call it made (terminator/events: type Normal,
    reason Evicted, message "Evicted pod"), told apart by what it says, not by its
    source.  The kubelet's Evicted events are Warnings whose message names the resource."""
    return (
        event.reason == EVICTED_REASON
        and event.type == "Normal"
        and event.message == EVICTION_API_RECORD_MESSAGE
        and not event.from_kubelet
    )


def read_events(
    evidence: Evidence,
    now: datetime,
    grace_period_seconds: int,
    event_retention_seconds: int,
    *,
    eviction_api: bool = False,
) -> EventsReading:
    reading = EventsReading()
    events = evidence.events
    uid = evidence.pod_uid or None
    if isinstance(events, Unavailable):
        reading.items.append(
            make_item(
                Source.EVENTS,
                Fact.EVENTS_UNAVAILABLE,
                _describe_unavailable("Events", events).rstrip(".")
                + "; the absence of an Evicted event proves nothing.",
                **_unavailable_values(events),
            )
        )
        return reading
    if uid is None:
        reading.items.append(
            make_item(
                Source.EVENTS,
                Fact.EVENTS_UNATTRIBUTABLE,
                "This pod's UID is unknown, so no event can be attributed to it.",
                events_read=len(events.events),
            )
        )
        return reading
    own = [e for e in _by_time(events) if e.involved_uid == uid]
    for event in own:
        if event.reason != EVICTED_REASON:
            continue
        if eviction_api and is_eviction_api_record(event):
            reading.items.append(
                make_item(
                    Source.EVENTS,
                    Fact.OTHER_EVICTED_EVENT,
                    f"A Normal Evicted event {event.message!r} for this pod (from "
                    f"{event.source_component!r}): Karpenter's record of its Eviction API "
                    "call, which the pod's DisruptionTarget EvictionByEvictionAPI confirms; "
                    "not a kubelet eviction.",
                    **_event_values(event),
                )
            )
            continue
        # The kubelet writes its evictions as Warning events from "kubelet"; any other
        # Evicted event for this UID (another type, another or no source) counts too.
        finding = reading.offer(_evicted_event_finding(event, now))
        reading.kubelet_eviction = reading.kubelet_eviction or finding
    for event in own:
        if _is_preemption(event):
            finding = reading.offer(_preemption_finding(event, now))
            reading.preemption = reading.preemption or finding
    if reading.kubelet_eviction is None:
        reading.absence_informative = absence_is_informative(
            grace_period_seconds, event_retention_seconds
        )
        reading.items.append(
            _absence_item(
                reading.absence_informative,
                len(events.events),
                grace_period_seconds,
                event_retention_seconds,
            )
        )
    return reading


def _absence_item(
    informative: bool, events_read: int, grace_period_seconds: int, event_retention_seconds: int
) -> EvidenceItem:
    """No kubelet Evicted event for this UID, and whether that proves anything (the
    retention rule)."""
    if informative:
        detail = (
            f"No kubelet Evicted event for this UID among {events_read} events read; "
            f"the grace period ({grace_period_seconds}s) is within event retention "
            f"({event_retention_seconds}s), so the absence is informative."
        )
    else:
        detail = (
            f"No kubelet Evicted event for this UID, but the grace period "
            f"({grace_period_seconds}s) is not within event retention "
            f"({event_retention_seconds}s): an event may have expired, so the absence "
            "proves nothing."
        )
    return make_item(
        Source.EVENTS,
        Fact.NO_EVICTED_EVENT,
        detail,
        informative=str(informative).lower(),
        events_read=events_read,
        grace_period_seconds=grace_period_seconds,
        event_retention_seconds=event_retention_seconds,
    )


def _by_time(events: EventsSnapshot) -> list[EventRecord]:
    """Newest first, so the first finding offered is the latest event."""
    dated = [e for e in events.events if e.observed_at is not None]
    undated = [e for e in events.events if e.observed_at is None]
    dated.sort(key=lambda e: as_utc(e.observed_at or datetime.min), reverse=True)
    return dated + undated


def _is_preemption(event: EventRecord) -> bool:
    # kubelet critical-pod preemption (preemption.go: Preempting), the scheduler's Preempted
    # (action Preempting); whatever the source says.
    return event.reason in (PREEMPTING_REASON, PREEMPTED_REASON)


def _event_values(event: EventRecord) -> dict[str, str | None]:
    return {
        "reason": event.reason,
        "type": event.type,
        "source": event.source_component,
        "involved_uid": event.involved_uid,
        "message": event.message,
        "observed_at": format_rfc3339_exact(event.observed_at) if event.observed_at else None,
    }


def _ago(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "at an unknown time"
    seconds = int((as_utc(now) - as_utc(moment)).total_seconds())
    return f"{seconds}s before the verdict" if seconds >= 0 else f"{-seconds}s after the verdict"


def _evicted_event_finding(event: EventRecord, now: datetime) -> Finding:
    parsed = parse_eviction_message(event.message, event.starved_resource)
    return _eviction_finding(
        parsed,
        Source.EVENTS,
        Fact.KUBELET_EVICTED_EVENT,
        f"The kubelet recorded an Evicted event (type {event.type!r}) for this UID "
        f"({_ago(event.observed_at, now)}); pressured resource: {parsed.resource}.",
        _event_values(event),
    )


def _eviction_finding(
    parsed: EvictionMessage, source: Source, fact: Fact, detail: str,
    values: Mapping[str, str | int | datetime | None],
) -> Finding:  # fmt: skip
    """A kubelet eviction, with what its message says of the pressured resource."""
    return Finding(
        Cause.INVOLUNTARY_EVICTION,
        parsed.resource,
        make_item(
            source,
            fact,
            detail,
            resource=parsed.resource.value,
            resource_name=parsed.resource_name,
            threshold=parsed.threshold,
            available=parsed.available,
            **values,
        ),
    )


def _preemption_finding(event: EventRecord, now: datetime) -> Finding:
    by = "the kubelet (critical pod)" if event.from_kubelet else repr(event.source_component)
    return Finding(
        Cause.PREEMPTED,
        None,
        make_item(
            Source.EVENTS,
            Fact.PREEMPTION_EVENT,
            f"A {event.reason} event for this UID from {by} ({_ago(event.observed_at, now)}).",
            action=event.action,
            **_event_values(event),
        ),
    )


# --- tier 3: the node -----------------------------------------------------------------


def read_node(evidence: Evidence) -> Reading:
    reading = Reading()
    node = evidence.node
    if isinstance(node, Unavailable):
        reading.items.append(
            make_item(
                Source.NODE,
                Fact.NODE_UNAVAILABLE,
                _describe_unavailable("The node", node),
                **_unavailable_values(node),
            )
        )
        return reading
    pressures = sorted(node.pressures(), key=lambda p: _RESOURCE_ORDER.index(p.resource))
    if not pressures:
        reading.items.append(
            make_item(
                Source.NODE,
                Fact.NODE_NO_PRESSURE,
                f"Node {node.name!r} reports no memory, disk or PID pressure.",
                node=node.name,
            )
        )
        return reading
    for pressure in pressures:
        reading.offer(
            Finding(
                Cause.INVOLUNTARY_EVICTION,
                pressure.resource,
                make_item(
                    Source.NODE,
                    Fact.NODE_PRESSURE,
                    f"Node {node.name!r} is under {pressure.resource} pressure "
                    f"({pressure.via} {pressure.name}"
                    + (f" status {pressure.status!r}" if pressure.status else "")
                    + "): the kubelet evicts under pressure and may kill this pod before "
                    "a graceful drain ends; its event may lag.",
                    node=node.name,
                    resource=pressure.resource.value,
                    via=pressure.via,
                    name=pressure.name,
                    status=pressure.status,
                ),
            )
        )
    return reading


# --- tier 4: the owning Deployment ----------------------------------------------------


def marker_in_window(restarted_at: datetime, now: datetime, rollout_timeout: timedelta) -> bool:
    """Whether a restarted-at stamp is one the controller still honours: younger than the
    rollout timeout, and not further ahead than it (controller/decision/table.py's escape hatch,
    ``rollout-timeout``: beyond that it is not clock skew between replicas)."""
    waited = as_utc(now) - as_utc(restarted_at)
    return -rollout_timeout <= waited < rollout_timeout


def read_owner(
    evidence: Evidence,
    pod_gone: bool,
    now: datetime,
    rollout_timeout: timedelta,
) -> Reading:
    """The rollout marker; a voluntary finding only when this pod's object is gone (the API
    answered 404, or the name holds another incarnation).  The classifier's gate (events
    read whole, node read, retention) applies to it as to every voluntary reading."""
    reading = Reading()
    owner = evidence.owner
    if isinstance(owner, Unavailable):
        reading.items.append(
            make_item(
                Source.OWNER,
                Fact.OWNER_UNAVAILABLE,
                _describe_unavailable("The owning Deployment", owner),
                **_unavailable_values(owner),
            )
        )
        return reading
    if owner.deployment is None:
        reading.items.append(
            make_item(
                Source.OWNER,
                Fact.NO_OWNING_DEPLOYMENT,
                "The pod has no owning Deployment, so no graceful-drain rollout applies.",
            )
        )
        return reading
    if not owner.marker_present:
        reading.items.append(
            make_item(
                Source.OWNER,
                Fact.NO_ROLLOUT_MARKER,
                f"Deployment {owner.deployment!r} carries no graceful-drain restarted-at marker.",
                deployment=owner.deployment,
            )
        )
        return reading
    if owner.restarted_at is None or not marker_in_window(owner.restarted_at, now, rollout_timeout):
        reading.items.append(_rejected_marker_item(owner, now, rollout_timeout))
        return reading
    reading.items.append(_marker_item(owner, pod_gone))
    if pod_gone:
        reading.finding = Finding(Cause.VOLUNTARY, None, reading.items[-1])
    return reading


def _rejected_marker_item(
    owner: OwnerRollout, now: datetime, rollout_timeout: timedelta
) -> EvidenceItem:
    timeout = format_go_duration(rollout_timeout)
    if owner.restarted_at is None:
        why = "is not an RFC 3339 time"
    elif as_utc(owner.restarted_at) > as_utc(now):
        why = f"is more than the rollout timeout ({timeout}) in the future"
    else:
        why = f"is older than the rollout timeout ({timeout}): the controller no longer holds it"
    return make_item(
        Source.OWNER,
        Fact.ROLLOUT_MARKER_REJECTED,
        f"Deployment {owner.deployment!r} carries a graceful-drain restarted-at marker that "
        f"{why}; not a voluntary disruption marker.",
        deployment=owner.deployment,
        restarted_at=owner.restarted_at_raw,
        rollout_timeout=timeout,
    )


def _marker_item(owner: OwnerRollout, pod_gone: bool) -> EvidenceItem:
    detail = (
        f"graceful-drain requested a rollout of Deployment {owner.deployment!r} "
        f"(restarted-at {owner.restarted_at_raw})"
    )
    if not pod_gone:
        detail += (
            "; not consulted: the pod's own object is authoritative (or could not be read, "
            "which proves nothing)."
        )
    else:
        detail += ": a voluntary disruption marker (this pod's object is gone)."
    return make_item(
        Source.OWNER,
        Fact.ROLLOUT_MARKER,
        detail,
        deployment=owner.deployment,
        restarted_at=owner.restarted_at_raw,
    )


# --- the shape of what was read -------------------------------------------------------

# Kubernetes did not exist before this (its first commit, 2014-06-06): an earlier time is
# no record it wrote.
EARLIEST_PLAUSIBLE = datetime(2014, 6, 6, tzinfo=UTC)
# How far ahead of the detector's clock a time may be, beyond the grace period (clock skew
# between the node and the API server; a deletionTimestamp is at most the grace period
# ahead).
MAX_CLOCK_SKEW = timedelta(hours=1)


def plausible_until(now: datetime, grace_period_seconds: int) -> datetime:
    try:
        return as_utc(now) + timedelta(seconds=max(grace_period_seconds, 0)) + MAX_CLOCK_SKEW
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC)


def read_shapes(evidence: Evidence, now: datetime, grace_period_seconds: int) -> list[Finding]:
    """Every malformed field and implausible time in what was read, as shed findings in
    report order (docs/termination-detector.md, "Malformed evidence")."""
    latest = plausible_until(now, grace_period_seconds)
    found: list[Finding] = []
    signals = (
        (Source.POD, "pod", evidence.pod),
        (Source.EVENTS, "events", evidence.events),
        (Source.NODE, "node", evidence.node),
        (Source.OWNER, "owner", evidence.owner),
    )
    for source, name, snapshot in signals:
        if isinstance(snapshot, Unavailable):
            continue
        shape = snapshot.shape
        problems = list(shape.malformed)
        for path, moment in shape.times:
            utc = as_utc(moment)
            if utc < EARLIEST_PLAUSIBLE or utc > latest:
                problems.append(
                    f"{path}: implausible time {format_rfc3339_exact(moment)} (before "
                    f"Kubernetes existed, or more than the grace period and "
                    f"{format_go_duration(MAX_CLOCK_SKEW)} ahead of the clock)"
                )
        for problem in problems:
            field_path, _, what = problem.partition(": ")
            found.append(
                Finding(
                    Cause.INDETERMINATE,
                    None,
                    make_item(
                        source,
                        Fact.EVIDENCE_MALFORMED,
                        f"Evidence malformed: the {name}'s {field_path} is {what}. A damaged "
                        "read proves nothing, never reads as absent: shed load.",
                        field=f"{name}.{field_path}",
                        problem=what,
                    ),
                )
            )
    return found
