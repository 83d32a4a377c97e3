"""The detection deadline: from the grace period, only ever brought forward."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.termination.budget import (
    DEFAULT_DEADLINE_SECONDS,
    DETECTION_SHARE,
    Deadline,
    collection_budget,
    pod_grace_bound_seconds,
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


NOW = datetime(2026, 11, 11, 12, 0, 0, tzinfo=UTC)


def deleted_pod(
    *, spec: int | None = 30, deletion: int | None = None, left: float | None = None
) -> dict[str, object]:
    """A pod whose deletion (if any) was asked with `deletion` seconds, due `left` s from NOW."""
    meta: dict[str, object] = {"name": "web"}
    if deletion is not None:
        meta["deletionGracePeriodSeconds"] = deletion
    if left is not None:
        due = NOW + timedelta(seconds=left)
        meta["deletionTimestamp"] = due.strftime("%Y-%m-%dT%H:%M:%S") + "Z"
    spec_: dict[str, object] = {}
    if spec is not None:
        spec_["terminationGracePeriodSeconds"] = spec
    return {"metadata": meta, "spec": spec_}


@pytest.mark.parametrize(
    ("raw", "elapsed", "bound"),
    [
        (deleted_pod(), 0.0, 30.0),  # not deleted: the spec's
        (deleted_pod(spec=None), 0.0, None),  # nothing said
        ({}, 0.0, None),
        ("not a pod", 0.0, None),
        # kubectl drain --grace-period 2 on a 30 s pod, read at once: the deletion's 2 s
        (deleted_pod(deletion=2, left=2), 0.0, 2.0),
        # ...read 1 s after the detection started, the deletion 1 s before that: 1 + 1
        (deleted_pod(deletion=2, left=1), 1.0, 2.0),
        # the detection started late (1 s after the deletion): only 1 s is left of 2
        (deleted_pod(deletion=2, left=1), 0.0, 1.0),
        # deletionTimestamp already passed: the deadline is behind us
        (deleted_pod(deletion=2, left=-3), 1.0, -2.0),
        # a configured-looking 30 s deletion, due in 5 s: 5 s
        (deleted_pod(deletion=30, left=5), 0.0, 5.0),
        # a malformed deletionTimestamp bounds nothing; the deletion's grace still does
        ({"metadata": {"deletionGracePeriodSeconds": 2, "deletionTimestamp": "soon"}}, 0.0, 2.0),
        ({"metadata": {"deletionGracePeriodSeconds": "2"}, "spec": {}}, 0.0, None),
    ],
)
def test_pod_grace_bound(raw: object, elapsed: float, bound: float | None) -> None:
    assert pod_grace_bound_seconds(raw, NOW, elapsed) == bound


@given(
    spec=st.none() | st.integers(0, 3600),
    deletion=st.none() | st.integers(0, 3600),
    left=st.none() | st.integers(-3600, 3600),
    elapsed=st.floats(0, 60, allow_nan=False),
)
def test_the_pod_bound_is_never_longer_than_any_bound_it_knows(
    spec: int | None, deletion: int | None, left: int | None, elapsed: float
) -> None:
    raw = deleted_pod(spec=spec, deletion=deletion, left=left)
    bound = pod_grace_bound_seconds(raw, NOW, elapsed)
    known: list[float] = [
        float(b) for b in (deletion if deletion is not None else spec,) if b is not None
    ]
    if left is not None:
        known.append(elapsed + left)
    assert bound == (min(known) if known else None)
