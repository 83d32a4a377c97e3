"""The pure decisions of the eviction subresource (pkg/registry/core/pod/storage/eviction.go)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.apiserver.errors import ApiError
from kubesim.apiserver.eviction import (
    TOO_MANY_REQUESTS_MESSAGE,
    _propagate_dry_run,
    can_ignore_pdb,
    check_and_decrement,
    matching_pdbs,
    unhealthy_pod_may_go,
    with_disruption_target,
)

NOW = dt.datetime(2026, 5, 1, 12, 0, 0, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(minutes=5)


def budget(generation: int = 1, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "shop", "generation": generation},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
        "status": {"observedGeneration": 1, "currentHealthy": 2, "desiredHealthy": 1, **status},
    }


def pod(phase: str | None = "Running", ready: bool = True, terminating: bool = False,
        labels: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": "web-1", "namespace": "shop"}
    meta["labels"] = labels or {"app": "web"}
    if terminating:
        meta["deletionTimestamp"] = "2026-05-01T12:00:30Z"
    status: dict[str, Any] = {"conditions": [{"type": "Ready", "status": str(ready)}]}
    if phase is not None:
        status["phase"] = phase
    return {"metadata": meta, "status": status}


@pytest.mark.parametrize(
    ("the_pod", "ignorable"),
    [
        (pod("Running"), False),
        (pod("Succeeded"), True),
        (pod("Failed"), True),
        (pod("Pending"), True),
        (pod(None), True),  # no phase yet: upstream would say Pending
        (pod("Running", terminating=True), True),
        (pod("Unknown"), False),
    ],
)
def test_can_ignore_pdb(the_pod: dict[str, Any], ignorable: bool) -> None:
    assert can_ignore_pdb(the_pod) is ignorable


@pytest.mark.parametrize(
    ("case", "the_budget", "cause", "retry_after"),
    [
        ("not observed yet", budget(generation=2, disruptionsAllowed=1),
         "The disruption budget web is still being processed by the server.", 10),
        ("no disruption left", budget(disruptionsAllowed=0),
         "The disruption budget web needs 1 healthy pods and has 2 currently", None),
    ],
)  # fmt: skip
def test_check_and_decrement_refuses_with_429(
    case: str, the_budget: dict[str, Any], cause: str, retry_after: int | None
) -> None:
    with pytest.raises(ApiError) as err:
        check_and_decrement(the_budget, "web-1", False, NOW)
    assert (err.value.code, err.value.reason, err.value.message) == (
        429, "TooManyRequests", TOO_MANY_REQUESTS_MESSAGE)  # fmt: skip
    assert err.value.details is not None
    assert err.value.details["causes"] == [{"reason": "DisruptionBudget", "message": cause}]
    assert err.value.details.get("retryAfterSeconds") == retry_after, case


@pytest.mark.parametrize(
    ("the_budget", "why"),
    [
        (budget(disruptionsAllowed=-1), "pdb disruptions allowed is negative"),
        (budget(disruptionsAllowed=1, disruptedPods={f"p{i}": "t" for i in range(2001)}),
         "DisruptedPods map too big - too many evictions not confirmed by PDB controller"),
    ],
)  # fmt: skip
def test_check_and_decrement_forbids_broken_budgets(the_budget: dict[str, Any], why: str) -> None:
    with pytest.raises(ApiError) as err:
        check_and_decrement(the_budget, "web-1", False, NOW)
    assert err.value.code == 403
    assert err.value.message == f'poddisruptionbudget.policy "web" is forbidden: {why}'


def test_check_and_decrement_spends_one_and_records_the_pod() -> None:
    updated = check_and_decrement(budget(disruptionsAllowed=1), "web-1", False, NOW)
    assert updated is not None
    status = updated["status"]
    assert status["disruptionsAllowed"] == 0
    assert status["disruptedPods"] == {"web-1": "2026-05-01T12:00:00Z"}
    assert status["conditions"] == [{
        "type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
        "message": "", "observedGeneration": 1, "lastTransitionTime": "2026-05-01T12:00:00Z",
    }]  # fmt: skip


def test_check_and_decrement_dry_run_writes_nothing() -> None:
    original = budget(disruptionsAllowed=1)
    assert check_and_decrement(original, "web-1", True, NOW) is None
    assert original["status"]["disruptionsAllowed"] == 1


@given(st.integers(min_value=1, max_value=50))
def test_each_eviction_spends_exactly_one(allowed: int) -> None:
    updated = check_and_decrement(budget(disruptionsAllowed=allowed), "web-1", False, NOW)
    assert updated is not None and updated["status"]["disruptionsAllowed"] == allowed - 1


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ({"matchLabels": {"app": "web"}}, {"app": "web"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
        ({}, {"app": "db"}, True),  # policy/v1: an empty selector selects the whole namespace
        (None, {"app": "web"}, False),  # a null selector selects nothing
        ({"matchExpressions": [{"key": "app", "operator": "Bogus"}]}, {"app": "web"}, False),
    ],
)
def test_matching_pdbs(selector: Any, labels: dict[str, str], matches: bool) -> None:
    the_budget = budget()
    the_budget["spec"]["selector"] = selector
    other_namespace = budget()
    other_namespace["metadata"]["namespace"] = "elsewhere"
    found = matching_pdbs([the_budget, other_namespace], pod(labels=labels))
    assert found == ([the_budget] if matches else [])


@pytest.mark.parametrize(
    ("ready", "policy", "current", "desired", "may_go"),
    [
        (True, "AlwaysAllow", 0, 1, False),  # a ready pod is always guarded
        (False, "AlwaysAllow", 0, 1, True),
        (False, "IfHealthyBudget", 1, 1, True),
        (False, None, 1, 1, True),
        (False, None, 0, 1, False),  # the application is already disrupted
        (False, None, 0, 0, False),
    ],
)
def test_unhealthy_pod_eviction_policy(
    ready: bool, policy: str | None, current: int, desired: int, may_go: bool
) -> None:
    the_budget = budget(currentHealthy=current, desiredHealthy=desired)
    if policy is not None:
        the_budget["spec"]["unhealthyPodEvictionPolicy"] = policy
    assert unhealthy_pod_may_go(pod(ready=ready), the_budget) is may_go


def test_disruption_target_condition_keeps_its_transition_time() -> None:
    first = with_disruption_target(pod(), NOW)
    target = first["status"]["conditions"][-1]
    assert target == {
        "type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
        "lastTransitionTime": "2026-05-01T12:00:00Z", "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
    }  # fmt: skip
    assert with_disruption_target(first, LATER) == first


@pytest.mark.parametrize(
    ("body_options", "request_dry_run", "expected"),
    [
        (None, False, {}),
        (None, True, {"dryRun": ["All"]}),
        ({"gracePeriodSeconds": 0}, True, {"gracePeriodSeconds": 0, "dryRun": ["All"]}),
        ({"dryRun": ["All"]}, False, {"dryRun": ["All"]}),
        ({"dryRun": ["All"]}, True, {"dryRun": ["All"]}),
    ],
)
def test_propagate_dry_run(
    body_options: dict[str, Any] | None, request_dry_run: bool, expected: dict[str, Any]
) -> None:
    eviction: dict[str, Any] = {"metadata": {"name": "web-1"}}
    if body_options is not None:
        eviction["deleteOptions"] = body_options
    assert _propagate_dry_run(eviction, request_dry_run) == expected


def test_propagate_dry_run_refuses_conflicting_values() -> None:
    eviction = {"metadata": {"name": "web-1"}, "deleteOptions": {"dryRun": ["Some"]}}
    with pytest.raises(ApiError) as err:
        _propagate_dry_run(eviction, True)
    assert err.value.message == (
        "Internal error occurred: Non-matching dry-run options in request and content: "
        "[All] and [Some]"
    )
