"""Karpenter's pod rules for draining a node (pure).

After kubernetes-sigs/karpenter pkg/utils/pod/scheduling.go (IsEvictable,
IsWaitingEviction, IsDrainable, IsStuckTerminating) and
pkg/controllers/node/termination/terminator/terminator.go (Evict's priority
groups, podDeleteTimeWithGracePeriod) and eviction.go (the eviction queue's
exponential failure rate limiter, 100 ms to 10 s).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence

from kubesim.types import Obj

from ..apiserver.meta import parse_time
from .taints import pod_tolerates

DISRUPTED_TAINT: Obj = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}
EXCLUDE_BALANCERS_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
CRITICAL_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")
STUCK_TERMINATING_AFTER = dt.timedelta(minutes=1)


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded")


def is_terminating(pod: Obj) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def is_active(pod: Obj) -> bool:
    return not is_terminal(pod) and not is_terminating(pod)


def is_owned_by(pod: Obj, api_version: str, kind: str) -> bool:
    return any(
        ref.get("apiVersion") == api_version and ref.get("kind") == kind
        for ref in pod["metadata"].get("ownerReferences") or []
    )


def is_owned_by_daemonset(pod: Obj) -> bool:
    return is_owned_by(pod, "apps/v1", "DaemonSet")


def is_owned_by_node(pod: Obj) -> bool:
    """A static pod's mirror: its owner is the Node."""
    return is_owned_by(pod, "v1", "Node")


def tolerates_disrupted_taint(pod: Obj) -> bool:
    return pod_tolerates(pod, DISRUPTED_TAINT)


def has_do_not_disrupt(pod: Obj) -> bool:
    annotations = pod["metadata"].get("annotations") or {}
    return annotations.get(DO_NOT_DISRUPT) == "true"


def is_stuck_terminating(pod: Obj, now: dt.datetime) -> bool:
    stamp = pod["metadata"].get("deletionTimestamp")
    return bool(stamp) and now - parse_time(stamp) > STUCK_TERMINATING_AFTER


def is_drainable(pod: Obj, now: dt.datetime) -> bool:
    return (
        not tolerates_disrupted_taint(pod)
        and not is_stuck_terminating(pod, now)
        and not is_owned_by_node(pod)
    )


def is_waiting_eviction(pod: Obj, now: dt.datetime) -> bool:
    return not is_terminal(pod) and is_drainable(pod, now)


def is_evictable(pod: Obj) -> bool:
    return (
        is_active(pod)
        and not tolerates_disrupted_taint(pod)
        and not is_owned_by_node(pod)
        and not has_do_not_disrupt(pod)
    )


def first_eviction_group(pods: Iterable[Obj]) -> list[Obj]:
    """Terminator.Evict: only the first non-empty group is queued on each pass —
    non-critical non-DaemonSet, non-critical DaemonSet, critical non-DaemonSet, critical DaemonSet.
    """
    groups: list[list[Obj]] = [[], [], [], []]
    for pod in pods:
        critical = (pod.get("spec") or {}).get("priorityClassName") in CRITICAL_PRIORITY_CLASSES
        groups[2 * critical + is_owned_by_daemonset(pod)].append(pod)
    return next((group for group in groups if group), [])


def pod_delete_time(node_expiration: float, pod: Obj) -> float | None:
    """When a pod must be deleted to get its whole grace period before the node expires."""
    grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    if grace is None:
        return None
    return node_expiration - float(grace)


def pods_waiting(pods: Sequence[Obj], now: dt.datetime) -> list[Obj]:
    return [pod for pod in pods if is_waiting_eviction(pod, now)]
