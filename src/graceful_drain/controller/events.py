"""The Events graceful-drain writes on a Deployment, and what they say.

recorder = EventRecorder(client, instance=pod_name)      # kube/events.py, a component
events = DrainEvents(recorder, uid_of=cache_uid_lookup)
events.started(deployment_ref, pod=pod_ref, node="node-a", restarted_at="2024-...Z")
events.held(deployment_ref, pod=pod_ref, node="node-a", waited=timedelta(seconds=40))
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Final

from graceful_drain.controller.decide import Reason
from graceful_drain.controller.model import DeploymentInfo, ObjectRef
from graceful_drain.kube.events import NORMAL, WARNING, EventRecorder, InvolvedObject
from graceful_drain.kube.ratelimit import RateLimiter
from graceful_drain.kube.timefmt import format_go_duration

HELD_EVENT_INTERVAL_SECONDS = 30.0

# Reasons (CamelCase, as every Kubernetes event reason).
DRAIN_STARTED: Final = "GracefulDrainStarted"
DRAIN_WAITING: Final = "GracefulDrainWaiting"
DRAIN_COMPLETED: Final = "GracefulDrainCompleted"
DRAIN_TIMEOUT: Final = "GracefulDrainTimeout"
DRAIN_CANNOT_SURGE: Final = "GracefulDrainCannotSurge"
DRAIN_CANNOT_PROTECT: Final = "GracefulDrainCannotProtect"
DRAIN_INVALID_ANNOTATION: Final = "GracefulDrainInvalidAnnotation"
# The Warning each warning decision (decide.WARNING_REASONS) is reported with.
WARNING_EVENT_REASON: Final = {
    Reason.CANNOT_SURGE: DRAIN_CANNOT_SURGE,
    Reason.CANNOT_PROTECT: DRAIN_CANNOT_PROTECT,
    Reason.ENABLED_ANNOTATION_INVALID: DRAIN_INVALID_ANNOTATION,
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


def completed_message(restarted_at: str, duration: timedelta) -> str:
    return (
        f"Rollout requested at {restarted_at} completed in {format_go_duration(duration)}; "
        "evictions proceed"
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
    return (
        f"graceful-drain.stonal.com/restarted-at {value[:64]!r} is not an RFC 3339 timestamp; "
        "removed it"
    )


def _involved(deployment: DeploymentInfo) -> InvolvedObject:
    return InvolvedObject.deployment(deployment.namespace, deployment.name, deployment.uid)


def _no_uid(_: ObjectRef) -> str | None:
    return None


class DrainEvents:
    """The events graceful-drain emits on a Deployment. Every method is synchronous, cheap and
    never raises: the webhook calls them on the admission path."""

    def __init__(
        self,
        recorder: EventRecorder,
        *,
        uid_of: Callable[[ObjectRef], str | None] = _no_uid,
        held_interval: float = HELD_EVENT_INTERVAL_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.recorder = recorder
        self._uid_of = uid_of
        self._held = RateLimiter(held_interval, clock=monotonic)
        self._warnings = RateLimiter(held_interval, clock=monotonic)

    def _regarding(self, deployment: ObjectRef) -> InvolvedObject:
        try:
            uid = self._uid_of(deployment) or ""
        except Exception:
            uid = ""
        return InvolvedObject.deployment(deployment.namespace, deployment.name, uid)

    def started(
        self, deployment: ObjectRef, *, pod: ObjectRef, node: str, restarted_at: str
    ) -> None:
        """The webhook stamped restarted-at (GracefulDrainStarted, naming the pod and node)."""
        self.recorder.record(
            self._regarding(deployment), NORMAL, DRAIN_STARTED,
            started_message(pod, node, restarted_at),
        )  # fmt: skip

    def held(
        self, deployment: ObjectRef, *, pod: ObjectRef, node: str, waited: timedelta | None
    ) -> bool:
        """An eviction was refused while the rollout runs; at most one event per interval per
        Deployment. True if an event was queued."""
        try:
            if not self._held.allow(deployment):
                return False
        except Exception:
            return False
        self.recorder.record(
            self._regarding(deployment), NORMAL, DRAIN_WAITING, held_message(pod, node, waited)
        )
        return True

    def warning(self, deployment: ObjectRef, *, reason: Reason, message: str) -> bool:
        """An eviction let through without protection, for a reason the Deployment's owner can
        fix (the message names the field): a Warning, rate-limited per Deployment and reason.
        True if an event was queued."""
        event_reason = WARNING_EVENT_REASON.get(reason)
        try:
            if event_reason is None or not self._warnings.allow((deployment, reason)):
                return False
        except Exception:
            return False
        self.recorder.record(self._regarding(deployment), WARNING, event_reason, message)
        return True

    def completed(
        self, deployment: DeploymentInfo, *, restarted_at: str, duration: timedelta
    ) -> None:
        self.recorder.record(
            _involved(deployment), NORMAL, DRAIN_COMPLETED,
            completed_message(restarted_at, duration),
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
