"""Scheduler preemption as pure functions, after pkg/scheduler/framework/preemption/preemption.go
and plugins/defaultpreemption/default_preemption.go.

PodDisruptionBudgets are not consulted (every victim counts as non-violating).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

from kubesim.types import Obj

from ..apiserver.meta import parse_time
from .scheduling import UNSCHEDULABLE, FilterFailure, filter_node, fit_error_message, pod_priority

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_ELIGIBLE_POLICY = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"

_FAR_FUTURE = dt.datetime.max.replace(tzinfo=dt.UTC)


@dataclass(frozen=True, slots=True)
class Candidate:
    node: str
    victims: list[Obj] = field(default_factory=list)


def start_time(pod: Obj) -> dt.datetime:
    """`util.GetPodStartTime`: status.startTime; a pod not started yet counts as newest."""
    raw = (pod.get("status") or {}).get("startTime")
    if isinstance(raw, str) and raw:
        try:
            return parse_time(raw)
        except ValueError:
            pass
    return _FAR_FUTURE


def more_important(a: Obj, b: Obj) -> bool:
    """`util.MoreImportantPod`: higher priority, then earlier start."""
    pa, pb = pod_priority(a), pod_priority(b)
    if pa != pb:
        return pa > pb
    return start_time(a) < start_time(b)


def _importance_key(pod: Obj) -> tuple[int, dt.datetime]:
    return (-pod_priority(pod), start_time(pod))


def terminating_by_preemption(pod: Obj) -> bool:
    if not pod["metadata"].get("deletionTimestamp"):
        return False
    return any(
        c.get("type") == "DisruptionTarget"
        and c.get("status") == "True"
        and c.get("reason") == PREEMPTION_BY_SCHEDULER
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def ineligibility(
    pod: Obj, failures: Mapping[str, FilterFailure], pods_by_node: Mapping[str, list[Obj]]
) -> str | None:
    """`PodEligibleToPreemptOthers`: None when the pod may preempt, else the reason."""
    if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
        return NOT_ELIGIBLE_POLICY
    nominated = (pod.get("status") or {}).get("nominatedNodeName") or ""
    if nominated:
        failure = failures.get(nominated)
        if failure is not None and failure.code != UNSCHEDULABLE:
            return None
        priority = pod_priority(pod)
        for other in pods_by_node.get(nominated, []):
            if pod_priority(other) < priority and terminating_by_preemption(other):
                return NOT_ELIGIBLE_TERMINATING
    return None


def select_victims_on_node(
    pod: Obj, node: Obj, node_pods: list[Obj], nominated: list[Obj]
) -> list[Obj] | FilterFailure:
    """`SelectVictimsOnNode`: remove every lower-priority pod, then reprieve the most important."""
    priority = pod_priority(pod)
    potential = [p for p in node_pods if pod_priority(p) < priority]
    if not potential:
        return FilterFailure("UnschedulableAndUnresolvable", (NO_VICTIMS,))
    remaining = [p for p in node_pods if pod_priority(p) >= priority]
    failure = filter_node(pod, node, remaining, nominated)
    if failure is not None:
        return failure
    victims = []
    for candidate in sorted(potential, key=_importance_key):
        if filter_node(pod, node, [*remaining, candidate], nominated) is None:
            remaining.append(candidate)
        else:
            victims.append(candidate)
    return victims


def _earliest_start_of_highest(victims: list[Obj]) -> dt.datetime:
    top = max(pod_priority(v) for v in victims)
    return min(start_time(v) for v in victims if pod_priority(v) == top)


def _min_highest_priority(c: Candidate) -> int:
    return -max(pod_priority(v) for v in c.victims)


def _min_sum_priorities(c: Candidate) -> int:
    return -sum(pod_priority(v) + 2**31 for v in c.victims)  # MaxInt32+1 keeps terms positive


def _min_num_pods(c: Candidate) -> int:
    return -len(c.victims)


def pick_candidate(candidates: list[Candidate]) -> Candidate:
    """`pickOneNodeForPreemption` without PDBs: fewest/least important victims, latest start."""
    for c in candidates:
        if not c.victims:
            return c
    survivors = candidates
    for score in (_min_highest_priority, _min_sum_priorities, _min_num_pods):
        best = max(score(c) for c in survivors)
        survivors = [c for c in survivors if score(c) == best]
        if len(survivors) == 1:
            return survivors[0]
    latest = max(_earliest_start_of_highest(c.victims) for c in survivors)
    return next(c for c in survivors if _earliest_start_of_highest(c.victims) == latest)


def find_candidate(
    pod: Obj,
    nodes: Mapping[str, Obj],
    failures: Mapping[str, FilterFailure],
    pods_by_node: Mapping[str, list[Obj]],
    nominated_by_node: Mapping[str, list[Obj]],
) -> tuple[Candidate | None, str]:
    """Run preemption for an unschedulable pod.

    Returns the chosen candidate, or None and the post-filter message
    ("preemption: ...") to append to the FailedScheduling message.
    """
    reason = ineligibility(pod, failures, pods_by_node)
    if reason is not None:
        return None, f"preemption: {reason}"
    statuses: dict[str, FilterFailure] = {}
    candidates = []
    for name, node in nodes.items():
        failure = failures.get(name)
        if failure is None or failure.code != UNSCHEDULABLE:
            continue  # preemption cannot help where a filter failed for good
        result = select_victims_on_node(
            pod, node, pods_by_node.get(name, []), nominated_by_node.get(name, [])
        )
        if isinstance(result, FilterFailure):
            statuses[name] = result
        else:
            candidates.append(Candidate(name, result))
    if candidates:
        return pick_candidate(candidates), ""
    message = fit_error_message(len(nodes), statuses, absent_reason=NOT_HELPFUL)
    return None, f"preemption: {message}"
