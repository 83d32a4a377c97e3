"""A ReplicaSet's status from its pods. Pure.

After pkg/controller/replicaset/replica_set_utils.go (`calculateStatus`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from kubesim import jsoncodec
from kubesim.types import Obj

from ..apiserver.meta import rfc3339
from .deployment_util import min_ready_seconds, replicas, template_of
from .labels import labels_of
from .podutil import is_pod_available, is_pod_ready, seconds_until_available

REPLICA_FAILURE = "ReplicaFailure"
_COUNTS = ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas")


def _fully_labeled(pod: Obj, template_labels: dict[str, str]) -> bool:
    labels = labels_of(pod)
    return all(labels.get(k) == v for k, v in template_labels.items())


def calculate_status(
    rs: Obj, active_pods: Sequence[Obj], manage_error: str | None, now: dt.datetime
) -> Obj:
    """The new status (wire form) for `rs` owning `active_pods`; `manage_error` is the message
    of a failed create or delete, which sets the ReplicaFailure condition."""
    status = jsoncodec.copy(rs.get("status") or {})
    template_labels = (template_of(rs).get("metadata") or {}).get("labels") or {}
    mrs = min_ready_seconds(rs)
    fully = sum(1 for p in active_pods if _fully_labeled(p, template_labels))
    ready = [p for p in active_pods if is_pod_ready(p)]
    available = sum(1 for p in ready if is_pod_available(p, mrs, now))
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    failure = next((c for c in conditions if c.get("type") == REPLICA_FAILURE), None)
    if manage_error is not None and failure is None:
        diff = len(active_pods) - replicas(rs)
        reason = "FailedCreate" if diff < 0 else "FailedDelete" if diff > 0 else ""
        conditions.append(
            {
                "type": REPLICA_FAILURE,
                "status": "True",
                "lastTransitionTime": rfc3339(now),
                "reason": reason,
                "message": manage_error,
            }
        )
    elif manage_error is None and failure is not None:
        conditions = [c for c in conditions if c.get("type") != REPLICA_FAILURE]
    status["conditions"] = conditions
    status["replicas"] = len(active_pods)
    status["fullyLabeledReplicas"] = fully
    status["readyReplicas"] = len(ready)
    status["availableReplicas"] = available
    return wire_status(status)


def wire_status(status: Obj) -> Obj:
    """ReplicaSetStatus as Go serialises it: `replicas` always, other zeros omitted."""
    out = {
        k: v for k, v in status.items() if not (k in (*_COUNTS[1:], "observedGeneration") and not v)
    }
    out.setdefault("replicas", 0)
    if not out.get("conditions"):
        out.pop("conditions", None)
    return out


def status_is_current(rs: Obj, new_status: Obj) -> bool:
    """updateReplicaSetStatus's steady-state check: nothing to write."""
    old = wire_status(rs.get("status") or {})
    generation = int(rs["metadata"].get("generation", 0))
    return (
        all(old.get(k, 0) == new_status.get(k, 0) for k in _COUNTS)
        and generation == int(old.get("observedGeneration", 0))
        and old.get("conditions") == new_status.get("conditions")
    )


def next_availability_check(rs: Obj, active_pods: Sequence[Obj], now: dt.datetime) -> float | None:
    """Seconds until the earliest Ready pod passes minReadySeconds, if any is waiting."""
    mrs = min_ready_seconds(rs)
    if mrs <= 0:
        return None
    waits = [
        w for p in active_pods if (w := seconds_until_available(p, mrs, now)) is not None and w > 0
    ]
    return min(waits) if waits else None
