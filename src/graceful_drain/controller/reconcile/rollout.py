"""What the reconciler does next with a Deployment, and the JSON patches that do it (pure).

The state of a drain is the restarted-at annotation, and once its rollout has completed the
completed-at annotation next to it (docs/decisions.md, "Reconciler"). `next_step(deployment,
now, timeout)` reads them together with the rollout status and answers with one step; the
reconciler performs it. Every write is guarded by a JSON patch `test` op on
the annotation's value, so N reconcilers acting on the same view produce one change: the
others' `test` fails (HTTP 422) and that only means the work is already done.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from graceful_drain.annotations import COMPLETED_AT_ANNOTATION, RESTARTED_AT_ANNOTATION
from graceful_drain.controller.decision.model import (
    TEMPLATE_RESTARTED_AT_ANNOTATION,
    DeploymentInfo,
)
from graceful_drain.kube.meta import json_pointer_token

JsonPatch = list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Idle:
    """Nothing to do: no restarted-at, or the Deployment is going away."""

    why: str


@dataclass(frozen=True, slots=True)
class CopyToTemplate:
    """Set the pod template's restartedAt to `value`: this is what starts the rollout."""

    value: str
    deadline: datetime


@dataclass(frozen=True, slots=True)
class WaitForRollout:
    """The rollout is under way: look again when the Deployment changes, or at `deadline`."""

    value: str
    deadline: datetime


@dataclass(frozen=True, slots=True)
class Completed:
    """The rollout is complete: write completed-at, report the duration. restarted-at stays
    until `Retire`: the old pod is only now terminating, and the termination-cause detector
    reads restarted-at as the evidence that graceful-drain replaced it."""

    value: str
    duration: timedelta


@dataclass(frozen=True, slots=True)
class Retain:
    """A completed drain's stamp, kept as evidence until `until` (completed-at + the pod
    template's terminationGracePeriodSeconds): look again then."""

    value: str
    until: datetime


@dataclass(frozen=True, slots=True)
class Retire:
    """The old pod's grace period is over: remove restarted-at and completed-at."""

    value: str


@dataclass(frozen=True, slots=True)
class Abandoned:
    """restarted-at was never copied and the Deployment is paused: a paused Deployment does not
    roll out, and copying the restart into its template would start one whenever it is resumed,
    long after the drain. Remove the stamp instead (the webhook then allows,
    `Reason.CANNOT_SURGE`)."""

    value: str


@dataclass(frozen=True, slots=True)
class TimedOut:
    """rolloutTimeout has passed (or restarted-at is implausibly far in the future): give up."""

    value: str
    waited: timedelta
    from_the_future: bool = False


@dataclass(frozen=True, slots=True)
class Expired:
    """The rollout we started is past rolloutTimeout and still incomplete: report it once and
    keep restarted-at, so the webhook's escape hatch (`Reason.ROLLOUT_TIMEOUT`) keeps allowing
    evictions. Removing it would let the next eviction retry stamp a new rollout and hold the
    drain for another rolloutTimeout, forever for a replacement that never becomes Ready. It is
    removed when the rollout completes (a fixed image), as any completed rollout."""

    value: str
    waited: timedelta


@dataclass(frozen=True, slots=True)
class DiscardMalformed:
    """restarted-at is not an RFC 3339 timestamp: nobody can act on it, remove it."""

    value: str


Step = (
    Idle
    | CopyToTemplate
    | WaitForRollout
    | Completed
    | Retain
    | Retire
    | Abandoned
    | Expired
    | TimedOut
    | DiscardMalformed
)
# The steps that end a drain by removing restarted-at.
Removal = Retire | Abandoned | TimedOut | DiscardMalformed


def next_step(deployment: DeploymentInfo, now: datetime, timeout: timedelta) -> Step:
    """The one thing to do next with `deployment`, read at `now` (aware UTC)."""
    value = deployment.restarted_at_raw
    if value is None:
        return Idle("no restarted-at annotation")
    if deployment.deleting:
        return Idle("the Deployment is being deleted")
    restarted_at = deployment.restarted_at
    if restarted_at is None:
        return DiscardMalformed(value)

    copied = deployment.rollout_started
    # completed-at belongs to the stamp the template carries; next to a newer stamp (not
    # copied yet) it is an earlier drain's, and the copy removes it.
    if copied and deployment.completed_at_raw is not None:
        completed_at = deployment.completed_at
        if completed_at is None:  # malformed: nothing to wait for
            return Retire(value)
        until = completed_at + timedelta(seconds=deployment.template_grace_period_seconds)
        return Retain(value, until) if now < until else Retire(value)

    # Same view, same moment: the controller has seen the template carrying `value` and every
    # replica runs it, so this is the rollout we asked for and it has finished.
    if copied and deployment.rollout_complete:
        return Completed(value, max(now - restarted_at, timedelta(0)))
    if not copied and deployment.paused:
        return Abandoned(value)

    waited = max(now - restarted_at, timedelta(0))
    # As the webhook's escape hatch (`Reason.ROLLOUT_TIMEOUT`): a stamp further ahead than the
    # timeout is not clock skew between replicas, and honouring it would hold evictions
    # indefinitely.
    from_the_future = restarted_at - now > timeout
    if copied and waited >= timeout and not from_the_future:
        return Expired(value, waited)
    if waited >= timeout or from_the_future:
        # Never copied (no rollout was started), or an implausible stamp: drop it.
        return TimedOut(value, waited, from_the_future)

    deadline = restarted_at + timeout
    if not copied:
        return CopyToTemplate(value, deadline)
    return WaitForRollout(value, deadline)


RESTARTED_AT_PATH = "/metadata/annotations/" + json_pointer_token(RESTARTED_AT_ANNOTATION)
COMPLETED_AT_PATH = "/metadata/annotations/" + json_pointer_token(COMPLETED_AT_ANNOTATION)
TEMPLATE_ANNOTATIONS_PATH = "/spec/template/metadata/annotations"
TEMPLATE_RESTARTED_AT_PATH = (
    TEMPLATE_ANNOTATIONS_PATH + "/" + json_pointer_token(TEMPLATE_RESTARTED_AT_ANNOTATION)
)


def copy_patch(deployment: DeploymentInfo, value: str) -> JsonPatch:
    """Set the template's restartedAt to `value`, only while restarted-at still says `value`.

    Racing reconcilers write the same value, so the later write changes nothing and the API
    server does not bump the generation (one rollout); a reconciler with a stale view (the
    drain already finished, or a newer one started) fails the `test` instead. A missing
    annotations map must be added whole; the resourceVersion `test` then makes sure no map
    appeared since, which the whole-map `add` would replace. An earlier drain's completed-at
    is removed: it would read as this rollout's completion.
    """
    ops: JsonPatch = [{"op": "test", "path": RESTARTED_AT_PATH, "value": value}]
    if deployment.completed_at_raw is not None:  # an earlier drain's
        ops.append({"op": "remove", "path": COMPLETED_AT_PATH})
    if deployment.template_has_annotations:
        ops.append({"op": "add", "path": TEMPLATE_RESTARTED_AT_PATH, "value": value})
    else:
        ops.append(
            {
                "op": "test",
                "path": "/metadata/resourceVersion",
                "value": deployment.resource_version,
            }
        )
        ops.append(
            {
                "op": "add",
                "path": TEMPLATE_ANNOTATIONS_PATH,
                "value": {TEMPLATE_RESTARTED_AT_ANNOTATION: value},
            }
        )
    return ops


def completion_patch(deployment: DeploymentInfo, value: str, completed_at: str) -> JsonPatch:
    """Add completed-at, only while restarted-at still says `value` and nothing changed since
    this view: of N reconcilers acting on it, one writes (and reports) the completion."""
    return [
        {"op": "test", "path": RESTARTED_AT_PATH, "value": value},
        {"op": "test", "path": "/metadata/resourceVersion", "value": deployment.resource_version},
        {"op": "add", "path": COMPLETED_AT_PATH, "value": completed_at},
    ]


def removal_patch(value: str, *, completed: bool = False) -> JsonPatch:
    """Remove restarted-at (and completed-at when `completed`), only if restarted-at still
    holds `value`: a newer drain's stamp survives."""
    ops: JsonPatch = [
        {"op": "test", "path": RESTARTED_AT_PATH, "value": value},
        {"op": "remove", "path": RESTARTED_AT_PATH},
    ]
    if completed:
        ops.append({"op": "remove", "path": COMPLETED_AT_PATH})
    return ops
