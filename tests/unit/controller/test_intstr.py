"""maxSurge resolution against upstream intstr / deploymentutil behaviour."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.controller.decision.intstr import (
    resolve_max_surge,
    scaled_value_from_int_or_percent,
)


@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [
        # intstr_test.go TestGetScaledValueFromIntOrPercent-style cases
        (1, 100, False, 1),
        ("90%", 100, False, 90),
        ("90%", 95, False, 85),  # 85.5 down
        ("90%", 95, True, 86),  # 85.5 up
        ("%", 0, False, None),
        ("#%", 100, False, None),
        ("90", 100, False, None),  # a string must carry "%"
        ("+10%", 10, True, 1),  # strconv.Atoi accepts a sign
        ("-10%", 10, True, -1),
        ("010%", 10, True, 1),
        (" 10%", 10, True, None),
        ("1_0%", 10, True, None),
        ("10%%", 10, True, None),
        ("25%", 1, True, 1),
        ("25%", 1, False, 0),
        (True, 1, True, None),
        (1.0, 1, True, None),
        (2**31, 1, True, None),  # does not decode into an int32
        (None, 1, True, None),
    ],
)
def test_scaled_value(value: object, total: int, round_up: bool, expected: int | None) -> None:
    assert scaled_value_from_int_or_percent(value, total, round_up) == expected


@pytest.mark.parametrize(
    ("strategy", "surge", "unavailable", "replicas", "expected"),
    [
        # deployment_util.go ResolveFenceposts comment cases: surge "1%" of 1 or 2 rounds up to 1
        ("RollingUpdate", "1%", "25%", 1, 1),
        ("RollingUpdate", "1%", "0%", 2, 1),
        ("RollingUpdate", "0%", "1%", 1, 0),
        ("RollingUpdate", None, None, 1, 1),  # apps/v1 defaults: 25% / 25%
        ("RollingUpdate", None, None, 4, 1),
        ("RollingUpdate", None, None, 5, 2),
        ("RollingUpdate", 1, 0, 1, 1),
        ("RollingUpdate", 0, 1, 1, 0),
        ("Recreate", 1, 0, 1, 0),  # MaxSurge: 0 unless RollingUpdate
        ("RollingUpdate", 1, "bad", 1, 0),  # ResolveFenceposts error -> 0, 0
        ("RollingUpdate", "bad", 0, 1, 0),
    ],
)
def test_resolve_max_surge(
    strategy: str, surge: object, unavailable: object, replicas: int, expected: int
) -> None:
    assert resolve_max_surge(strategy, surge, unavailable, replicas) == expected


@given(st.integers(min_value=0, max_value=1000), st.integers(min_value=0, max_value=10_000))
def test_percent_surge_rounds_up_like_float64_ceil(percent: int, replicas: int) -> None:
    expected = math.ceil(float(percent) * float(replicas) / 100)
    assert resolve_max_surge("RollingUpdate", f"{percent}%", "0%", replicas) == expected


@given(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12)))
def test_never_raises(value: object) -> None:
    assert isinstance(resolve_max_surge("RollingUpdate", value, value, 1), int)
