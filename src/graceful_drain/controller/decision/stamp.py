"""`rollout-requested`'s write: the restarted-at stamp on a Deployment as a JSON patch, and
the rule for its one retry (a 409 re-reads the Deployment and decides once more;
table.after_stamp_failure)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from graceful_drain.controller.decision.model import (
    COMPLETED_AT_ANNOTATION,
    RESTARTED_AT_ANNOTATION,
    DeploymentInfo,
)
from graceful_drain.kube.meta import json_pointer_token
from graceful_drain.kube.timefmt import format_rfc3339_micro

MAX_DECIDE_ATTEMPTS = 2  # the first decision, plus one more after a 409 on the stamp


@dataclass(frozen=True, slots=True)
class StampIntent:
    """`Reason.ROLLOUT_REQUESTED`: the caller must apply `patch` (JSON patch) to the Deployment,
    then answer 429."""

    deployment: DeploymentInfo
    stamped_at: datetime

    @property
    def value(self) -> str:
        return stamp_value(self.deployment, self.stamped_at)

    @property
    def patch(self) -> list[dict[str, Any]]:
        return stamp_patch(self.deployment, self.stamped_at)


def stamp_value(deployment: DeploymentInfo, now: datetime) -> str:
    """restarted-at for a drain stamped at `now`: to the microsecond (so "waited 515ms" is
    true), but never the value the pod template already carries (a previous drain in the same
    microsecond), which the reconciler would read as a rollout already done."""
    value = format_rfc3339_micro(now)
    if value == deployment.template_restarted_at:
        value = format_rfc3339_micro(now + timedelta(microseconds=1))
    return value


def stamp_patch(deployment: DeploymentInfo, now: datetime) -> list[dict[str, Any]]:
    """The JSON patch (application/json-patch+json) that stamps restarted-at on `deployment`.

    Optimistic concurrency: `add /metadata/resourceVersion` carries the resourceVersion the
    decision was made on; if the Deployment changed since, the API server answers 409 Conflict
    (apiserver registry/generic/registry/store.go: a resourceVersion in the updated object that
    differs from the stored one is an OptimisticLockError). A failed `test` op would answer 422
    instead (apiserver endpoints/handlers/patch.go), so the `test` here only pins the object's
    identity. An absent annotations map must be added whole: a JSON patch cannot add a member
    to a missing parent. A finished drain's completed-at goes with the old stamp.
    """
    value = stamp_value(deployment, now)
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": deployment.uid}]
    if deployment.resource_version:
        ops.append(
            {
                "op": "add",
                "path": "/metadata/resourceVersion",
                "value": deployment.resource_version,
            }
        )
    if deployment.has_annotations:
        ops.append(
            {
                "op": "add",
                "path": "/metadata/annotations/" + json_pointer_token(RESTARTED_AT_ANNOTATION),
                "value": value,
            }
        )
    else:
        ops.append(
            {
                "op": "add",
                "path": "/metadata/annotations",
                "value": {RESTARTED_AT_ANNOTATION: value},
            }
        )
    if deployment.has_annotations and deployment.completed_at_raw is not None:
        ops.append(
            {
                "op": "remove",
                "path": "/metadata/annotations/" + json_pointer_token(COMPLETED_AT_ANNOTATION),
            }
        )
    return ops


class FollowUp(Enum):
    REREAD_AND_DECIDE = "reread-and-decide"  # GET the Deployment live, call decide() again
