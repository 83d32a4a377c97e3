"""Cluster Autoscaler's choice of pods to evict from a node being scaled down (pure).

After kubernetes/autoscaler cluster-autoscaler/core/scaledown/actuation/drain.go
(podsToEvict, evictPod's grace period) and utils/daemonset (PodsToEvict).
"""

from __future__ import annotations

from collections.abc import Iterable

from kubesim.types import Obj

TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
DAEMONSET_POD_ANNOTATION = "cluster-autoscaler.kubernetes.io/daemonset-pod"
ENABLE_DS_EVICTION_ANNOTATION = "cluster-autoscaler.kubernetes.io/enable-ds-eviction"
DEFAULT_TERMINATION_GRACE_PERIOD = 30  # core/v1 DefaultTerminationGracePeriodSeconds


def _annotations(pod: Obj) -> dict[str, str]:
    return pod["metadata"].get("annotations") or {}


def is_mirror_pod(pod: Obj) -> bool:
    return MIRROR_POD_ANNOTATION in _annotations(pod)


def is_daemonset_pod(pod: Obj) -> bool:
    refs = pod["metadata"].get("ownerReferences") or []
    if any(ref.get("controller") and ref.get("kind") == "DaemonSet" for ref in refs):
        return True
    return _annotations(pod).get(DAEMONSET_POD_ANNOTATION) == "true"


def daemonset_pods_to_evict(pods: Iterable[Obj], evict_by_default: bool) -> list[Obj]:
    chosen = []
    for pod in pods:
        flag = _annotations(pod).get(ENABLE_DS_EVICTION_ANNOTATION)
        if (flag == "true") if flag is not None else evict_by_default:
            chosen.append(pod)
    return chosen


def pods_to_evict(pods: Iterable[Obj], evict_daemonsets: bool) -> tuple[list[Obj], list[Obj]]:
    """(DaemonSet pods evicted best effort, other pods that must go); mirror pods stay."""
    daemon: list[Obj] = []
    other: list[Obj] = []
    for pod in pods:
        if is_mirror_pod(pod):
            continue
        (daemon if is_daemonset_pod(pod) else other).append(pod)
    return daemonset_pods_to_evict(daemon, evict_daemonsets), other


def eviction_grace_period(pod: Obj, max_termination: int) -> int:
    """The pod's terminationGracePeriodSeconds (30 when unset), capped at max_termination."""
    grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    termination = DEFAULT_TERMINATION_GRACE_PERIOD if grace is None else int(grace)
    if max_termination > 0 and termination > max_termination:
        return max_termination
    return termination


def go_error_slice(messages: Iterable[str]) -> str:
    """Go's `%v` of a `[]error`: the messages space-separated inside brackets."""
    return "[" + " ".join(messages) + "]"
