"""`graceful-drain status`, the pure part: whether the webhook protects evictions at all, the
Deployments graceful-drain holds evictions for and their replacement pods, the drains that
have finished (their stamp kept as the detector's evidence), the pods each Deployment's
evictions ledger counts as gone (decision/ledger.py), recent GracefulDrainTimeout events,
recent writes to Deployments that failed (GracefulDrainWriteDeferred: a drain held while the
API server refuses the controller's write for now; GracefulDrainWriteFailed: allowed
without it) and the leader Lease.

For each held Deployment the webhook's answer right now comes from `decide_eviction` (the
function the webhook decides through) for its pod on the node being drained, so the waited
time and the message are the ones a drain is being told. Its replacements are the pods its
rollout made (their template carries the stamp); the old pod being evicted is not one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.controller.decision.deadline import PodDeadline, pod_deadline, with_deadline
from graceful_drain.controller.decision.ledger import ENTRY_LIFETIME, gone_uids
from graceful_drain.controller.decision.lookups import (
    PodFound,
    ready_besides_among,
    ready_elsewhere_among,
)
from graceful_drain.controller.decision.model import (
    TEMPLATE_RESTARTED_AT_ANNOTATION,
    DeploymentInfo,
    PodInfo,
    ReplicaSetInfo,
)
from graceful_drain.controller.decision.reasons import Decision
from graceful_drain.controller.decision.table import DecisionConfig, decide_eviction
from graceful_drain.inspection.plan import eviction_request
from graceful_drain.inspection.webhook_health import WebhookHealth
from graceful_drain.kube.timefmt import parse_rfc3339

JsonDict = Mapping[str, Any]
RECENT_TIMEOUTS = 20
EXIT_HEALTHY = 0
EXIT_DEGRADED = 1


@dataclass(frozen=True, slots=True)
class LeaderState:
    lease: str  # namespace/name
    present: bool
    holder: str
    renewed_at: datetime | None
    duration: timedelta | None

    def held(self, now: datetime) -> bool:
        if not self.holder or self.renewed_at is None or self.duration is None:
            return False
        return now < self.renewed_at + self.duration

    @classmethod
    def of(cls, lease: JsonDict | None, ref: str) -> LeaderState:
        if lease is None:
            return cls(ref, False, "", None, None)
        spec = lease.get("spec") or {}
        seconds = spec.get("leaseDurationSeconds")
        return cls(
            lease=ref,
            present=True,
            holder=str(spec.get("holderIdentity") or ""),
            renewed_at=parse_rfc3339(str(spec.get("renewTime") or "")),
            duration=None if seconds is None else timedelta(seconds=int(seconds)),
        )


@dataclass(frozen=True, slots=True)
class Replacement:
    """A pod the drain's rollout made, and why it is not serving yet."""

    name: str
    phase: str
    node: str | None  # None: not scheduled
    ready: bool
    reason: str | None  # PodScheduled=False's reason (e.g. Unschedulable), when not scheduled
    message: str | None  # ... and its message (e.g. "0/3 nodes are available: ...")

    @classmethod
    def of(cls, pod: JsonDict) -> Replacement:
        status = pod.get("status") or {}
        reason = message = None
        for condition in status.get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") != "True":
                reason = str(condition.get("reason") or "") or None
                message = str(condition.get("message") or "") or None
        return cls(
            name=str((pod.get("metadata") or {}).get("name", "")),
            phase=str(status.get("phase") or "Pending"),
            node=str((pod.get("spec") or {}).get("nodeName") or "") or None,
            ready=PodInfo.from_object(pod).ready,
            reason=reason,
            message=message,
        )


@dataclass(frozen=True, slots=True)
class CompletedDrain:
    """A drain whose rollout completed; restarted-at stays, as the termination-cause
    detector's evidence, until the old pod's grace period is over (rollout.py `Retain`)."""

    namespace: str
    name: str
    restarted_at: str
    completed_at: str | None  # the completed-at annotation; None until the reconciler writes it
    kept_until: datetime  # completed-at (or now) + the template's terminationGracePeriodSeconds


@dataclass(frozen=True, slots=True)
class HeldDeployment:
    namespace: str
    name: str
    restarted_at: str
    waited: timedelta
    time_left: timedelta  # before the escape hatch (Reason.ROLLOUT_TIMEOUT) lets them through
    replicas: int | None
    updated: int
    ready: int
    available: int
    rollout_complete: bool
    nodes: tuple[str, ...]  # cordoned nodes its pods run on: the node(s) being drained
    pod: str | None  # the pod the webhook's answer below is for
    decision: Decision | None  # the webhook's answer for `pod` now
    replacements: tuple[Replacement, ...] = ()  # empty: the rollout has not made one yet
    deadline: PodDeadline | None = None  # `pod`'s drain-client deadline (decision/deadline.py)

    @property
    def replacements_ready(self) -> int:
        return sum(1 for pod in self.replacements if pod.ready)


@dataclass(frozen=True, slots=True)
class DrainTimeout:
    """A recent Warning on a Deployment (GracefulDrainTimeout, or a failed write's)."""

    namespace: str
    deployment: str
    last_seen: str
    count: int
    message: str
    reason: str = ""  # the event's reason


@dataclass(frozen=True, slots=True)
class RecordedEviction:
    """A pod the Deployment's evictions ledger counts as gone (let go by the webhook while
    other pods had to stay Ready) until `counts_until`."""

    namespace: str
    deployment: str
    pod: str
    recorded_at: datetime
    counts_until: datetime


@dataclass(frozen=True, slots=True)
class StatusState:
    deployments: Sequence[JsonDict]  # every Deployment (those carrying restarted-at matter)
    replicasets: Sequence[JsonDict]  # in the namespaces of the held ones
    pods: Sequence[JsonDict]  # in the namespaces of the held ones
    cordoned: frozenset[str]  # names of unschedulable nodes
    timeout_events: Sequence[JsonDict]
    webhook: WebhookHealth
    leader: LeaderState
    leader_elect: bool
    # node -> the drain client's termination deadline (decision/deadline.py), where known
    node_deadlines: Mapping[str, datetime] = field(default_factory=dict)
    # GracefulDrainWriteDeferred and GracefulDrainWriteFailed events
    write_events: Sequence[JsonDict] = ()


@dataclass(frozen=True, slots=True)
class Status:
    generated_at: datetime
    config: DecisionConfig
    held: tuple[HeldDeployment, ...]
    completed: tuple[CompletedDrain, ...]
    timeouts: tuple[DrainTimeout, ...]
    webhook: WebhookHealth
    leader: LeaderState
    leader_elect: bool
    recorded: tuple[RecordedEviction, ...] = ()
    write_failures: tuple[DrainTimeout, ...] = ()

    @property
    def leader_present(self) -> bool:
        return self.leader.held(self.generated_at)

    @property
    def exit_code(self) -> int:
        leader_missing = self.leader_elect and not self.leader_present
        unprotected = self.webhook.protection == "unprotected"
        return EXIT_DEGRADED if unprotected or leader_missing else EXIT_HEALTHY


def _completed(deployment: DeploymentInfo, now: datetime) -> CompletedDrain | None:
    if not deployment.drain_finished or deployment.restarted_at_raw is None:
        return None
    grace = timedelta(seconds=deployment.template_grace_period_seconds)
    return CompletedDrain(
        namespace=deployment.namespace,
        name=deployment.name,
        restarted_at=deployment.restarted_at_raw,
        completed_at=deployment.completed_at_raw,
        kept_until=(deployment.completed_at or now) + grace,
    )


def _replacements(deployment: DeploymentInfo, pods: Sequence[JsonDict]) -> tuple[Replacement, ...]:
    """The pods whose template carries this drain's stamp: the rollout's, not the old one."""
    if not deployment.rollout_started:
        return ()
    made = [
        pod
        for pod in pods
        if ((pod.get("metadata") or {}).get("annotations") or {}).get(
            TEMPLATE_RESTARTED_AT_ANNOTATION
        )
        == deployment.restarted_at_raw
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
    ]
    return tuple(sorted(map(Replacement.of, made), key=lambda pod: pod.name))


def _held(
    raw: JsonDict, state: StatusState, config: DecisionConfig, now: datetime
) -> HeldDeployment | None:
    deployment = DeploymentInfo.from_object(raw, enabled_annotation=config.enabled_annotation)
    if deployment.restarted_at is None or deployment.restarted_at_raw is None:
        return None
    if deployment.drain_finished:
        return None
    replicasets = {
        info.name: info
        for info in map(ReplicaSetInfo.from_object, state.replicasets)
        if info.namespace == deployment.namespace and info.owner_deployment == deployment.name
    }
    owned = [
        raw_pod
        for raw_pod in state.pods
        if (info := PodInfo.from_object(raw_pod)).namespace == deployment.namespace
        and info.owner_replicaset in replicasets
    ]
    pods = [PodInfo.from_object(raw_pod) for raw_pod in owned]
    draining = [pod for pod in pods if pod.node_name in state.cordoned and not pod.terminating]
    candidates = draining or [pod for pod in pods if not pod.terminating]
    subject = candidates[0] if candidates else None
    decision = None
    gone = gone_uids(deployment.evictions, now)
    if subject is not None:
        decision = decide_eviction(
            eviction_request(subject.ref), PodFound(subject),
            lambda _, name: replicasets.get(name), lambda _, __: deployment, config, now,
            ready_besides=lambda pod, _: ready_besides_among(pod, pods, gone),
            ready_elsewhere=lambda pod, _: ready_elsewhere_among(
                pod, pods, state.cordoned.__contains__, gone
            ),
        )  # fmt: skip
    deadline = None
    if subject is not None:
        deadline = pod_deadline(subject.node_name, state.node_deadlines.get(subject.node_name),
                                subject.grace_seconds)  # fmt: skip
    if decision is not None and deadline is not None and not decision.allowed:
        decision = with_deadline(decision, deadline, now)
    waited = max(now - deployment.restarted_at, timedelta(0))
    return HeldDeployment(
        namespace=deployment.namespace,
        name=deployment.name,
        restarted_at=deployment.restarted_at_raw,
        waited=waited,
        time_left=max(config.rollout_timeout - waited, timedelta(0)),
        replicas=deployment.replicas,
        updated=deployment.updated_replicas,
        ready=deployment.ready_replicas,
        available=deployment.available_replicas,
        rollout_complete=deployment.rollout_complete,
        nodes=tuple(sorted({pod.node_name for pod in draining})),
        pod=None if subject is None else subject.name,
        decision=decision,
        replacements=_replacements(deployment, owned),
        deadline=deadline,
    )


def _recorded(state: StatusState, config: DecisionConfig, now: datetime
              ) -> tuple[RecordedEviction, ...]:  # fmt: skip
    found: list[RecordedEviction] = []
    for raw in state.deployments:
        deployment = DeploymentInfo.from_object(raw, enabled_annotation=config.enabled_annotation)
        found.extend(
            RecordedEviction(
                deployment.namespace,
                deployment.name,
                entry.pod,
                entry.at,
                entry.at + ENTRY_LIFETIME,
            )
            for entry in deployment.evictions
            if entry.counts(now)
        )
    return tuple(sorted(found, key=lambda r: (r.namespace, r.deployment, r.recorded_at)))


def _timeouts(events: Sequence[JsonDict]) -> tuple[DrainTimeout, ...]:
    def last_seen(event: JsonDict) -> str:
        return str(event.get("lastTimestamp") or event.get("eventTime") or "")

    newest = sorted(events, key=last_seen, reverse=True)[:RECENT_TIMEOUTS]
    return tuple(
        DrainTimeout(
            namespace=str((event.get("involvedObject") or {}).get("namespace", "")),
            deployment=str((event.get("involvedObject") or {}).get("name", "")),
            last_seen=last_seen(event),
            count=int(event.get("count") or 1),
            message=str(event.get("message") or ""),
            reason=str(event.get("reason") or ""),
        )
        for event in newest
    )


def build_status(state: StatusState, config: DecisionConfig, now: datetime) -> Status:
    stamped = [
        raw
        for raw in state.deployments
        if RESTARTED_AT_ANNOTATION in ((raw.get("metadata") or {}).get("annotations") or {})
    ]
    held = (_held(raw, state, config, now) for raw in stamped)
    completed = (
        _completed(DeploymentInfo.from_object(raw, enabled_annotation=config.enabled_annotation),
                   now)
        for raw in stamped
    )  # fmt: skip
    return Status(
        generated_at=now,
        config=config,
        held=tuple(sorted((h for h in held if h is not None), key=lambda h: (h.namespace, h.name))),
        completed=tuple(
            sorted((c for c in completed if c is not None), key=lambda c: (c.namespace, c.name))
        ),
        timeouts=_timeouts(state.timeout_events),
        webhook=state.webhook,
        leader=state.leader,
        leader_elect=state.leader_elect,
        recorded=_recorded(state, config, now),
        write_failures=_timeouts(state.write_events),
    )
