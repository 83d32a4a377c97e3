"""The benchmarks' pure statistics: nearest-rank percentiles, rates, ratios, slopes, targets."""

from __future__ import annotations

import math

import pytest
from bench.stats import Bound, Target, evaluate, percentile, rate, ratio, slope, summarize
from hypothesis import given
from hypothesis import strategies as st

samples = st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=300)
ranks = st.floats(min_value=0.001, max_value=100)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([5.0], 50, 5.0),
        ([5.0], 99.9, 5.0),
        ([1.0, 2.0], 50, 1.0),  # ceil(0.5 * 2) = 1st
        ([1.0, 2.0], 50.1, 2.0),
        ([1.0, 2.0, 3.0, 4.0], 75, 3.0),
        ([float(i) for i in range(1, 101)], 99, 99.0),
        ([float(i) for i in range(1, 101)], 99.9, 100.0),  # fewer than 1000: the maximum
        ([float(i) for i in range(1, 1001)], 99.9, 999.0),
        ([float(i) for i in range(1, 1001)], 100, 1000.0),
        ([float(i) for i in range(1, 1001)], 0.01, 1.0),
    ],
)
def test_nearest_rank_percentiles(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected


@pytest.mark.parametrize("q", [0, -1, 100.5, math.nan])
def test_percentile_rank_out_of_range_is_refused(q: float) -> None:
    with pytest.raises(ValueError, match="rank"):
        percentile([1.0], q)


def test_percentile_of_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 50)


@given(samples, ranks)
def test_a_percentile_is_an_observed_value_within_the_range(values: list[float], q: float) -> None:
    ordered = sorted(values)
    value = percentile(ordered, q)
    assert value in ordered
    assert ordered[0] <= value <= ordered[-1]


@given(samples, ranks, ranks)
def test_percentiles_are_monotonic_in_the_rank(values: list[float], a: float, b: float) -> None:
    ordered = sorted(values)
    low, high = sorted((a, b))
    assert percentile(ordered, low) <= percentile(ordered, high)


@given(samples, ranks)
def test_at_least_q_percent_of_samples_are_at_or_below_the_percentile(
    values: list[float], q: float
) -> None:
    ordered = sorted(values)
    value = percentile(ordered, q)
    at_or_below = sum(1 for v in ordered if v <= value)
    assert at_or_below >= q / 100 * len(ordered) - 1e-9


@given(samples)
def test_summary_orders_its_percentiles(values: list[float]) -> None:
    summary = summarize(values)
    assert summary is not None
    assert summary.count == len(values)
    assert summary.p50 <= summary.p99 <= summary.p999 <= summary.max
    tolerance = 1e-9 * max(values)
    assert min(values) - tolerance <= summary.mean <= max(values) + tolerance


def test_summary_of_nothing_is_none() -> None:
    assert summarize([]) is None


def test_summary_sorts_unsorted_input() -> None:
    summary = summarize([3.0, 1.0, 2.0])
    assert summary is not None
    assert (summary.p50, summary.max, summary.mean) == (2.0, 3.0, 2.0)


@pytest.mark.parametrize(
    ("count", "seconds", "expected"), [(100, 2.0, 50.0), (0, 1.0, 0.0), (10, 0.0, 0.0)]
)
def test_rate(count: int, seconds: float, expected: float) -> None:
    assert rate(count, seconds) == expected


@pytest.mark.parametrize(
    ("value", "reference", "expected"),
    [(50.0, 100.0, 0.5), (150.0, 100.0, 1.5), (1.0, 0.0, None), (1.0, -3.0, None),
     (math.nan, 1.0, None), (1.0, math.nan, None)],
)  # fmt: skip
def test_ratio(value: float, reference: float, expected: float | None) -> None:
    assert ratio(value, reference) == expected


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        ([(1.0, 10.0), (2.0, 20.0)], 10.0),
        ([(1_000.0, 5e6), (10_000.0, 5e6 + 9_000 * 600), (50_000.0, 5e6 + 49_000 * 600)], 600.0),
        ([(1.0, 1.0)], None),
        ([(3.0, 1.0), (3.0, 7.0)], None),
        ([], None),
    ],
)
def test_slope(points: list[tuple[float, float]], expected: float | None) -> None:
    found = slope(points)
    if expected is None:
        assert found is None
    else:
        assert found == pytest.approx(expected)


@given(
    st.floats(min_value=-1e3, max_value=1e3),
    st.floats(min_value=-1e6, max_value=1e6),
    st.lists(st.integers(min_value=0, max_value=10**5), min_size=2, max_size=20, unique=True),
)
def test_slope_recovers_a_line(a: float, b: float, xs: list[int]) -> None:
    found = slope([(float(x), a * x + b) for x in xs])
    assert found == pytest.approx(a, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize(
    ("bound", "limit", "value", "met"),
    [
        (Bound.AT_LEAST, 0.5, 0.5, True),
        (Bound.AT_LEAST, 0.5, 0.49, False),
        (Bound.AT_MOST, 10.0, 10.0, True),
        (Bound.AT_MOST, 10.0, 10.01, False),
        (Bound.BELOW, 10.0, 9.99, True),
        (Bound.BELOW, 10.0, 10.0, False),
        (Bound.AT_LEAST, 0.5, None, False),  # not measured is not met
        (Bound.BELOW, 10.0, math.nan, False),
    ],
)
def test_target_evaluation(bound: Bound, limit: float, value: float | None, met: bool) -> None:
    verdict = evaluate(Target("x", bound, limit), value, where="here")
    assert verdict.met is met
    assert verdict.text == ("met" if met else "MISSED")
    assert verdict.where == "here"


def test_target_describes_itself() -> None:
    assert Target("webhook p99", Bound.BELOW, 10.0, " ms").describe() == "webhook p99 < 10 ms"
    assert Target("ratio", Bound.AT_LEAST, 0.5).describe() == "ratio >= 0.5"
