"""Typed evidence about why this pod is terminating, built from raw Kubernetes JSON.

The async collectors read four signals concurrently under one deadline and hand the
results to :func:`graceful_drain.termination.classify.classify` as an :class:`Evidence`.
Each signal is either a snapshot or :class:`Unavailable` (timed out, forbidden, not
found, other error) — unavailability is itself evidence and is reported as such.

Every ``from_object`` accepts anything ``json.loads`` can return and never raises, and
fails closed on shape (docs/termination-detector.md, "Malformed evidence"): a field of
the wrong type, a list item that is not an object, a key that the API server always
sets but that is missing, or a timestamp that is not strict RFC 3339 is recorded by
its path in the snapshot's ``malformed`` (as ``"<path>: <problem>"``), and the
classifier then sheds load naming it, never reads it as absent.  Every timestamp read
is kept with its path in ``times``, so that the classifier can reject implausible ones
(the year 3000) against its own clock.  A DisruptionTarget status other than
``"True"`` or ``"False"`` is :attr:`ConditionState.UNKNOWN` ("something happened").

The records are typed ``NamedTuple``s, immutable as frozen dataclasses are: a frozen
dataclass compiles six methods when its module loads, and the detector starts inside a pod's
grace period (bench/README.md, "the detector's records and its kubeconfig").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.kube.owners import controller_name
from graceful_drain.kube.rawjson import FieldReader, JsonObject, as_list
from graceful_drain.kube.timefmt import parse_rfc3339
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


class Unavailable(NamedTuple):
    """A signal that could not be read in time, with the cause."""

    reason: UnavailableReason
    detail: str = ""

    def __str__(self) -> str:
        """For people: ``timeout: no answer within 2.00s`` (the repr is for code)."""
        return f"{self.reason.value}: {self.detail}" if self.detail else self.reason.value


class Trigger(StrEnum):
    """Why the classifier is being asked.

    ``sigterm``: the container received SIGTERM and must choose drain or shed now.
    ``after_restart``: a restarted container asks why its previous instance ended
    (OOM kills deliver SIGKILL, never SIGTERM, so they can only be reported this way).
    """

    SIGTERM = "sigterm"
    AFTER_RESTART = "after_restart"


# --- reading raw JSON strictly -------------------------------------------------------


class ShapeReader(FieldReader):
    """kube.rawjson's FieldReader, failing closed: every problem is kept as
    ``"<path>: <problem>"`` (wrong type, missing where the API server always sets the key,
    a list item that is not an object, a timestamp that is not strict RFC 3339), and every
    timestamp read is kept with its path for the classifier's plausibility check."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[tuple[str, datetime]] = []

    def _wrong(self, path: str) -> None:
        self.malformed.append(f"{path}: of the wrong type")

    def problem(self, path: str, problem: str) -> None:
        self.malformed.append(f"{path}: {problem}")

    def root(self, raw: object, what: str) -> JsonObject | None:
        if isinstance(raw, Mapping):
            return raw
        self.problem(what, f"not an object ({type(raw).__name__})")
        return None

    def obj(
        self, parent: JsonObject | None, key: str, path: str, *, required: bool = False
    ) -> JsonObject | None:
        value = self.mapping(parent, key, path)
        if value is None and required and not self.is_set(parent, key):
            self.problem(path, "missing")
        return value

    def objects(
        self, parent: JsonObject | None, key: str, path: str, *, required: bool = False
    ) -> list[tuple[str, JsonObject]]:
        """The list's items with their paths; an item that is not an object is malformed."""
        if required and not self.is_set(parent, key):
            self.problem(path, "missing")
        found: list[tuple[str, JsonObject]] = []
        for index, item in enumerate(self.sequence(parent, key, path)):
            if isinstance(item, Mapping):
                found.append((f"{path}[{index}]", item))
            else:
                self.problem(f"{path}[{index}]", f"not an object ({type(item).__name__})")
        return found

    def text(
        self, parent: JsonObject | None, key: str, path: str, *, required: bool = False
    ) -> str | None:
        """A non-empty string; "" reads as absent (the API server omits empty strings)."""
        value = self.optional_string(parent, key, path)
        if required and not value and (value is not None or not self.is_set(parent, key)):
            self.problem(path, "missing")
        return value or None

    def integer_or_none(self, parent: JsonObject | None, key: str, path: str) -> int | None:
        return self.optional_integer(parent, key, path)

    def time(self, parent: JsonObject | None, key: str, path: str) -> datetime | None:
        value = None if parent is None else parent.get(key)
        if value is None:
            return None
        moment = parse_rfc3339(value)
        if moment is None:
            if isinstance(value, str):
                self.problem(path, f"not an RFC 3339 time ({raw_text(value)!r})")
            else:
                self._wrong(path)
            return None
        self.times.append((path, moment))
        return moment


class Shape(NamedTuple):
    """What a strict read found wrong (``"<path>: <problem>"``), and every time it read."""

    malformed: tuple[str, ...] = ()
    times: tuple[tuple[str, datetime], ...] = ()

    @classmethod
    def of(cls, reader: ShapeReader) -> Shape:
        return cls(tuple(reader.malformed), tuple(reader.times))


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


class DisruptionTargetCondition(NamedTuple):
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
    def read(cls, reader: ShapeReader, raw: JsonObject, path: str) -> DisruptionTargetCondition:
        status = raw.get("status")
        if status is None:
            reader.problem(f"{path}.status", "missing")
        elif not isinstance(status, str):
            reader.problem(f"{path}.status", "of the wrong type")
        # Every writer of DisruptionTarget (the Eviction API, the scheduler, the taint
        # manager, PodGC, the kubelet) sets its reason and message.
        return cls(
            status=raw_text(status),
            reason=reader.text(raw, "reason", f"{path}.reason", required=True),
            message=reader.text(raw, "message", f"{path}.message", required=True),
            last_transition_time=reader.time(
                raw, "lastTransitionTime", f"{path}.lastTransitionTime"
            ),
        )


class ContainerTermination(NamedTuple):
    """A container's ``lastState.terminated``: how its previous instance ended."""

    container: str | None
    reason: str | None
    exit_code: int | None
    finished_at: datetime | None

    @property
    def oom_killed(self) -> bool:
        return self.reason == OOM_KILLED_REASON

    @classmethod
    def read(cls, reader: ShapeReader, raw: JsonObject, path: str) -> ContainerTermination | None:
        last = reader.obj(raw, "lastState", f"{path}.lastState")
        terminated = reader.obj(last, "terminated", f"{path}.lastState.terminated")
        name = reader.text(raw, "name", f"{path}.name", required=True)
        if terminated is None:
            return None
        where = f"{path}.lastState.terminated"
        return cls(
            container=name,
            reason=reader.text(terminated, "reason", f"{where}.reason"),
            exit_code=reader.integer_or_none(terminated, "exitCode", f"{where}.exitCode"),
            finished_at=reader.time(terminated, "finishedAt", f"{where}.finishedAt"),
        )


class PodSnapshot(NamedTuple):
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
    shape: Shape = Shape()

    @classmethod
    def from_object(cls, raw: object) -> PodSnapshot:
        reader = ShapeReader()
        pod = reader.root(raw, "(the pod)")
        metadata = reader.obj(pod, "metadata", "metadata", required=True)
        spec = reader.obj(pod, "spec", "spec", required=True)
        status = reader.obj(pod, "status", "status", required=True)
        target: DisruptionTargetCondition | None = None
        # A scheduled pod always has conditions (PodScheduled at least).
        conditions = reader.objects(status, "conditions", "status.conditions", required=True)
        for path, condition in conditions:
            kind = reader.text(condition, "type", f"{path}.type", required=True)
            if kind == DISRUPTION_TARGET:
                target = DisruptionTargetCondition.read(reader, condition, path)
            else:
                reader.text(condition, "status", f"{path}.status", required=True)
        terminations = [
            ContainerTermination.read(reader, item, path)
            for path, item in reader.objects(
                status, "containerStatuses", "status.containerStatuses"
            )
        ]
        return cls(
            uid=reader.text(metadata, "uid", "metadata.uid", required=True),
            name=reader.text(metadata, "name", "metadata.name", required=True),
            namespace=reader.text(metadata, "namespace", "metadata.namespace", required=True),
            node_name=reader.text(spec, "nodeName", "spec.nodeName"),
            deletion_timestamp=reader.time(
                metadata, "deletionTimestamp", "metadata.deletionTimestamp"
            ),
            deletion_grace_period_seconds=reader.integer_or_none(
                metadata, "deletionGracePeriodSeconds", "metadata.deletionGracePeriodSeconds"
            ),
            disruption_target=target,
            phase=reader.text(status, "phase", "status.phase"),
            reason=reader.text(status, "reason", "status.reason"),
            message=reader.text(status, "message", "status.message"),
            last_terminations=tuple(t for t in terminations if t is not None),
            owner_replicaset=_owner_replicaset(reader, pod, metadata),
            shape=Shape.of(reader),
        )


def _owner_replicaset(
    reader: ShapeReader, pod: JsonObject | None, metadata: JsonObject | None
) -> str | None:
    """The pod's ReplicaSet by kube/owners.py's rule (its controller, if a ReplicaSet: the
    owner chain the detector follows, signals.py). Each reference's shape is checked as every
    field evidence reads is: an object, with its kind and name."""
    for path, ref in reader.objects(metadata, "ownerReferences", "metadata.ownerReferences"):
        reader.text(ref, "kind", f"{path}.kind", required=True)
        reader.text(ref, "name", f"{path}.name", required=True)
        reader.boolean(ref, "controller", f"{path}.controller")
    return controller_name(pod, "ReplicaSet")


# --- events ---------------------------------------------------------------------------


class EventRecord(NamedTuple):
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
    # Every component the event names as its source (source_component is the first).
    reporters: tuple[str, ...] = ()

    @property
    def from_kubelet(self) -> bool:
        """Whether any source the event names is the kubelet, whatever its case."""
        return KUBELET_COMPONENT in (
            r.lower() for r in (self.source_component, *self.reporters) if r
        )

    @property
    def observed_at(self) -> datetime | None:
        return self.last_timestamp or self.event_time or self.first_timestamp

    @classmethod
    def from_object(cls, raw: object) -> EventRecord:
        return cls.read(ShapeReader(), raw, "(the event)")

    @classmethod
    def read(cls, reader: ShapeReader, raw: object, path: str) -> EventRecord:
        event = reader.root(raw, path)
        core = event is not None and "involvedObject" in event
        involved = reader.obj(
            event,
            "involvedObject" if core else "regarding",
            f"{path}.{'involvedObject' if core else 'regarding'}",
            required=True,
        )
        where = f"{path}.{'involvedObject' if core else 'regarding'}"
        source = reader.obj(event, "source", f"{path}.source")
        deprecated = reader.obj(event, "deprecatedSource", f"{path}.deprecatedSource")
        reporters = tuple(
            text
            for text in (
                reader.text(source, "component", f"{path}.source.component"),
                reader.text(event, "reportingController", f"{path}.reportingController"),
                reader.text(deprecated, "component", f"{path}.deprecatedSource.component"),
                reader.text(event, "reportingComponent", f"{path}.reportingComponent"),
            )
            if text is not None
        )
        metadata = reader.obj(event, "metadata", f"{path}.metadata")
        annotations = reader.obj(metadata, "annotations", f"{path}.metadata.annotations")
        series = reader.obj(event, "series", f"{path}.series")
        times = {
            key: reader.time(parent, key, f"{path}.{prefix}{key}")
            for parent, prefix, key in (
                (event, "", "firstTimestamp"),
                (event, "", "deprecatedFirstTimestamp"),
                (series, "series.", "lastObservedTime"),
                (event, "", "lastTimestamp"),
                (event, "", "deprecatedLastTimestamp"),
                (event, "", "eventTime"),
            )
        }
        return cls(
            reason=reader.text(event, "reason", f"{path}.reason", required=True),
            type=reader.text(event, "type", f"{path}.type"),
            source_component=reporters[0] if reporters else None,
            reporters=reporters,
            involved_uid=reader.text(involved, "uid", f"{where}.uid", required=True),
            involved_kind=reader.text(involved, "kind", f"{where}.kind"),
            involved_name=reader.text(involved, "name", f"{where}.name"),
            message=reader.text(event, "message", f"{path}.message")
            or reader.text(event, "note", f"{path}.note"),
            action=reader.text(event, "action", f"{path}.action"),
            starved_resource=reader.text(
                annotations,
                STARVED_RESOURCE_ANNOTATION,
                f"{path}.metadata.annotations.{STARVED_RESOURCE_ANNOTATION}",
            ),
            first_timestamp=times["firstTimestamp"] or times["deprecatedFirstTimestamp"],
            last_timestamp=times["lastObservedTime"]
            or times["lastTimestamp"]
            or times["deprecatedLastTimestamp"],
            event_time=times["eventTime"],
        )


class EventsSnapshot(NamedTuple):
    """Events read for this pod (the collector filters by UID; the classifier re-checks)."""

    events: tuple[EventRecord, ...] = ()
    shape: Shape = Shape()

    @classmethod
    def from_object(cls, raw: object) -> EventsSnapshot:
        """An EventList (``{"items": [...]}``) or a bare list of events.

        Anything else — no ``items``, ``items`` not a list, not an object at all, an item
        that is not an object — is malformed: a body that does not list events whole says
        nothing about which events exist, and reading it as "no Evicted event" would let a
        drain verdict through.
        """
        reader = ShapeReader()
        if isinstance(raw, list | tuple):
            listed: list[tuple[str, object]] = [(f"[{i}]", item) for i, item in enumerate(raw)]
        else:
            body = reader.root(raw, "(the events list)")
            items = None if body is None else body.get("items")
            if body is not None and not isinstance(items, list | tuple):
                reader.problem("items", "missing" if items is None else "of the wrong type")
            listed = [(f"items[{i}]", item) for i, item in enumerate(as_list(items))]
        events = tuple(
            EventRecord.read(reader, item, path)
            for path, item in listed
            if reader.root(item, path) is not None  # a non-object item is malformed, not read
        )
        return cls(events, Shape.of(reader))


# --- the node -------------------------------------------------------------------------


class NodeCondition(NamedTuple):
    type: str | None
    status: str | None
    reason: str | None = None
    message: str | None = None
    last_transition_time: datetime | None = None


class NodeTaint(NamedTuple):
    key: str | None
    effect: str | None = None
    value: str | None = None
    time_added: datetime | None = None


class NodePressure(NamedTuple):
    """One pressure signal on the node: a pressure condition not "False", or a taint."""

    resource: PressuredResource
    via: str  # "condition" or "taint"
    name: str  # e.g. MemoryPressure or node.kubernetes.io/memory-pressure
    status: str | None = None  # the condition's status ("True", "Unknown", ...)


class NodeSnapshot(NamedTuple):
    name: str | None
    conditions: tuple[NodeCondition, ...] = ()
    taints: tuple[NodeTaint, ...] = ()
    shape: Shape = Shape()

    def pressures(self) -> tuple[NodePressure, ...]:
        """Pressure conditions whose status is anything but "False" (True, Unknown, or a
        value the API does not define: not known to be unpressured), and pressure taints."""
        found = [
            NodePressure(PRESSURE_CONDITIONS[c.type], "condition", c.type, c.status)
            for c in self.conditions
            if c.type is not None and c.type in PRESSURE_CONDITIONS and c.status != "False"
        ]
        found += [
            NodePressure(PRESSURE_TAINTS[t.key], "taint", t.key)
            for t in self.taints
            if t.key is not None and t.key in PRESSURE_TAINTS
        ]
        return tuple(found)

    @classmethod
    def from_object(cls, raw: object) -> NodeSnapshot:
        reader = ShapeReader()
        node = reader.root(raw, "(the node)")
        metadata = reader.obj(node, "metadata", "metadata", required=True)
        spec = reader.obj(node, "spec", "spec", required=True)  # a struct: always written
        status = reader.obj(node, "status", "status", required=True)
        conditions = tuple(
            NodeCondition(
                type=reader.text(c, "type", f"{path}.type", required=True),
                status=reader.text(c, "status", f"{path}.status", required=True),
                reason=reader.text(c, "reason", f"{path}.reason"),
                message=reader.text(c, "message", f"{path}.message"),
                last_transition_time=reader.time(
                    c, "lastTransitionTime", f"{path}.lastTransitionTime"
                ),
            )
            for path, c in reader.objects(status, "conditions", "status.conditions", required=True)
        )
        taints = tuple(
            NodeTaint(
                key=reader.text(t, "key", f"{path}.key", required=True),
                effect=reader.text(t, "effect", f"{path}.effect"),
                value=reader.text(t, "value", f"{path}.value"),
                time_added=reader.time(t, "timeAdded", f"{path}.timeAdded"),
            )
            for path, t in reader.objects(spec, "taints", "spec.taints")
        )
        name = reader.text(metadata, "name", "metadata.name", required=True)
        return cls(name, conditions, taints, Shape.of(reader))


# --- the owning Deployment ------------------------------------------------------------


class OwnerRollout(NamedTuple):
    """Whether the owning Deployment carries graceful-drain's restarted-at marker.

    ``deployment`` is None when the pod has no owning Deployment (bare pod,
    StatefulSet, DaemonSet, Job): then there can be no marker.
    """

    deployment: str | None
    restarted_at_raw: str | None = None  # as read (raw_text); None when absent
    restarted_at: datetime | None = None  # only a strict RFC 3339 stamp parses
    shape: Shape = Shape()

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
        reader = ShapeReader()
        deployment = reader.root(raw, "(the deployment)")
        metadata = reader.obj(deployment, "metadata", "metadata", required=True)
        name = reader.text(metadata, "name", "metadata.name", required=True)
        annotations = reader.obj(metadata, "annotations", "metadata.annotations")
        stamp = None if annotations is None else annotations.get(RESTARTED_AT_ANNOTATION)
        # A Deployment whose name cannot be read is still a Deployment: "" not None.
        return cls(name or "", raw_text(stamp), parse_rfc3339(stamp), Shape.of(reader))


# --- the bundle -----------------------------------------------------------------------


class Evidence(NamedTuple):
    """Everything the classifier may use.  ``pod_uid`` is this container's own pod UID
    (from the Downward API); None or empty means unknown, and then neither the pod
    object nor events can be attributed to this pod."""

    pod_uid: str | None
    pod: PodSnapshot | Unavailable
    events: EventsSnapshot | Unavailable
    node: NodeSnapshot | Unavailable
    owner: OwnerRollout | Unavailable
    trigger: Trigger = Trigger.SIGTERM

    @classmethod
    def nothing_readable(
        cls,
        pod_uid: str | None,
        why: Unavailable,
        trigger: Trigger = Trigger.SIGTERM,
    ) -> Evidence:
        return cls(pod_uid, why, why, why, why, trigger)
