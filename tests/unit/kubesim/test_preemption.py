"""Scheduler preemption decisions (pure), after default_preemption.go."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.cluster.preemption import (
    NOT_ELIGIBLE_POLICY,
    NOT_ELIGIBLE_TERMINATING,
    Candidate,
    find_candidate,
    ineligibility,
    more_important,
    pick_candidate,
    select_victims_on_node,
)
from kubesim.cluster.scheduling import UNRESOLVABLE, UNSCHEDULABLE, FilterFailure, filter_node

Obj = dict[str, Any]


def node(name: str = "n1", cpu: str = "2") -> Obj:
    return {"metadata": {"name": name}, "spec": {},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}  # fmt: skip


def pod(name: str, cpu: str, priority: int = 0, started: str = "2024-01-01T00:00:00Z",
        **spec: Any) -> Obj:  # fmt: skip
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"priority": priority, **spec,
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Running", "startTime": started},
    }  # fmt: skip


def names(pods: list[Obj]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def test_more_important_is_priority_then_earlier_start() -> None:
    early, late = "2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z"
    assert more_important(pod("a", "1", 10), pod("b", "1", 5))
    assert more_important(pod("a", "1", 5, early), pod("b", "1", 5, late))
    assert not more_important(pod("a", "1", 5, late), pod("b", "1", 5, early))


def test_victims_are_the_fewest_least_important_pods() -> None:
    on_node = [pod("low-old", "500m", 1, "2024-01-01T00:00:00Z"),
               pod("low-new", "500m", 1, "2024-01-02T00:00:00Z"),
               pod("lowest", "500m", 0),
               pod("equal", "500m", 100)]  # fmt: skip
    victims = select_victims_on_node(pod("p", "1", 100), node(), on_node, [])
    # every lower-priority pod is removed, then the most important are reprieved while it fits
    assert isinstance(victims, list)
    assert names(victims) == ["low-new", "lowest"]


def test_no_lower_priority_pods_means_no_victims() -> None:
    result = select_victims_on_node(pod("p", "1", 5), node(), [pod("x", "2", 5)], [])
    assert result == FilterFailure(UNRESOLVABLE, ("No preemption victims found for incoming pod",))


def test_a_node_too_small_even_when_emptied_reports_the_filter() -> None:
    result = select_victims_on_node(pod("p", "3", 5), node(), [pod("x", "1", 0)], [])
    assert result == FilterFailure(UNSCHEDULABLE, ("Insufficient cpu",))


@pytest.mark.parametrize(
    ("candidates", "chosen"),
    [
        ([Candidate("a", [pod("x", "1", 5)]), Candidate("b", [])], "b"),
        ([Candidate("a", [pod("x", "1", 5)]), Candidate("b", [pod("y", "1", 3)])], "b"),
        ([Candidate("a", [pod("x", "1", 3), pod("y", "1", 3)]),
          Candidate("b", [pod("z", "1", 3), pod("w", "1", 2)])], "b"),  # smaller priority sum
        ([Candidate("a", [pod("x", "1", 3), pod("y", "1", -5)]),
          Candidate("b", [pod("z", "1", 3)])], "b"),  # each victim adds MaxInt32+1 to the sum
        ([Candidate("a", [pod("x", "1", 3, "2024-01-01T00:00:00Z")]),
          Candidate("b", [pod("y", "1", 3, "2024-03-01T00:00:00Z")])], "b"),  # latest start
        ([Candidate("a", [pod("x", "1", 3)]), Candidate("b", [pod("y", "1", 3)])], "a"),
    ],
)  # fmt: skip
def test_pick_candidate(candidates: list[Candidate], chosen: str) -> None:
    assert pick_candidate(candidates).node == chosen


def test_ineligible_with_preemption_policy_never() -> None:
    assert ineligibility(pod("p", "1", 9, preemptionPolicy="Never"), {}, {}) == NOT_ELIGIBLE_POLICY


def test_ineligible_while_a_victim_is_terminating_on_the_nominated_node() -> None:
    preemptor = pod("p", "1", 9)
    preemptor["status"]["nominatedNodeName"] = "n1"
    victim = pod("v", "1", 0)
    victim["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    victim["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                       "reason": "PreemptionByScheduler"}]  # fmt: skip
    failures = {"n1": FilterFailure(UNSCHEDULABLE, ("Insufficient cpu",))}
    assert ineligibility(preemptor, failures, {"n1": [victim]}) == NOT_ELIGIBLE_TERMINATING
    assert ineligibility(preemptor, failures, {"n1": []}) is None


def test_find_candidate_and_the_messages_when_it_cannot_help() -> None:
    nodes = {"full": node("full"), "cordoned": node("cordoned"), "equal": node("equal")}
    pods_by_node = {"full": [pod("low", "2", 0)], "equal": [pod("peer", "2", 10)]}
    failures = {
        "full": FilterFailure(UNSCHEDULABLE, ("Insufficient cpu",)),
        "cordoned": FilterFailure(UNRESOLVABLE, ("node(s) were unschedulable",)),
        "equal": FilterFailure(UNSCHEDULABLE, ("Insufficient cpu",)),
    }
    candidate, message = find_candidate(pod("p", "1", 10), nodes, failures, pods_by_node, {})
    assert candidate is not None
    assert (candidate.node, names(candidate.victims), message) == ("full", ["low"], "")

    del pods_by_node["full"]
    candidate, message = find_candidate(pod("p", "1", 10), nodes, failures, pods_by_node, {})
    assert candidate is None
    assert message == (
        "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod."
    )


def test_victim_selection_keeps_the_filters_view() -> None:
    # after preemption the pod really fits on the node once the victims are gone
    on_node = [pod("a", "1", 0), pod("b", "1", 0)]
    victims = select_victims_on_node(pod("p", "1", 1), node(), on_node, [])
    assert isinstance(victims, list)
    remaining = [p for p in on_node if p not in victims]
    assert len(victims) == 1
    assert filter_node(pod("p", "1", 1), node(), remaining) is None
