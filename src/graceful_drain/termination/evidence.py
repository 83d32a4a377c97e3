"""Typed evidence about why this pod is terminating, built from raw Kubernetes JSON.

The async collectors read four signals concurrently under one deadline and hand the
results to :func:`graceful_drain.termination.classify.classify` as an :class:`Evidence`.
Each signal is either a snapshot or :class:`Unavailable` (timed out, forbidden, not
found, other error) — unavailability is itself evidence and is reported as such.

Every ``from_object`` accepts anything ``json.loads`` can return and never raises:
fields of the wrong type read as absent.  A timestamp that cannot be parsed reads
as absent too, which for ``deletionTimestamp`` is the safe direction (an unset
deletionTimestamp can never lead to a drain verdict).  Where absent would be the unsafe
reading, malformed evidence fails closed instead (docs/termination-detector.md,
"Malformed evidence"): an events list without an ``items`` list is
:class:`Unavailable`, not "no events"; a DisruptionTarget status other than ``"True"``
or ``"False"`` is :attr:`ConditionState.UNKNOWN` ("something happened"), not absent;
a restarted-at stamp must be strict RFC 3339 to be a time at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.kube.rawjson import as_int, as_list, as_mapping, as_str, get_path
from graceful_drain.kube.timefmt import parse_rfc3339, parse_timestamp
from graceful_drain.termination.kubelet import (
    KUBELET_COMPONENT,
    PRESSURE_CONDITIONS,
    PRESSURE_TAINTS,
    STARVED_RESOURCE_ANNOTATION,
    PressuredResource,
)

DISRUPTION_TARGET = "DisruptionTarget"
OOM_KILLED_REASON = "OOMKilled"
# How much of a raw value the evidence repeats (a stamp could be 8 MiB of anything).
MAX_RAW_VALUE_CHARS = 80


class UnavailableReason(StrEnum):
    TIMEOUT = "timeout"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    ERROR = "error"


@dataclass(frozen=True)
class Unavailable:
    """A signal that could not be read in time, with the cause."""

    reason: UnavailableReason
    detail: str = ""

    def __str__(self) -> str:
        """For people: ``timeout: no answer within 2.00s`` (the dataclass repr is for code)."""
        return f"{self.reason.value}: {self.detail}" if self.detail else self.reason.value


class Trigger(StrEnum):
    """Why the classifier is being asked.

    ``sigterm``: the container received SIGTERM and must choose drain or shed now.
    ``after_restart``: a restarted container asks why its previous instance ended
    (OOM kills deliver SIGKILL, never SIGTERM, so they can only be reported this way).
    """

    SIGTERM = "sigterm"
    AFTER_RESTART = "after_restart"


# --- the pod's own object -------------------------------------------------------------


class ConditionState(StrEnum):
    """A condition's status as the API defines it (``ConditionStatus``: exactly "True",
    "False" or "Unknown").  Anything else — "Unknown", "true", a boolean, no status at
    all — is UNKNOWN: the condition is there, so something happened; what is not known."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


def raw_text(value: object) -> str | None:
    """A raw JSON value as evidence shows it: a string as is, anything else as JSON; cut to
    ``MAX_RAW_VALUE_CHARS``.  None for an absent (or null) value."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if len(text) > MAX_RAW_VALUE_CHARS:
        text = text[: MAX_RAW_VALUE_CHARS - 1] + "…"
    return text


@dataclass(frozen=True)
class DisruptionTargetCondition:
    status: str | None  # as read (raw_text): "True", "False", or what was there instead
    reason: str | None
    message: str | None
    last_transition_time: datetime | None

    @property
    def state(self) -> ConditionState:
        if self.status == ConditionState.TRUE.value:
            return ConditionState.TRUE
        if self.status == ConditionState.FALSE.value:
            return ConditionState.FALSE
        return ConditionState.UNKNOWN

    @property
    def is_true(self) -> bool:
        return self.state is ConditionState.TRUE

    @classmethod
    def from_object(cls, raw: object) -> DisruptionTargetCondition:
        return cls(
            status=raw_text(get_path(raw, "status")),
            reason=as_str(get_path(raw, "reason")),
            message=as_str(get_path(raw, "message")),
            last_transition_time=parse_timestamp(get_path(raw, "lastTransitionTime")),
        )


@dataclass(frozen=True)
class ContainerTermination:
    """A container's ``lastState.terminated``: how its previous instance ended."""

    container: str | None
    reason: str | None
    exit_code: int | None
    finished_at: datetime | None

    @property
    def oom_killed(self) -> bool:
        return self.reason == OOM_KILLED_REASON

    @classmethod
    def from_status(cls, raw: object) -> ContainerTermination | None:
        terminated = get_path(raw, "lastState", "terminated")
        if not as_mapping(terminated):
            return None
        return cls(
            container=as_str(get_path(raw, "name")),
            reason=as_str(get_path(terminated, "reason")),
            exit_code=as_int(get_path(terminated, "exitCode")),
            finished_at=parse_timestamp(get_path(terminated, "finishedAt")),
        )


@dataclass(frozen=True)
class PodSnapshot:
    uid: str | None
    name: str | None = None
    namespace: str | None = None
    node_name: str | None = None
    deletion_timestamp: datetime | None = None
    deletion_grace_period_seconds: int | None = None
    disruption_target: DisruptionTargetCondition | None = None
    phase: str | None = None
    reason: str | None = None
    message: str | None = None
    last_terminations: tuple[ContainerTermination, ...] = ()
    owner_replicaset: str | None = None

    @classmethod
    def from_object(cls, raw: object) -> PodSnapshot:
        metadata = get_path(raw, "metadata")
        status = get_path(raw, "status")
        conditions = [
            c
            for c in as_list(get_path(status, "conditions"))
            if get_path(c, "type") == DISRUPTION_TARGET
        ]
        terminations = (
            ContainerTermination.from_status(s)
            for s in as_list(get_path(status, "containerStatuses"))
        )
        return cls(
            uid=as_str(get_path(metadata, "uid")),
            name=as_str(get_path(metadata, "name")),
            namespace=as_str(get_path(metadata, "namespace")),
            node_name=as_str(get_path(raw, "spec", "nodeName")),
            # Strict: a cut or reshaped stamp ("2026-11-11T12:00") must not read as a deletion.
            deletion_timestamp=parse_rfc3339(get_path(metadata, "deletionTimestamp")),
            deletion_grace_period_seconds=as_int(get_path(metadata, "deletionGracePeriodSeconds")),
            disruption_target=(
                DisruptionTargetCondition.from_object(conditions[-1]) if conditions else None
            ),
            phase=as_str(get_path(status, "phase")),
            reason=as_str(get_path(status, "reason")),
            message=as_str(get_path(status, "message")),
            last_terminations=tuple(t for t in terminations if t is not None),
            owner_replicaset=_owner_replicaset(get_path(metadata, "ownerReferences")),
        )


def _owner_replicaset(raw: object) -> str | None:
    replicasets = [r for r in as_list(raw) if get_path(r, "kind") == "ReplicaSet"]
    controllers = [r for r in replicasets if get_path(r, "controller") is True]
    for ref in controllers + replicasets:
        name = as_str(get_path(ref, "name"))
        if name is not None:
            return name
    return None


# --- events ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EventRecord:
    """One Event, from core/v1 or events.k8s.io/v1 (the fields are unified)."""

    reason: str | None
    type: str | None = None
    source_component: str | None = None
    involved_uid: str | None = None
    involved_kind: str | None = None
    involved_name: str | None = None
    message: str | None = None
    action: str | None = None
    starved_resource: str | None = None
    first_timestamp: datetime | None = None
    last_timestamp: datetime | None = None
    event_time: datetime | None = None
    # Every component the event names as its source (source_component is the first): the
    # event is the kubelet's if any of them says so, so one damaged field cannot hide it.
    reporters: tuple[str, ...] = ()

    @property
    def from_kubelet(self) -> bool:
        return KUBELET_COMPONENT in (self.source_component, *self.reporters)

    @property
    def observed_at(self) -> datetime | None:
        return self.last_timestamp or self.event_time or self.first_timestamp

    @classmethod
    def from_object(cls, raw: object) -> EventRecord:
        involved = get_path(raw, "involvedObject")
        if not as_mapping(involved):
            involved = get_path(raw, "regarding")
        reporters = tuple(
            text
            for text in (
                as_str(get_path(raw, "source", "component")),
                as_str(get_path(raw, "reportingController")),
                as_str(get_path(raw, "deprecatedSource", "component")),
                as_str(get_path(raw, "reportingComponent")),
            )
            if text is not None
        )
        return cls(
            reason=as_str(get_path(raw, "reason")),
            type=as_str(get_path(raw, "type")),
            source_component=reporters[0] if reporters else None,
            reporters=reporters,
            involved_uid=as_str(get_path(involved, "uid")),
            involved_kind=as_str(get_path(involved, "kind")),
            involved_name=as_str(get_path(involved, "name")),
            message=_first_str(get_path(raw, "message"), get_path(raw, "note")),
            action=as_str(get_path(raw, "action")),
            starved_resource=as_str(
                get_path(raw, "metadata", "annotations", STARVED_RESOURCE_ANNOTATION)
            ),
            first_timestamp=_first_time(
                get_path(raw, "firstTimestamp"), get_path(raw, "deprecatedFirstTimestamp")
            ),
            last_timestamp=_first_time(
                get_path(raw, "series", "lastObservedTime"),
                get_path(raw, "lastTimestamp"),
                get_path(raw, "deprecatedLastTimestamp"),
            ),
            event_time=parse_timestamp(get_path(raw, "eventTime")),
        )


@dataclass(frozen=True)
class EventsSnapshot:
    """Events read for this pod (the collector filters by UID; the classifier re-checks)."""

    events: tuple[EventRecord, ...] = ()

    @classmethod
    def from_object(cls, raw: object) -> EventsSnapshot | Unavailable:
        """An EventList (``{"items": [...]}``) or a bare list of events.

        Anything else — no ``items``, ``items`` not a list, not an object at all — is
        Unavailable: a body that does not list events says nothing about which events
        exist, and reading it as "no Evicted event" would let a drain verdict through.
        """
        if isinstance(raw, list | tuple):
            items: object = raw
        else:
            items = get_path(raw, "items")
        if not isinstance(items, list | tuple):
            shape = "no items list" if items is None else f"items is a {type(items).__name__}"
            return Unavailable(
                UnavailableReason.ERROR, f"the events list answer is malformed ({shape})"
            )
        return cls(tuple(EventRecord.from_object(item) for item in items))


# --- the node -------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeCondition:
    type: str | None
    status: str | None
    reason: str | None = None
    message: str | None = None
    last_transition_time: datetime | None = None


@dataclass(frozen=True)
class NodeTaint:
    key: str | None
    effect: str | None = None
    value: str | None = None
    time_added: datetime | None = None


@dataclass(frozen=True)
class NodePressure:
    """One pressure signal on the node: a True condition or a pressure taint."""

    resource: PressuredResource
    via: str  # "condition" or "taint"
    name: str  # e.g. MemoryPressure or node.kubernetes.io/memory-pressure


@dataclass(frozen=True)
class NodeSnapshot:
    name: str | None
    conditions: tuple[NodeCondition, ...] = ()
    taints: tuple[NodeTaint, ...] = ()

    def pressures(self) -> tuple[NodePressure, ...]:
        found = [
            NodePressure(PRESSURE_CONDITIONS[c.type], "condition", c.type)
            for c in self.conditions
            if c.type is not None and c.type in PRESSURE_CONDITIONS and c.status == "True"
        ]
        found += [
            NodePressure(PRESSURE_TAINTS[t.key], "taint", t.key)
            for t in self.taints
            if t.key is not None and t.key in PRESSURE_TAINTS
        ]
        return tuple(found)

    @classmethod
    def from_object(cls, raw: object) -> NodeSnapshot:
        conditions = tuple(
            NodeCondition(
                type=as_str(get_path(c, "type")),
                status=as_str(get_path(c, "status")),
                reason=as_str(get_path(c, "reason")),
                message=as_str(get_path(c, "message")),
                last_transition_time=parse_timestamp(get_path(c, "lastTransitionTime")),
            )
            for c in as_list(get_path(raw, "status", "conditions"))
            if as_mapping(c)
        )
        taints = tuple(
            NodeTaint(
                key=as_str(get_path(t, "key")),
                effect=as_str(get_path(t, "effect")),
                value=as_str(get_path(t, "value")),
                time_added=parse_timestamp(get_path(t, "timeAdded")),
            )
            for t in as_list(get_path(raw, "spec", "taints"))
            if as_mapping(t)
        )
        return cls(as_str(get_path(raw, "metadata", "name")), conditions, taints)


# --- the owning Deployment ------------------------------------------------------------


@dataclass(frozen=True)
class OwnerRollout:
    """Whether the owning Deployment carries graceful-drain's restarted-at marker.

    ``deployment`` is None when the pod has no owning Deployment (bare pod,
    StatefulSet, DaemonSet, Job): then there can be no marker.
    """

    deployment: str | None
    restarted_at_raw: str | None = None  # as read (raw_text); None when absent
    restarted_at: datetime | None = None  # only a strict RFC 3339 stamp parses

    @property
    def marker_present(self) -> bool:
        return self.deployment is not None and self.restarted_at_raw is not None

    @classmethod
    def no_deployment(cls) -> OwnerRollout:
        return cls(None)

    @classmethod
    def from_object(cls, raw: object) -> OwnerRollout:
        """From the raw Deployment.  A present stamp is recorded as present whatever it
        holds; only a strict RFC 3339 one has a time (the classifier trusts no other)."""
        name = as_str(get_path(raw, "metadata", "name"))
        stamp = get_path(raw, "metadata", "annotations", RESTARTED_AT_ANNOTATION)
        # A Deployment whose name cannot be read is still a Deployment: "" not None.
        return cls(name or "", raw_text(stamp), parse_rfc3339(stamp))


# --- the bundle -----------------------------------------------------------------------


@dataclass(frozen=True)
class Evidence:
    """Everything the classifier may use.  ``pod_uid`` is this container's own pod UID
    (from the Downward API); None or empty means unknown, and then neither the pod
    object nor events can be attributed to this pod."""

    pod_uid: str | None
    pod: PodSnapshot | Unavailable
    events: EventsSnapshot | Unavailable
    node: NodeSnapshot | Unavailable
    owner: OwnerRollout | Unavailable
    trigger: Trigger = field(default=Trigger.SIGTERM)

    @classmethod
    def nothing_readable(
        cls,
        pod_uid: str | None,
        why: Unavailable,
        trigger: Trigger = Trigger.SIGTERM,
    ) -> Evidence:
        return cls(pod_uid, why, why, why, why, trigger)


def _first_str(*values: object) -> str | None:
    for value in values:
        text = as_str(value)
        if text is not None:
            return text
    return None


def _first_time(*values: object) -> datetime | None:
    for value in values:
        moment = parse_timestamp(value)
        if moment is not None:
            return moment
    return None
