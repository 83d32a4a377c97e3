"""The detection deadline: from the grace period, only ever brought forward."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.termination.budget import (
    DEFAULT_DEADLINE_SECONDS,
    DETECTION_SHARE,
    Deadline,
    collection_budget,
    pod_grace_period_seconds,
)


@pytest.mark.parametrize(
    ("grace", "requested", "budget"),
    [
        (30, None, DEFAULT_DEADLINE_SECONDS),  # the default deadline fits in a 30 s grace
        (30, 20.0, 15.0),  # never more than half the grace period
        (30, 1.0, 1.0),
        (4, None, 2.0),
        (1, None, 0.5),  # a hard-threshold eviction's 1 s
        (0, None, 0.0),  # no time at all: nothing is read, the fallback answers
        (-5, 3.0, 0.0),
        (3600, None, DEFAULT_DEADLINE_SECONDS),
    ],
)
def test_collection_budget(grace: int, requested: float | None, budget: float) -> None:
    assert collection_budget(grace, requested) == budget


@given(
    grace=st.floats(min_value=-10, max_value=1e6, allow_nan=False),
    requested=st.none() | st.floats(min_value=0, max_value=1e6, allow_nan=False),
)
def test_budget_is_bounded_by_the_request_and_half_the_grace(
    grace: float, requested: float | None
) -> None:
    budget = collection_budget(grace, requested)
    assert 0.0 <= budget <= (DEFAULT_DEADLINE_SECONDS if requested is None else requested)
    assert budget <= max(grace, 0.0) * DETECTION_SHARE


@given(
    grace=st.floats(min_value=0, max_value=1e5, allow_nan=False),
    more=st.floats(min_value=0, max_value=1e5, allow_nan=False),
)
def test_budget_never_shrinks_with_a_longer_grace_period(grace: float, more: float) -> None:
    assert collection_budget(grace + more) >= collection_budget(grace)


@pytest.mark.parametrize(
    ("raw", "grace"),
    [
        ({"spec": {"terminationGracePeriodSeconds": 45}}, 45),
        (
            {"metadata": {"deletionGracePeriodSeconds": 5},
             "spec": {"terminationGracePeriodSeconds": 45}},
            5,
        ),  # the deletion in progress shortened it
        ({"metadata": {"deletionGracePeriodSeconds": 0}}, 0),
        ({"spec": {"terminationGracePeriodSeconds": "45"}}, None),  # wrong type reads as absent
        ({"spec": {"terminationGracePeriodSeconds": -1}}, None),
        ({}, None),
        (None, None),
    ],
)  # fmt: skip
def test_pod_grace_period(raw: object, grace: int | None) -> None:
    assert pod_grace_period_seconds(raw) == grace


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_deadline_counts_from_its_start() -> None:
    clock = FakeClock()
    deadline = Deadline(5.0, started_at=98.0, clock=clock)
    assert deadline.remaining() == 3.0
    clock.now = 104.0
    assert deadline.remaining() == 0.0
    assert deadline.budget_seconds == 5.0


@given(
    budget=st.floats(min_value=0, max_value=1e4, allow_nan=False),
    tightenings=st.lists(st.floats(min_value=-10, max_value=1e4, allow_nan=False), max_size=5),
)
def test_a_deadline_is_only_ever_brought_forward(budget: float, tightenings: list[float]) -> None:
    deadline = Deadline(budget, started_at=0.0, clock=FakeClock(0.0))
    previous = deadline.budget_seconds
    for tightening in tightenings:
        deadline.tighten(tightening)
        assert 0.0 <= deadline.budget_seconds <= previous
        assert deadline.budget_seconds <= max(tightening, 0.0)
        previous = deadline.budget_seconds


def test_the_budget_reads_back_exactly_on_a_clock_far_from_zero() -> None:
    deadline = Deadline(60.0, started_at=4731.2, clock=lambda: 4731.2)
    assert deadline.budget_seconds == 60.0
    deadline.tighten(2.5)
    assert deadline.budget_seconds == 2.5
    assert deadline.remaining() == pytest.approx(2.5)
