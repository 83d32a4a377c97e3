"""PodDisruptionBudget status as disruption.go computes it, and LabelSelector matching."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.apiserver.meta import rfc3339
from kubesim.cluster import pdb_status as ps
from kubesim.cluster.labels import selector_matches, selects_everything

Obj = dict[str, Any]
NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def pdb(generation: int = 1, status: Obj | None = None, **spec: Any) -> Obj:
    return {
        "metadata": {"name": "budget", "namespace": "default", "generation": generation},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
        "status": status or {},
    }


def pod(name: str, ready: bool = True, deleting: bool = False, labels: Obj | None = None) -> Obj:
    meta: Obj = {
        "name": name,
        "namespace": "default",
        "labels": {"app": "web"} if labels is None else labels,
    }
    if deleting:
        meta["deletionTimestamp"] = rfc3339(NOW)
    return {
        "metadata": meta,
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


@pytest.mark.parametrize(
    ("spec", "pods", "scale", "expected"),
    [
        ({"minAvailable": 1}, 1, 1, (1, 1)),
        ({"minAvailable": 2}, 3, 5, (3, 2)),  # an int minAvailable counts pods, not the scale
        ({"maxUnavailable": 0}, 1, 1, (1, 1)),
        ({"maxUnavailable": 1}, 3, 3, (3, 2)),
        ({"maxUnavailable": 5}, 3, 3, (3, 0)),  # never below zero
        ({"minAvailable": "50%"}, 3, 3, (3, 2)),  # 1.5 rounds up
        ({"minAvailable": "50%"}, 1, 1, (1, 1)),
        ({"maxUnavailable": "50%"}, 3, 3, (3, 1)),  # 1.5 rounds up: 2 may be unavailable
        ({"maxUnavailable": "34%"}, 3, 3, (3, 1)),
        ({"minAvailable": "0%"}, 3, 3, (3, 0)),
        ({}, 3, 3, (0, 0)),
    ],
)
def test_expected_and_desired(spec: Obj, pods: int, scale: int, expected: tuple[int, int]) -> None:
    assert ps.expected_and_desired(pdb(**spec), pods, scale) == expected


def test_which_budgets_need_the_controllers_scale() -> None:
    assert ps.needs_controller_scale(pdb(maxUnavailable=0))
    assert ps.needs_controller_scale(pdb(minAvailable="10%"))
    assert not ps.needs_controller_scale(pdb(minAvailable=1))


def test_healthy_pods_are_ready_not_terminating_not_just_evicted() -> None:
    pods = [pod("a"), pod("b", ready=False), pod("c", deleting=True), pod("d")]
    disrupted = {"d": rfc3339(NOW - dt.timedelta(seconds=10))}
    assert ps.count_healthy(pods, disrupted, NOW) == 1
    # An eviction older than the timeout no longer excuses the pod.
    assert ps.count_healthy(pods, disrupted, NOW, timeout=5) == 2


def test_disrupted_pods_are_pruned_when_gone_terminating_or_overdue() -> None:
    recorded = {
        "gone": rfc3339(NOW),
        "terminating": rfc3339(NOW),
        "fresh": rfc3339(NOW - dt.timedelta(seconds=30)),
        "overdue": rfc3339(NOW - dt.timedelta(seconds=121)),
    }
    budget = pdb(status={"disruptedPods": recorded})
    pods = [pod("terminating", deleting=True), pod("fresh"), pod("overdue")]
    result = ps.build_disrupted_pods(pods, budget, NOW)
    assert result.kept == {"fresh": recorded["fresh"]}
    assert result.overdue == ["overdue"]
    assert result.recheck_at == NOW + dt.timedelta(seconds=90)


def test_new_status_and_condition() -> None:
    budget = pdb(generation=3)
    status = ps.new_status(
        budget, current_healthy=3, desired_healthy=1, expected=3, disrupted={}, now=NOW
    )
    assert status == {
        "observedGeneration": 3,
        "disruptionsAllowed": 2,
        "currentHealthy": 3,
        "desiredHealthy": 1,
        "expectedPods": 3,
        "conditions": [
            {
                "type": "DisruptionAllowed",
                "status": "True",
                "reason": "SufficientPods",
                "message": "",
                "observedGeneration": 3,
                "lastTransitionTime": rfc3339(NOW),
            }
        ],
    }
    budget["status"] = status
    assert ps.new_status(budget, 3, 1, 3, {}, NOW) is None  # nothing to write


def test_no_expected_pods_means_no_disruptions() -> None:
    status = ps.new_status(
        pdb(), current_healthy=2, desired_healthy=0, expected=0, disrupted={}, now=NOW
    )
    assert status is not None and status["disruptionsAllowed"] == 0
    assert status["conditions"][0]["reason"] == "InsufficientPods"


def test_condition_transition_time_moves_only_with_the_status() -> None:
    earlier = NOW - dt.timedelta(hours=1)
    budget = pdb()
    first = ps.new_status(budget, 2, 1, 2, {}, earlier)
    assert first is not None
    budget["status"] = first
    second = ps.new_status(budget, 1, 1, 2, {}, NOW)
    assert second is not None
    [cond] = second["conditions"]
    assert (cond["status"], cond["reason"], cond["lastTransitionTime"]) == (
        "False",
        "InsufficientPods",
        rfc3339(NOW),
    )


def test_fail_safe_allows_no_disruption() -> None:
    budget = pdb(status={"disruptionsAllowed": 3, "observedGeneration": 1, "expectedPods": 3})
    status = ps.fail_safe_status(budget, 'found no controllers for pod "x"', NOW)
    assert status["disruptionsAllowed"] == 0
    [cond] = status["conditions"]
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False",
        "SyncFailed",
        'found no controllers for pod "x"',
    )


def test_pdbs_for_pod() -> None:
    a = pdb()
    a["metadata"]["name"] = "b-budget"
    everything = {"metadata": {"name": "a-all", "namespace": "default"}, "spec": {"selector": {}}}
    nothing = {"metadata": {"name": "none", "namespace": "default"}, "spec": {}}
    other_ns = {"metadata": {"name": "x", "namespace": "other"}, "spec": {"selector": {}}}
    found = ps.pdbs_for_pod([a, everything, nothing, other_ns], pod("p"))
    assert [p["metadata"]["name"] for p in found] == ["a-all", "b-budget"]
    assert ps.pdbs_for_pod([everything], pod("p", labels={})) == []  # unlabelled: none


def test_go_label_selector_string() -> None:
    selector = {
        "matchLabels": {"b": "2", "a": "1"},
        "matchExpressions": [{"key": "k", "operator": "In", "values": ["x", "y"]}],
    }
    assert ps.go_label_selector(selector) == (
        "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:"
        "[]LabelSelectorRequirement{LabelSelectorRequirement{Key:k,Operator:In,Values:[x y],},},}"
    )


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        (None, {"app": "web"}, False),
        ({}, {}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
        (
            {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}]},
            {"app": "db"},
            True,
        ),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, {}, True),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {"app": ""}, True),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"app": "x"}, False),
        (
            {"matchExpressions": [{"key": "app", "operator": "In", "values": []}]},
            {"app": ""},
            False,
        ),
        (
            {"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]},
            {"app": "2"},
            False,
        ),
    ],
)
def test_label_selector_objects(selector: Any, labels: dict[str, str], matches: bool) -> None:
    assert selector_matches(selector, labels) is matches


def test_selects_everything() -> None:
    assert selects_everything({}) and selects_everything({"matchLabels": {}})
    assert not selects_everything(None)
    assert not selects_everything({"matchLabels": {"a": "b"}})


@given(st.integers(0, 50), st.integers(0, 50), st.integers(0, 100))
def test_disruptions_allowed_is_never_negative_and_zero_without_expected_pods(
    healthy: int, pods: int, percent: int
) -> None:
    budget = pdb(maxUnavailable=f"{percent}%")
    expected, desired = ps.expected_and_desired(budget, pods, pods)
    status = ps.new_status(budget, healthy, desired, expected, {}, NOW)
    assert status is not None
    assert status["disruptionsAllowed"] >= 0
    assert 0 <= desired <= expected
    if expected == 0:
        assert status["disruptionsAllowed"] == 0
