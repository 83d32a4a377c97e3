"""The Events graceful-drain writes on a Deployment, and what they say.

recorder = EventRecorder(client, instance=pod_name)      # kube/events.py, a component
events = DrainEvents(recorder, uid_of=cache_uid_lookup)
events.started(deployment_ref, pod=pod_ref, node="node-a", restarted_at="2024-...Z")
events.held(deployment_ref, pod=pod_ref, node="node-a", waited=timedelta(seconds=40))
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final, Protocol

import msgspec

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.controller.decision.deadline import PodDeadline
from graceful_drain.controller.decision.model import DeploymentInfo, ObjectRef, PodInfo
from graceful_drain.controller.decision.reasons import Reason
from graceful_drain.kube.client import error_detail
from graceful_drain.kube.events import NORMAL, WARNING, InvolvedObject
from graceful_drain.kube.ratelimit import RateLimiter
from graceful_drain.kube.timefmt import format_go_duration
from graceful_drain.logs import get_logger

HELD_EVENT_INTERVAL_SECONDS = 30.0
# How many (Deployment, node, deadline) drains `DeadlineAhead` remembers having reported.
DEADLINES_REMEMBERED = 1024

_log = get_logger("events")

# Reasons (CamelCase, as every Kubernetes event reason).
DRAIN_STARTED: Final = "GracefulDrainStarted"
DRAIN_WAITING: Final = "GracefulDrainWaiting"
DRAIN_COMPLETED: Final = "GracefulDrainCompleted"
DRAIN_TIMEOUT: Final = "GracefulDrainTimeout"
DRAIN_CANNOT_SURGE: Final = "GracefulDrainCannotSurge"
DRAIN_CANNOT_PROTECT: Final = "GracefulDrainCannotProtect"
DRAIN_INVALID_ANNOTATION: Final = "GracefulDrainInvalidAnnotation"
DRAIN_BYPASSED: Final = "GracefulDrainBypassed"  # controller/reconcile/bypass.py
# A held pod's node carries a deadline its drain client enforces (decision/deadline.py).
DRAIN_DEADLINE: Final = "GracefulDrainDeadline"
# On the Node, while an eviction of a pod on it is held: `kubectl describe node` explains a
# drain client's "pods are waiting to be evicted" (Karpenter writes nothing more specific).
DRAIN_HOLDING: Final = "GracefulDrainHolding"
# A held eviction whose write to the Deployment failed for now (`Reason.WRITE_DEFERRED`);
# `graceful-drain status` lists them.
DRAIN_WRITE_DEFERRED: Final = "GracefulDrainWriteDeferred"
# An eviction allowed although its write to the Deployment failed.
DRAIN_WRITE_FAILED: Final = "GracefulDrainWriteFailed"
# The Warning each warning decision (reasons.WARNING_REASONS) is reported with.
WARNING_EVENT_REASON: Final = {
    Reason.CANNOT_SURGE: DRAIN_CANNOT_SURGE,
    Reason.CANNOT_PROTECT: DRAIN_CANNOT_PROTECT,
    Reason.ENABLED_ANNOTATION_INVALID: DRAIN_INVALID_ANNOTATION,
    Reason.WRITE_DEFERRED: DRAIN_WRITE_DEFERRED,
    Reason.WRITE_TIMEOUT: DRAIN_WRITE_FAILED,
    Reason.STAMP_FAILED: DRAIN_WRITE_FAILED,
    Reason.RECORD_FAILED: DRAIN_WRITE_FAILED,
}


def started_message(pod: ObjectRef, node: str, restarted_at: str) -> str:
    return (
        f"Rollout requested at {restarted_at} so that pod {pod.name} can leave node "
        f"{node or '(unscheduled)'} with a Ready replacement elsewhere; its eviction is held "
        "until then"
    )


def held_message(pod: ObjectRef, node: str, waited: timedelta | None) -> str:
    waited_text = "" if waited is None else f" (waited {format_go_duration(waited)})"
    return (
        f"Eviction of pod {pod.name} from node {node or '(unscheduled)'} held until the "
        f"replacement is Ready{waited_text}"
    )


def holding_message(deployment: ObjectRef, pod: ObjectRef, waited: timedelta | None) -> str:
    waited_text = "" if waited is None else f", waited {format_go_duration(waited)}"
    return (
        f"graceful-drain holds the eviction of pod {pod.namespace}/{pod.name} until a "
        f"replacement from Deployment {deployment.namespace}/{deployment.name} is Ready "
        f"(rollout in progress, replacement not Ready yet{waited_text})"
    )


def deadline_message(deployment: ObjectRef, pod: ObjectRef, deadline: PodDeadline,
                     now: datetime) -> str:  # fmt: skip
    text = deadline.sentence(now, f"{deployment.namespace}/{deployment.name}")
    text = text.replace("this pod", f"pod {pod.name}", 1)
    return f"Eviction of pod {pod.name} from node {deadline.node} held: {text}"


def completed_message(
    restarted_at: str, duration: timedelta, bypassed_pod: str | None = None
) -> str:
    if bypassed_pod is not None:
        return (
            f"Rollout requested at {restarted_at} completed in "
            f"{format_go_duration(duration)}, after pod {bypassed_pod} had been deleted "
            f"without its eviction ({DRAIN_BYPASSED}): the Deployment had no Ready pod meanwhile"
        )
    return (
        f"Rollout requested at {restarted_at} completed in {format_go_duration(duration)}; "
        "evictions proceed"
    )


def bypassed_message(pod: str, node: str, restarted_at: str) -> str:
    return (
        f"Pod {pod} on node {node or '(unscheduled)'} was deleted without its eviction while "
        f"graceful-drain held it for the rollout requested at {restarted_at}, before a "
        "replacement was Ready: the Deployment has no Ready pod until one is (a drain "
        "client's deadline, such as Karpenter's NodePool terminationGracePeriod, or a "
        "person's delete)"
    )


def timeout_message(
    restarted_at: str, waited: timedelta, timeout: timedelta, *, from_the_future: bool = False
) -> str:
    if from_the_future:
        return (
            f"restarted-at {restarted_at} is further in the future than rolloutTimeout "
            f"{format_go_duration(timeout)}; gave up on the rollout, evictions are no longer held"
        )
    return (
        f"Rollout requested at {restarted_at} did not complete within rolloutTimeout "
        f"{format_go_duration(timeout)} (waited {format_go_duration(waited)}); evictions are "
        "no longer held"
    )


def invalid_annotation_message(value: str) -> str:
    return f"{RESTARTED_AT_ANNOTATION} {value[:64]!r} is not an RFC 3339 timestamp; removed it"


def _involved(deployment: DeploymentInfo) -> InvolvedObject:
    return InvolvedObject.deployment(deployment.namespace, deployment.name, deployment.uid)


def _no_uid(_: ObjectRef) -> str | None:
    return None


# --- what the webhook hands over: one value per event, fire and forget ----------------------
# (frozen msgspec structs: the webhook builds one for every eviction it holds)


class RolloutRequested(msgspec.Struct, frozen=True, gc=False):
    """The webhook stamped restarted-at (GracefulDrainStarted, naming the pod and node)."""

    deployment: ObjectRef
    pod: ObjectRef
    node: str
    restarted_at: str  # the annotation value just stamped


class EvictionHeld(msgspec.Struct, frozen=True, gc=False):
    """An eviction refused while the requested rollout runs (`Reason.ROLLOUT_IN_PROGRESS`)."""

    deployment: ObjectRef
    pod: ObjectRef
    node: str
    waited: timedelta | None


class DeploymentWarning(msgspec.Struct, frozen=True, gc=False):
    """An allowed eviction that asks for a Warning event (reasons.WARNING_REASONS)."""

    deployment: ObjectRef
    pod: ObjectRef
    reason: Reason
    message: str


class DeadlineAhead(msgspec.Struct, frozen=True, gc=False):
    """A held eviction (429) of a pod whose node carries a deadline the drain client enforces
    (GracefulDrainDeadline, a Warning, once per Deployment, node and deadline: once a drain)."""

    deployment: ObjectRef
    pod: ObjectRef
    deadline: PodDeadline
    now: datetime  # when the webhook read it


DrainEvent = RolloutRequested | EvictionHeld | DeploymentWarning | DeadlineAhead


class Recorder(Protocol):
    """Where events go (kube/events.py's EventRecorder): queued, never raising."""

    def record(self, regarding: InvolvedObject, type_: str, reason: str, message: str) -> None: ...


class DrainEvents:
    """The one place graceful-drain's events are rate-limited and handed to the recorder (which
    folds repeats into a series). Every method is synchronous, cheap and never raises: the
    webhook calls `emit` on the admission path."""

    def __init__(
        self,
        recorder: Recorder,
        *,
        uid_of: Callable[[ObjectRef], str | None] = _no_uid,
        held_interval: float = HELD_EVENT_INTERVAL_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
        node_events: bool = False,
    ) -> None:
        self.recorder = recorder
        # Also write GracefulDrainHolding on the Node (Events of cluster-scoped objects live
        # in `default`: a cluster-wide install only, whose ClusterRole grants it).
        self._node_events = node_events
        self._uid_of = uid_of
        self._held = RateLimiter(held_interval, clock=monotonic)
        self._warnings = RateLimiter(held_interval, clock=monotonic)
        # (namespace, name, restarted-at) -> the pod deleted without its eviction; read by
        # `completed`. Not state that matters for correctness: a restart forgets it.
        self._bypassed: dict[tuple[str, str, str], str] = {}
        # (deployment, node, deadline) already reported by GracefulDrainDeadline, oldest first
        self._deadlines: OrderedDict[tuple[ObjectRef, str, datetime], None] = OrderedDict()

    def _regarding(self, deployment: ObjectRef) -> InvolvedObject:
        try:
            uid = self._uid_of(deployment) or ""
        except Exception:
            uid = ""
        return InvolvedObject.deployment(deployment.namespace, deployment.name, uid)

    def emit(self, event: DrainEvent) -> bool:
        """Queue the Event for `event` unless its rate limit says no: a held eviction at most
        once per interval per Deployment, a Warning once per interval per Deployment and
        reason. True if an event was queued; never raises."""
        try:
            if isinstance(event, RolloutRequested):
                message = started_message(event.pod, event.node, event.restarted_at)
                self._record(event.deployment, NORMAL, DRAIN_STARTED, message)
                self._on_node(event.node, event.deployment, event.pod, None)
                return True
            if isinstance(event, EvictionHeld):
                if not self._held.allow(event.deployment):
                    return False
                message = held_message(event.pod, event.node, event.waited)
                self._record(event.deployment, NORMAL, DRAIN_WAITING, message)
                self._on_node(event.node, event.deployment, event.pod, event.waited)
                return True
            if isinstance(event, DeadlineAhead):
                return self._deadline_ahead(event)
            event_reason = WARNING_EVENT_REASON.get(event.reason)
            if event_reason is None or not self._warnings.allow((event.deployment, event.reason)):
                return False
            self._record(event.deployment, WARNING, event_reason, event.message)
            return True
        except Exception as error:  # an event is never worth an exception on the admission path
            _log.warning("drain event dropped", kind=type(event).__name__,
                         error=error_detail(error))  # fmt: skip
            return False

    def _deadline_ahead(self, event: DeadlineAhead) -> bool:
        key = (event.deployment, event.deadline.node, event.deadline.node_deadline)
        if key in self._deadlines:
            return False
        self._deadlines[key] = None
        while len(self._deadlines) > DEADLINES_REMEMBERED:
            self._deadlines.popitem(last=False)
        message = deadline_message(event.deployment, event.pod, event.deadline, event.now)
        self._record(event.deployment, WARNING, DRAIN_DEADLINE, message)
        return True

    def _on_node(
        self, node: str, deployment: ObjectRef, pod: ObjectRef, waited: timedelta | None
    ) -> None:
        if self._node_events and node:
            self.recorder.record(InvolvedObject.node(node), NORMAL, DRAIN_HOLDING,
                                 holding_message(deployment, pod, waited))  # fmt: skip

    def _record(self, deployment: ObjectRef, type_: str, reason: str, message: str) -> None:
        self.recorder.record(self._regarding(deployment), type_, reason, message)

    # --- the reconciler's events (one per step it took, no rate limit) ------------------------

    def completed(
        self, deployment: DeploymentInfo, *, restarted_at: str, duration: timedelta
    ) -> None:
        bypassed = self._bypassed.pop((deployment.namespace, deployment.name, restarted_at), None)
        self.recorder.record(
            _involved(deployment), NORMAL, DRAIN_COMPLETED,
            completed_message(restarted_at, duration, bypassed),
        )  # fmt: skip

    def bypassed(self, deployment: DeploymentInfo, *, pod: PodInfo) -> None:
        """A held pod was deleted without its eviction (controller/reconcile/bypass.py)."""
        restarted_at = deployment.restarted_at_raw or ""
        self._bypassed[(deployment.namespace, deployment.name, restarted_at)] = pod.name
        self.recorder.record(
            _involved(deployment), WARNING, DRAIN_BYPASSED,
            bypassed_message(pod.name, pod.node_name, restarted_at),
        )  # fmt: skip

    def timed_out(
        self,
        deployment: DeploymentInfo,
        *,
        restarted_at: str,
        waited: timedelta,
        timeout: timedelta,
        from_the_future: bool = False,
    ) -> None:
        self.recorder.record(
            _involved(deployment), WARNING, DRAIN_TIMEOUT,
            timeout_message(restarted_at, waited, timeout, from_the_future=from_the_future),
        )  # fmt: skip

    def invalid_annotation(self, deployment: DeploymentInfo, *, value: str) -> None:
        self.recorder.record(
            _involved(deployment), WARNING,
            DRAIN_INVALID_ANNOTATION, invalid_annotation_message(value),
        )  # fmt: skip
