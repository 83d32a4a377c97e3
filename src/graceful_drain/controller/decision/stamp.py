"""The webhook's two writes to a Deployment, as JSON patches: `rollout-requested`'s
restarted-at stamp (`StampIntent`) and the ledger record of `ready-elsewhere` and
`surge-ready` (`RecordIntent`, ledger.py), both guarded by the resourceVersion the decision
was made on; and the rule for a write that failed (a 409 re-reads the Deployment and decides
again; table.after_write_failure)."""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import Enum
from typing import Any

import msgspec

from graceful_drain.annotations import COMPLETED_AT_ANNOTATION, RESTARTED_AT_ANNOTATION
from graceful_drain.controller.decision.ledger import PodUid, ledger_patch, with_recorded
from graceful_drain.controller.decision.model import DeploymentInfo
from graceful_drain.kube.meta import (
    HTTP_CONFLICT,
    HTTP_TOO_MANY_REQUESTS,
    HTTP_UNPROCESSABLE,
    JSON_PATCH_NOT_APPLICABLE,
    json_pointer_token,
)
from graceful_drain.kube.timefmt import format_rfc3339_micro

# The first decision, plus more after each 409 on a write: one writer wins each round, and
# the Deployment's own controllers bump its resourceVersion too (status writes while pods come
# and go), so a request may lose several rounds it did not lose to another eviction. The
# eviction subresource retries its PodDisruptionBudget's conflicts up to 20 times
# (`EvictionsRetry`); the webhook's budget bounds these rounds first (serving/webhook.py,
# MIN_WRITE_SECONDS: no write started without it).
MAX_DECIDE_ATTEMPTS = 10


class StampIntent(msgspec.Struct, frozen=True, gc=False):
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


class RecordIntent(msgspec.Struct, frozen=True, gc=False):
    """`Reason.READY_ELSEWHERE`, `Reason.SURGE_READY`: the caller must add `pod` to the
    Deployment's ledger (`patch`), then answer allowed."""

    deployment: DeploymentInfo
    pod: str  # the pod's name
    uid: str
    recorded_at: datetime

    def patch(self, pod_uid: PodUid | None = None) -> list[dict[str, Any]]:
        """The guarded JSON patch adding the entry; the same write drops the entries that
        expired or whose pod's deletion `pod_uid` observes (ledger.py `keep`)."""
        deployment = self.deployment
        entries = with_recorded(deployment.evictions, self.pod, self.uid, self.recorded_at,
                                deployment.namespace, pod_uid)  # fmt: skip
        return ledger_patch(
            deployment.uid, deployment.resource_version, deployment.has_annotations, entries
        )


WriteIntent = StampIntent | RecordIntent


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


class WriteFailure(Enum):
    """What a failed write's answer says (docs/decisions.md, "When a write fails")."""

    CONFLICT = "conflict"  # 409: another writer got there first
    TRANSIENT = "transient"  # refused for now: timeout, no answer, 429, 5xx
    DEFINITE = "definite"  # refused for good: any other 4xx (403, 404, 400, 422 invalid)
    # not sent: too little of the webhook's budget was left to write and answer in time
    UNSENT = "unsent"


def classify_write_failure(status: int | None, message: str | None = None) -> WriteFailure:
    """`status`: the HTTP status of the failed PATCH, None when there was none (a timeout, a
    connection reset); `message`: its Status's message. A 422 saying the JSON patch does not
    apply to the stored object is a conflict too: the Deployment changed under a view whose
    patch held a `remove` (a finished drain's completed-at) or an `add` into an annotations map
    that another writer has since emptied, as the reconciler does when it clears a drain."""
    if status == HTTP_CONFLICT:
        return WriteFailure.CONFLICT
    if status == HTTP_UNPROCESSABLE and message == JSON_PATCH_NOT_APPLICABLE:
        return WriteFailure.CONFLICT
    if status is None or status == HTTP_TOO_MANY_REQUESTS or status >= 500:
        return WriteFailure.TRANSIENT
    return WriteFailure.DEFINITE


class FollowUp(Enum):
    REREAD_AND_DECIDE = "reread-and-decide"  # GET the Deployment live, call decide() again
