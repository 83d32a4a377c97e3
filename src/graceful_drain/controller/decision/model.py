"""The slim, immutable views of Pods, ReplicaSets and Deployments the informer cache stores.

Each keeps only what the webhook and the reconciler decide on (a cached pod costs well under
2 KiB). `from_object` builds one from the raw JSON of the API server and never raises as long
as the object has a `metadata` mapping: a field of the wrong type is replaced by its API default
(or the value that lets evictions through, where that differs) and its path is listed in
`malformed`. Input without a `metadata` mapping raises `MalformedObject`; the informer should
skip that object.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Self

import msgspec

from graceful_drain.annotations import (
    COMPLETED_AT_ANNOTATION,
    DEFAULT_ENABLED_ANNOTATION,
    EVICTIONS_ANNOTATION,
    RESTARTED_AT_ANNOTATION,
)
from graceful_drain.controller.decision.draining import drain_signals
from graceful_drain.controller.decision.intstr import (
    ROLLING_UPDATE,
    resolve_max_surge,
    resolve_max_unavailable,
)
from graceful_drain.controller.decision.ledger import LedgerEntry, parse_ledger
from graceful_drain.kube.owners import read_controller
from graceful_drain.kube.rawjson import FieldReader, JsonObject
from graceful_drain.kube.timefmt import parse_rfc3339

DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30  # the API server's default
TEMPLATE_RESTARTED_AT_ANNOTATION = "kubectl.kubernetes.io/restartedAt"
TERMINAL_POD_PHASES = frozenset({"Succeeded", "Failed"})


class MalformedObject(ValueError):
    """The raw object is not a JSON object with a `metadata` mapping."""


class ObjectRef(msgspec.Struct, frozen=True, gc=False):
    """namespace/name. A frozen msgspec struct: the webhook builds one per decision, and a
    frozen dataclass builds much slower (bench/README.md, "Webhook, issue 14 target 1")."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def _metadata(raw: object) -> JsonObject:
    if not isinstance(raw, Mapping):
        raise MalformedObject(f"expected a JSON object, got {type(raw).__name__}")
    metadata = raw.get("metadata")
    if not isinstance(metadata, Mapping):
        raise MalformedObject("object has no metadata mapping")
    return metadata


def _shared(text: str) -> str:
    # Namespaces, node names, phases, kinds and ReplicaSet names repeat across the cached pods
    # (every pod of a ReplicaSet names it).
    return sys.intern(text)


def _is_ready(reader: FieldReader, status: JsonObject | None) -> bool:
    for index, condition in enumerate(reader.sequence(status, "conditions", "status.conditions")):
        path = f"status.conditions[{index}]"
        if not isinstance(condition, Mapping):
            reader.malformed.append(path)
            continue
        if reader.string(condition, "type", f"{path}.type") == "Ready":
            return reader.string(condition, "status", f"{path}.status") == "True"
    return False


@dataclass(frozen=True, slots=True)
class PodInfo:
    namespace: str
    name: str
    uid: str
    node_name: str
    terminating: bool  # metadata.deletionTimestamp is set
    phase: str
    ready: bool  # the Ready condition is "True"
    owner_kind: str | None  # kind of the controller ownerReference; None for a bare pod
    owner_replicaset: str | None  # its name, when that owner is an apps/v1 ReplicaSet
    malformed: tuple[str, ...] = ()
    # spec.terminationGracePeriodSeconds (None: absent or not an integer); a drain client's
    # deadline deletes the pod this long before it (controller/decision/deadline.py)
    grace_seconds: int | None = None

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.namespace, self.name)

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_POD_PHASES

    @staticmethod
    def from_listed(raw: bytes) -> tuple[tuple[str, str], PodInfo] | None:
        """A listed pod still encoded: its (namespace, name) and view exactly as `from_object`
        of its decoded JSON gives them, or None when `from_object` must decide (the informer's
        `fast_decode`: it then decodes the pod and calls `from_object`). The typed route is
        private to this module (`_usual_pod`)."""
        return _usual_pod(raw)

    @classmethod
    def from_object(cls, raw: Mapping[str, Any]) -> Self:
        metadata = _metadata(raw)
        reader = FieldReader()
        spec = reader.mapping(raw, "spec", "spec")
        status = reader.mapping(raw, "status", "status")
        owner = read_controller(reader, metadata)
        is_replicaset = owner is not None and owner.is_a("apps/v1", "ReplicaSet")
        return cls(
            namespace=_shared(reader.string(metadata, "namespace", "metadata.namespace")),
            name=reader.string(metadata, "name", "metadata.name"),
            uid=reader.string(metadata, "uid", "metadata.uid"),
            node_name=_shared(reader.string(spec, "nodeName", "spec.nodeName")),
            terminating=FieldReader.is_set(metadata, "deletionTimestamp"),
            phase=_shared(reader.string(status, "phase", "status.phase")),
            ready=_is_ready(reader, status),
            owner_kind=None if owner is None else _shared(owner.kind),
            owner_replicaset=_shared(owner.name) if owner is not None and is_replicaset else None,
            malformed=tuple(reader.malformed),
            grace_seconds=_whole_seconds((spec or {}).get("terminationGracePeriodSeconds")),
        )


def _whole_seconds(value: object) -> int | None:
    """A non-negative integer of seconds as the API server writes it, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


@dataclass(frozen=True, slots=True)
class ReplicaSetInfo:
    namespace: str
    name: str
    uid: str
    owner_deployment: str | None  # name of the controller ownerReference if an apps/v1 Deployment
    malformed: tuple[str, ...] = ()

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.namespace, self.name)

    @classmethod
    def from_object(cls, raw: Mapping[str, Any]) -> Self:
        metadata = _metadata(raw)
        reader = FieldReader()
        owner = read_controller(reader, metadata)
        is_deployment = owner is not None and owner.is_a("apps/v1", "Deployment")
        return cls(
            namespace=_shared(reader.string(metadata, "namespace", "metadata.namespace")),
            name=reader.string(metadata, "name", "metadata.name"),
            uid=reader.string(metadata, "uid", "metadata.uid"),
            owner_deployment=owner.name if owner is not None and is_deployment else None,
            malformed=tuple(reader.malformed),
        )


def _strategy(
    reader: FieldReader, spec: JsonObject | None, replicas: int | None
) -> tuple[str, int, int]:
    """(strategy type, resolved maxSurge, resolved maxUnavailable). A malformed strategy
    resolves to no surge at all, as upstream fails to decode such an object: the eviction is
    then let through."""
    strategy = reader.mapping(spec, "strategy", "spec.strategy")
    strategy_type = reader.optional_string(strategy, "type", "spec.strategy.type")
    if strategy_type is None and FieldReader.is_set(strategy, "type"):
        return "", 0, 0
    strategy_type = strategy_type or ROLLING_UPDATE  # SetDefaults_Deployment
    rolling = reader.mapping(strategy, "rollingUpdate", "spec.strategy.rollingUpdate")
    if rolling is None and FieldReader.is_set(strategy, "rollingUpdate"):
        return strategy_type, 0, 0
    if replicas is None:
        return strategy_type, 0, 0
    surge, unavailable = reader.raw(rolling, "maxSurge"), reader.raw(rolling, "maxUnavailable")
    return (
        strategy_type,
        resolve_max_surge(strategy_type, surge, unavailable, replicas),
        resolve_max_unavailable(strategy_type, surge, unavailable, replicas),
    )


class Enablement(StrEnum):
    """What a Deployment's enabled annotation says (docs/decisions.md: `Reason.OPTED_OUT`,
    `Reason.NOT_ENABLED`, `Reason.ENABLED_ANNOTATION_INVALID`)."""

    ABSENT = "absent"
    ON = "true"
    OFF = "false"
    INVALID = "invalid"  # any other value: a Warning event, and treated as disabled


# The annotation's values that say something (absent: None); any other is INVALID. A table
# rather than comparisons: the webhook reads a Deployment's enablement on every admission.
_ENABLEMENTS: dict[str | None, Enablement] = {
    None: Enablement.ABSENT,
    "true": Enablement.ON,
    "false": Enablement.OFF,
}


def parse_enablement(value: str | None) -> Enablement:
    found = _ENABLEMENTS.get(value)
    return Enablement.INVALID if found is None else found


@dataclass(frozen=True, slots=True)
class DeploymentInfo:
    namespace: str
    name: str
    uid: str
    resource_version: str
    generation: int
    deleting: bool  # metadata.deletionTimestamp is set
    has_annotations: bool  # metadata.annotations is a (possibly empty) map: shapes the patch
    replicas: int | None  # spec.replicas, 1 when absent; None when malformed
    strategy_type: str  # "RollingUpdate" when absent, "" when malformed
    max_surge: int  # resolved for `replicas` as upstream MaxSurge does; 0 unless RollingUpdate
    paused: bool
    observed_generation: int
    status_replicas: int
    updated_replicas: int
    ready_replicas: int
    available_replicas: int
    restarted_at: datetime | None  # graceful-drain.stonal.com/restarted-at, aware UTC
    restarted_at_raw: str | None  # the annotation exactly as stored, even when malformed
    template_restarted_at: str | None  # spec.template annotation kubectl.kubernetes.io/restartedAt
    malformed: tuple[str, ...] = ()
    # spec.template.metadata.annotations is a (possibly empty) map: shapes the reconciler's patch
    template_has_annotations: bool = True
    max_unavailable: int = 0  # resolved as upstream MaxUnavailable does; 0 unless RollingUpdate
    enabled_value: str | None = None  # the enabled annotation's value (see Enablement)
    completed_at_raw: str | None = None  # graceful-drain.stonal.com/completed-at
    template_grace_period_seconds: int = DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS
    # The evictions ledger (ledger.py), oldest first as written
    evictions: tuple[LedgerEntry, ...] = ()

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.namespace, self.name)

    @property
    def ref_key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def enablement(self) -> Enablement:
        return parse_enablement(self.enabled_value)

    @property
    def completed_at(self) -> datetime | None:
        return None if self.completed_at_raw is None else parse_rfc3339(self.completed_at_raw)

    @property
    def rollout_started(self) -> bool:
        """restarted-at is set and the pod template carries it: our rollout was started."""
        return self.restarted_at_raw is not None and self.template_restarted_at == (
            self.restarted_at_raw
        )

    @property
    def drain_finished(self) -> bool:
        """The rollout restarted-at asked for has completed; the stamp only remains as the
        detector's evidence until the old pod's grace period is over."""
        return self.rollout_started and (self.completed_at_raw is not None or self.rollout_complete)

    @property
    def restarted_at_malformed(self) -> bool:
        return self.restarted_at_raw is not None and self.restarted_at is None

    @property
    def rollout_complete(self) -> bool:
        """The controller has observed the latest spec and every replica is updated and ready."""
        return (
            self.replicas is not None
            and self.observed_generation >= self.generation
            and self.updated_replicas == self.replicas
            and self.ready_replicas == self.replicas
            and self.available_replicas == self.replicas
            and self.status_replicas == self.replicas
        )

    @classmethod
    def from_object(cls, raw: Mapping[str, Any], *, enabled_annotation: str | None = None) -> Self:
        metadata = _metadata(raw)
        reader = FieldReader()
        annotations = reader.mapping(metadata, "annotations", "metadata.annotations")
        spec = reader.mapping(raw, "spec", "spec")
        status = reader.mapping(raw, "status", "status")

        replicas: int | None = 1
        if FieldReader.is_set(spec, "replicas"):
            replicas = reader.optional_integer(spec, "replicas", "spec.replicas")

        strategy_type, max_surge, max_unavailable = _strategy(reader, spec, replicas)

        restarted_at_raw, restarted_at = _restarted_at(reader, annotations)
        template_annotations, grace = _template(reader, spec)
        enabled_key = enabled_annotation or DEFAULT_ENABLED_ANNOTATION
        evictions = _ledger(reader, annotations)

        return cls(
            namespace=_shared(reader.string(metadata, "namespace", "metadata.namespace")),
            name=reader.string(metadata, "name", "metadata.name"),
            uid=reader.string(metadata, "uid", "metadata.uid"),
            resource_version=reader.string(metadata, "resourceVersion", "metadata.resourceVersion"),
            generation=reader.integer(metadata, "generation", "metadata.generation"),
            deleting=FieldReader.is_set(metadata, "deletionTimestamp"),
            has_annotations=annotations is not None,
            replicas=replicas,
            strategy_type=strategy_type,
            max_surge=max_surge,
            paused=reader.boolean(spec, "paused", "spec.paused"),
            observed_generation=reader.integer(
                status, "observedGeneration", "status.observedGeneration"
            ),
            status_replicas=reader.integer(status, "replicas", "status.replicas"),
            updated_replicas=reader.integer(status, "updatedReplicas", "status.updatedReplicas"),
            ready_replicas=reader.integer(status, "readyReplicas", "status.readyReplicas"),
            available_replicas=reader.integer(
                status, "availableReplicas", "status.availableReplicas"
            ),
            restarted_at=restarted_at,
            restarted_at_raw=restarted_at_raw,
            template_restarted_at=reader.optional_string(
                template_annotations,
                TEMPLATE_RESTARTED_AT_ANNOTATION,
                f"spec.template.metadata.annotations[{TEMPLATE_RESTARTED_AT_ANNOTATION}]",
            ),
            template_has_annotations=template_annotations is not None,
            max_unavailable=max_unavailable,
            enabled_value=reader.optional_string(
                annotations, enabled_key, f"metadata.annotations[{enabled_key}]"
            ),
            completed_at_raw=reader.optional_string(
                annotations,
                COMPLETED_AT_ANNOTATION,
                f"metadata.annotations[{COMPLETED_AT_ANNOTATION}]",
            ),
            template_grace_period_seconds=grace,
            evictions=evictions,
            malformed=tuple(reader.malformed),
        )


def _restarted_at(
    reader: FieldReader, annotations: JsonObject | None
) -> tuple[str | None, datetime | None]:
    """The restarted-at stamp as written, and as a time (None, recorded malformed, if it is
    not RFC 3339)."""
    path = f"metadata.annotations[{RESTARTED_AT_ANNOTATION}]"
    raw = reader.optional_string(annotations, RESTARTED_AT_ANNOTATION, path)
    restarted_at = None if raw is None else parse_rfc3339(raw)
    if raw is not None and restarted_at is None:
        reader.malformed.append(path)
    return raw, restarted_at


def _template(reader: FieldReader, spec: JsonObject | None) -> tuple[JsonObject | None, int]:
    """The pod template's annotations, and its terminationGracePeriodSeconds (the API
    server's default when absent or negative)."""
    template = reader.mapping(spec, "template", "spec.template")
    template_meta = reader.mapping(template, "metadata", "spec.template.metadata")
    annotations = reader.mapping(template_meta, "annotations", "spec.template.metadata.annotations")
    template_spec = reader.mapping(template, "spec", "spec.template.spec")
    grace = reader.optional_integer(
        template_spec,
        "terminationGracePeriodSeconds",
        "spec.template.spec.terminationGracePeriodSeconds",
    )
    if grace is None or grace < 0:
        return annotations, DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS
    return annotations, grace


def _ledger(reader: FieldReader, annotations: JsonObject | None) -> tuple[LedgerEntry, ...]:
    """The evictions ledger (ledger.py); a malformed one reads as empty, recorded."""
    path = f"metadata.annotations[{EVICTIONS_ANNOTATION}]"
    evictions, malformed = parse_ledger(
        reader.optional_string(annotations, EVICTIONS_ANNOTATION, path)
    )
    if malformed:
        reader.malformed.append(path)
    return evictions


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A Node as the cache keeps it: its name and the signals saying it is being drained
    (controller/decision/draining.py, the one definition)."""

    name: str
    drain_signals: tuple[str, ...] = ()

    @property
    def being_drained(self) -> bool:
        return bool(self.drain_signals)

    @classmethod
    def from_object(cls, raw: Mapping[str, Any]) -> Self:
        metadata = _metadata(raw)
        name = metadata.get("name")
        return cls(name=name if isinstance(name, str) else "", drain_signals=drain_signals(raw))


# --- PodInfo.from_listed's typed route -------------------------------------------------------


class _OwnerReference(msgspec.Struct):
    api_version: str | None = msgspec.field(name="apiVersion", default=None)
    kind: str | None = None
    name: str | None = None
    controller: bool | None = None


class _Metadata(msgspec.Struct):
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    deletion_timestamp: Any = msgspec.field(name="deletionTimestamp", default=None)
    owner_references: list[_OwnerReference] | None = msgspec.field(
        name="ownerReferences", default=None
    )


class _Spec(msgspec.Struct):
    node_name: str | None = msgspec.field(name="nodeName", default=None)
    grace: Any = msgspec.field(name="terminationGracePeriodSeconds", default=None)


class _Condition(msgspec.Struct):
    type: str | None = None
    status: str | None = None


class _Status(msgspec.Struct):
    phase: str | None = None
    conditions: list[_Condition] | None = None


class _Pod(msgspec.Struct):
    metadata: _Metadata
    spec: _Spec | None = None
    status: _Status | None = None


_pod_decoder = msgspec.json.Decoder(_Pod)


def _usual_pod(raw: bytes) -> tuple[tuple[str, str], PodInfo] | None:
    """The typed route of `PodInfo.from_listed`: msgspec decodes the pod into structs that
    declare only the fields `PodInfo` keeps (everything else is skipped, not built), and the
    view is returned only when every declared field has its expected type. Anything else (a
    decode or type error, a missing name) is None: `from_object`, the tolerant route, decides
    and records what was malformed. So the two agree on every pod this one accepts
    (tests/unit/controller/test_listed_pod_decode.py compares them on generated pods);
    bench/README.md has what it saves."""
    try:
        pod = _pod_decoder.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    metadata = pod.metadata
    name = metadata.name
    if not name:
        return None
    namespace = _shared(metadata.namespace or "")
    owner_kind: str | None = None
    owner_replicaset: str | None = None
    # kube/owners.py's rule (`read_controller`, which from_object reads with), on the typed
    # references: the first whose controller is true.
    for ref in metadata.owner_references or ():
        if ref.controller:
            kind = ref.kind or ""
            owner_kind = _shared(kind)
            if ref.api_version == "apps/v1" and kind == "ReplicaSet" and ref.name:
                owner_replicaset = _shared(ref.name)
            break
    status = pod.status
    phase, ready = "", False
    if status is not None:
        phase = status.phase or ""
        for condition in status.conditions or ():
            if condition.type == "Ready":
                ready = condition.status == "True"
                break
    node_name = "" if pod.spec is None else pod.spec.node_name or ""
    grace = None if pod.spec is None else pod.spec.grace
    info = PodInfo(
        namespace=namespace,
        name=name,
        uid=metadata.uid or "",
        node_name=_shared(node_name),
        terminating=metadata.deletion_timestamp is not None,
        phase=_shared(phase),
        ready=ready,
        owner_kind=owner_kind,
        owner_replicaset=owner_replicaset,
        grace_seconds=grace if type(grace) is int and grace >= 0 else None,
    )
    return (namespace, name), info
