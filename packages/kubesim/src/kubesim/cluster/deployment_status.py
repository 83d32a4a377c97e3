"""A Deployment's status and conditions, computed from its ReplicaSets. Pure.

After pkg/controller/deployment/sync.go (`calculateStatus`), progress.go
(`syncRolloutStatus`, `requeueStuckDeployment`) and util/deployment_util.go
(conditions, `DeploymentComplete`, `DeploymentProgressing`, `DeploymentTimedOut`).
Statuses are built in wire form: zero-valued `omitempty` fields are left out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from kubesim import jsoncodec
from kubesim.types import Obj

from ..apiserver.meta import parse_time, rfc3339
from .deployment_util import max_unavailable, progress_deadline, replicas, status_int

# Progressing reasons
REPLICA_SET_UPDATED = "ReplicaSetUpdated"
FAILED_RS_CREATE = "ReplicaSetCreateError"
NEW_REPLICA_SET = "NewReplicaSetCreated"
FOUND_NEW_RS = "FoundNewReplicaSet"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"
# Available reasons
MINIMUM_REPLICAS_AVAILABLE = "MinimumReplicasAvailable"
MINIMUM_REPLICAS_UNAVAILABLE = "MinimumReplicasUnavailable"

PROGRESSING = "Progressing"
AVAILABLE = "Available"
REPLICA_FAILURE = "ReplicaFailure"

_OMIT_ZERO = (
    "observedGeneration",
    "replicas",
    "updatedReplicas",
    "readyReplicas",
    "availableReplicas",
    "unavailableReplicas",
)


def wire_status(status: Obj) -> Obj:
    """DeploymentStatus as Go serialises it: omitempty zeros and empty conditions dropped."""
    out = {k: v for k, v in status.items() if not (k in _OMIT_ZERO and not v)}
    if not out.get("conditions"):
        out.pop("conditions", None)
    if out.get("collisionCount") is None:
        out.pop("collisionCount", None)
    return out


# --- conditions ---------------------------------------------------------------------------


def new_condition(type_: str, status: str, reason: str, message: str, now: dt.datetime) -> Obj:
    stamp = rfc3339(now)
    return {
        "type": type_,
        "status": status,
        "lastUpdateTime": stamp,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }


def get_condition(status: Obj, type_: str) -> Obj | None:
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


def remove_condition(status: Obj, type_: str) -> None:
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != type_]


def set_condition(status: Obj, cond: Obj) -> None:
    """SetDeploymentCondition: no-op when status and reason are unchanged; keeps the
    transition time when only the reason changes; the condition moves to the end."""
    current = get_condition(status, cond["type"])
    if (
        current is not None
        and current.get("status") == cond["status"]
        and (current.get("reason") == cond["reason"])
    ):
        return
    cond = dict(cond)
    if current is not None and current.get("status") == cond["status"]:
        cond["lastTransitionTime"] = current.get("lastTransitionTime", cond["lastTransitionTime"])
    remove_condition(status, cond["type"])
    status["conditions"].append(cond)


# --- status -------------------------------------------------------------------------------


def _sum(rss: Sequence[Obj | None], field: str) -> int:
    return sum(status_int(rs, field) for rs in rss if rs is not None)


def _spec_sum(rss: Sequence[Obj | None]) -> int:
    return sum(replicas(rs) for rs in rss if rs is not None)


def calculate_status(
    all_rss: Sequence[Obj | None], new_rs: Obj | None, d: Obj, now: dt.datetime
) -> Obj:
    available = _sum(all_rss, "availableReplicas")
    unavailable = max(_spec_sum(all_rss) - available, 0)
    current = d.get("status") or {}
    status: Obj = {
        "observedGeneration": int(d["metadata"].get("generation", 0)),
        "replicas": _sum(all_rss, "replicas"),
        "updatedReplicas": _sum([new_rs], "replicas"),
        "readyReplicas": _sum(all_rss, "readyReplicas"),
        "availableReplicas": available,
        "unavailableReplicas": unavailable,
        "conditions": jsoncodec.copy(current.get("conditions") or []),
        "collisionCount": current.get("collisionCount"),
    }
    if available >= replicas(d) - max_unavailable(d):
        cond = new_condition(
            AVAILABLE,
            "True",
            MINIMUM_REPLICAS_AVAILABLE,
            "Deployment has minimum availability.",
            now,
        )
    else:
        cond = new_condition(
            AVAILABLE,
            "False",
            MINIMUM_REPLICAS_UNAVAILABLE,
            "Deployment does not have minimum availability.",
            now,
        )
    set_condition(status, cond)
    return status


def deployment_complete(d: Obj, status: Obj) -> bool:
    want = replicas(d)
    return (
        int(status.get("updatedReplicas", 0)) == want
        and int(status.get("replicas", 0)) == want
        and int(status.get("availableReplicas", 0)) == want
        and int(status.get("observedGeneration", 0)) >= int(d["metadata"].get("generation", 0))
    )


def deployment_progressing(d: Obj, new: Obj) -> bool:
    old = d.get("status") or {}

    def get(s: Obj, key: str) -> int:
        return int(s.get(key, 0) or 0)

    old_old = get(old, "replicas") - get(old, "updatedReplicas")
    new_old = get(new, "replicas") - get(new, "updatedReplicas")
    return (
        get(new, "updatedReplicas") > get(old, "updatedReplicas")
        or new_old < old_old
        or get(new, "readyReplicas") > get(old, "readyReplicas")
        or get(new, "availableReplicas") > get(old, "availableReplicas")
    )


def _last_update(cond: Obj) -> dt.datetime | None:
    try:
        return parse_time(str(cond.get("lastUpdateTime", "")))
    except ValueError:
        return None


def deployment_timed_out(d: Obj, status: Obj, now: dt.datetime) -> bool:
    deadline = progress_deadline(d)
    if deadline is None:
        return False
    cond = get_condition(status, PROGRESSING)
    if cond is None or cond.get("reason") == NEW_RS_AVAILABLE:
        return False
    if cond.get("reason") == TIMED_OUT:
        return True
    since = _last_update(cond)
    return since is not None and since + dt.timedelta(seconds=deadline) < now


def _replica_failures(all_rss: Sequence[Obj | None], new_rs: Obj | None) -> list[Obj]:
    def failures(rs: Obj | None) -> list[Obj]:
        out = []
        for c in ((rs or {}).get("status") or {}).get("conditions") or []:
            if c.get("type") == REPLICA_FAILURE:
                stamp = c.get("lastTransitionTime", "")
                out.append(
                    {
                        "type": REPLICA_FAILURE,
                        "status": c.get("status"),
                        "lastUpdateTime": stamp,
                        "lastTransitionTime": stamp,
                        "reason": c.get("reason", ""),
                        "message": c.get("message", ""),
                    }
                )
        return out

    found = failures(new_rs)
    if found:
        return found
    return [c for rs in all_rss for c in failures(rs)]


def rollout_status(
    all_rss: Sequence[Obj | None], new_rs: Obj | None, d: Obj, now: dt.datetime
) -> Obj:
    """syncRolloutStatus's new status (wire form): Progressing reflects the rollout."""
    status = calculate_status(all_rss, new_rs, d, now)
    has_deadline = progress_deadline(d) is not None
    if not has_deadline:
        remove_condition(status, PROGRESSING)
    current = get_condition(d.get("status") or {}, PROGRESSING)
    complete_before = (
        status["replicas"] == status["updatedReplicas"]
        and current is not None
        and current.get("reason") == NEW_RS_AVAILABLE
    )
    name = d["metadata"]["name"]
    subject = f'ReplicaSet "{new_rs["metadata"]["name"]}"' if new_rs else f'Deployment "{name}"'
    if has_deadline and not complete_before:
        if deployment_complete(d, status):
            cond = new_condition(
                PROGRESSING,
                "True",
                NEW_RS_AVAILABLE,
                f"{subject} has successfully progressed.",
                now,
            )
            set_condition(status, cond)
        elif deployment_progressing(d, status):
            cond = new_condition(
                PROGRESSING, "True", REPLICA_SET_UPDATED, f"{subject} is progressing.", now
            )
            if current is not None:
                if current.get("status") == "True":
                    cond["lastTransitionTime"] = current.get("lastTransitionTime")
                remove_condition(status, PROGRESSING)
            set_condition(status, cond)
        elif deployment_timed_out(d, status, now):
            cond = new_condition(
                PROGRESSING, "False", TIMED_OUT, f"{subject} has timed out progressing.", now
            )
            set_condition(status, cond)
    failures = _replica_failures(all_rss, new_rs)
    if failures:
        set_condition(status, failures[0])
    else:
        remove_condition(status, REPLICA_FAILURE)
    return wire_status(status)


def status_only(all_rss: Sequence[Obj | None], new_rs: Obj | None, d: Obj, now: dt.datetime) -> Obj:
    """syncDeploymentStatus's new status (wire form)."""
    return wire_status(calculate_status(all_rss, new_rs, d, now))


def requeue_for_progress_check(d: Obj, status: Obj, now: dt.datetime) -> float | None:
    """requeueStuckDeployment: seconds until the next progress check, or None."""
    deadline = progress_deadline(d)
    current = get_condition(d.get("status") or {}, PROGRESSING)
    if deadline is None or current is None:
        return None
    if deployment_complete(d, status) or current.get("reason") == TIMED_OUT:
        return None
    since = _last_update(current)
    if since is None:
        return None
    after = (since + dt.timedelta(seconds=deadline) - now).total_seconds()
    if after < 1:
        # Upstream requeues rate-limited here; a short fixed delay avoids a hot loop.
        return max(after, 0.0) + 0.05
    # Upstream adds a second against sub-second skew in AddAfter.
    return after + 1


def same_status(a: Obj | None, b: Obj | None) -> bool:
    return wire_status(a or {}) == wire_status(b or {})
