"""Pure pod predicates the workload controllers share, after pkg/api/v1/pod/util.go and
pkg/controller/controller_utils.go (`IsPodActive`, `ActivePodsWithRanks`).
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Sequence
from typing import Any

from kubesim.types import Obj

from ..apiserver.meta import parse_time

DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def condition(pod: Obj, type_: str) -> Obj | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


def is_pod_ready(pod: Obj) -> bool:
    cond = condition(pod, "Ready")
    return cond is not None and cond.get("status") == "True"


def is_terminating(pod: Obj) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def is_pod_active(pod: Obj) -> bool:
    """Not terminal and not being deleted: what a ReplicaSet counts as one of its replicas."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not is_terminating(pod)


def _time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


def ready_since(pod: Obj) -> dt.datetime | None:
    """When the pod last became Ready (the Ready condition's lastTransitionTime), if it is."""
    if not is_pod_ready(pod):
        return None
    cond = condition(pod, "Ready")
    return _time(cond.get("lastTransitionTime")) if cond else None


def seconds_until_available(pod: Obj, min_ready_seconds: int, now: dt.datetime) -> float | None:
    """0 if available now, the seconds left if Ready but not yet for minReadySeconds, else None.

    IsPodAvailable: Ready, and either minReadySeconds is 0 or the Ready transition plus
    minReadySeconds is strictly before now.
    """
    if not is_pod_ready(pod):
        return None
    if min_ready_seconds <= 0:
        return 0.0
    since = ready_since(pod)
    if since is None:
        return None
    available_at = since + dt.timedelta(seconds=min_ready_seconds)
    if available_at < now:
        return 0.0
    # "Before" is strict: available one tick after the boundary.
    return (available_at - now).total_seconds() + 0.001


def is_pod_available(pod: Obj, min_ready_seconds: int, now: dt.datetime) -> bool:
    return seconds_until_available(pod, min_ready_seconds, now) == 0.0


def _deletion_cost(pod: Obj) -> int:
    raw = (pod["metadata"].get("annotations") or {}).get(DELETION_COST_ANNOTATION)
    try:
        value = int(str(raw).strip()) if raw is not None else 0
    except ValueError:
        return 0
    return value if _INT32_MIN <= value <= _INT32_MAX else 0


def _max_restarts(pod: Obj) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return max(
        (int(s.get("restartCount") or 0) for s in statuses if isinstance(s, dict)), default=0
    )


def _after_or_zero(t1: dt.datetime | None, t2: dt.datetime | None) -> bool:
    if t1 is None or t2 is None:
        return t1 is None
    return t1 > t2


def _log_rank_diff(t1: dt.datetime, t2: dt.datetime, now: dt.datetime) -> int:
    def rank(t: dt.datetime) -> int:
        nanos = (now - t) / dt.timedelta(microseconds=1) * 1000
        return int(math.log2(nanos)) if nanos > 0 else -1

    return rank(t1) - rank(t2)


def _compare_times(
    a: Obj, b: Obj, ta: dt.datetime | None, tb: dt.datetime | None, now: dt.datetime
) -> bool | None:
    """LogarithmicScaleDown comparison of two timestamps; None when they are equal."""
    if ta == tb:
        return None
    if ta is None or tb is None:
        return _after_or_zero(ta, tb)
    diff = _log_rank_diff(ta, tb, now)
    if diff == 0:
        return bool(a["metadata"].get("uid", "") < b["metadata"].get("uid", ""))
    return diff < 0


def _less(a: Obj, b: Obj, rank_a: int, rank_b: int, now: dt.datetime) -> bool:
    """ActivePodsWithRanks.Less: True if `a` should be deleted before `b`."""
    node_a = (a.get("spec") or {}).get("nodeName") or ""
    node_b = (b.get("spec") or {}).get("nodeName") or ""
    # 1. unassigned < assigned
    if node_a != node_b and (not node_a or not node_b):
        return not node_a
    # 2. Pending < Unknown < Running
    phase_a = _PHASE_ORDINAL.get((a.get("status") or {}).get("phase", ""), 0)
    phase_b = _PHASE_ORDINAL.get((b.get("status") or {}).get("phase", ""), 0)
    if phase_a != phase_b:
        return phase_a < phase_b
    # 3. not ready < ready
    ready_a, ready_b = is_pod_ready(a), is_pod_ready(b)
    if ready_a != ready_b:
        return not ready_a
    # 4. lower pod-deletion-cost < higher
    cost_a, cost_b = _deletion_cost(a), _deletion_cost(b)
    if cost_a != cost_b:
        return cost_a < cost_b
    # 5. doubled up (more related pods on the same node) < not doubled up
    if rank_a != rank_b:
        return rank_a > rank_b
    # 6. ready for less time < more time (logarithmic buckets)
    if ready_a and ready_b:
        decided = _compare_times(a, b, ready_since(a), ready_since(b), now)
        if decided is not None:
            return decided
    # 7. more container restarts < fewer
    restarts_a, restarts_b = _max_restarts(a), _max_restarts(b)
    if restarts_a != restarts_b:
        return restarts_a > restarts_b
    # 8. newer < older (logarithmic buckets)
    created_a = _time(a["metadata"].get("creationTimestamp"))
    created_b = _time(b["metadata"].get("creationTimestamp"))
    decided = _compare_times(a, b, created_a, created_b, now)
    return bool(decided)


def pods_to_delete(
    candidates: Sequence[Obj], related: Sequence[Obj], count: int, now: dt.datetime
) -> list[Obj]:
    """The `count` pods a ReplicaSet deletes first (replicaset.getPodsToDelete).

    `related` are the active pods of every ReplicaSet of the same owner; a pod's rank is
    how many of them share its node.
    """
    if count >= len(candidates):
        return list(candidates)
    on_node: dict[str, int] = {}
    for pod in related:
        if is_pod_active(pod):
            node = (pod.get("spec") or {}).get("nodeName") or ""
            on_node[node] = on_node.get(node, 0) + 1
    ranked = [
        (pod, on_node.get((pod.get("spec") or {}).get("nodeName") or "", 0)) for pod in candidates
    ]

    def compare(x: tuple[Obj, int], y: tuple[Obj, int]) -> int:
        if _less(x[0], y[0], x[1], y[1], now):
            return -1
        if _less(y[0], x[0], y[1], x[1], now):
            return 1
        return 0

    ranked.sort(key=functools.cmp_to_key(compare))
    return [pod for pod, _ in ranked[:count]]
