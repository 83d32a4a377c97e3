"""Rollout arithmetic against upstream's tables (deployment_util_test.go, intstr_test.go)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.cluster.rollout_math import (
    IntOrString,
    IntOrStringError,
    max_surge,
    max_unavailable,
    new_rs_new_replicas,
    proportion,
    replica_set_fraction,
    resolve_fenceposts,
    round_half_away,
    scaled_value,
)

int_or_percent = st.one_of(st.integers(0, 50), st.integers(0, 100).map(lambda p: f"{p}%"))


@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [
        (3, 10, True, 3),
        ("25%", 1, True, 1),
        ("25%", 1, False, 0),
        ("25%", 4, False, 1),
        ("25%", 8, True, 2),
        ("39%", 10, True, 4),
        ("39%", 10, False, 3),
        ("50%", 3, True, 2),
        ("50%", 3, False, 1),
        ("100%", 7, False, 7),
        ("0%", 7, True, 0),
        ("+10%", 10, True, 1),
        ("29%", 100, True, 29),  # 29*100/100 in float64 is exact: no spurious round-up
    ],
)
def test_scaled_value(value: IntOrString, total: int, round_up: bool, expected: int) -> None:
    assert scaled_value(value, total, round_up) == expected


@pytest.mark.parametrize("value", ["5", "oops", "urg%", "1.5%", " 5%", "%", True])
def test_scaled_value_rejects_what_intstr_rejects(value: IntOrString) -> None:
    with pytest.raises(IntOrStringError):
        scaled_value(value, 10, True)


@pytest.mark.parametrize(
    ("surge", "unavailable", "desired", "expected"),
    [
        ("0%", "0%", 0, (0, 1)),  # TestResolveFenceposts
        ("39%", "39%", 10, (4, 3)),
        (None, "39%", 10, (0, 3)),
        ("25%", "25%", 8, (2, 2)),
        ("25%", "25%", 1, (1, 0)),  # the default on a single replica: surge, never unavailable
        ("25%", "25%", 3, (1, 0)),
        (1, 0, 1, (1, 0)),
        (0, 0, 5, (0, 1)),
        (0, "10%", 5, (0, 1)),  # 0.5 rounds down to 0, then both-zero makes it 1
        (None, None, 10, (0, 1)),
        (3, 2, 10, (3, 2)),
    ],
)
def test_resolve_fenceposts(
    surge: IntOrString | None,
    unavailable: IntOrString | None,
    desired: int,
    expected: tuple[int, int],
) -> None:
    assert resolve_fenceposts(surge, unavailable, desired) == expected


@pytest.mark.parametrize(("surge", "unavailable"), [("oops", "39%"), ("55%", "urg"), ("5", "1")])
def test_resolve_fenceposts_errors(surge: str, unavailable: str) -> None:
    with pytest.raises(IntOrStringError):
        resolve_fenceposts(surge, unavailable, 10)


@pytest.mark.parametrize(
    ("rolling", "surge", "unavailable", "replicas", "expected"),
    [  # TestMaxUnavailable
        (True, 0, 1, 10, 1),
        (True, 0, 10, 3, 3),  # capped at replicas
        (True, "0%", "30%", 10, 3),
        (True, 1, 1, 0, 0),  # zero replicas: nothing can be unavailable
        (False, 1, 1, 10, 0),  # Recreate
        (True, "25%", "25%", 1, 0),
    ],
)
def test_max_unavailable(
    rolling: bool, surge: IntOrString, unavailable: IntOrString, replicas: int, expected: int
) -> None:
    assert max_unavailable(rolling, surge, unavailable, replicas) == expected


def test_max_surge_is_zero_for_recreate() -> None:
    assert max_surge(False, 5, 0, 10) == 0
    assert max_surge(True, "25%", "25%", 10) == 3


@pytest.mark.parametrize(
    ("recreate", "replicas", "surge", "all_rs", "new_rs", "expected"),
    [
        (False, 1, 1, 1, 0, 1),  # maxSurge 1: the new pod comes up next to the old one
        (False, 1, 1, 2, 1, 1),  # at the limit: no further
        (False, 10, 3, 13, 3, 3),  # cannot scale up past replicas + surge
        (False, 10, 3, 10, 0, 3),
        (False, 10, 3, 12, 5, 6),  # room for one more pod only
        (False, 10, 3, 9, 8, 10),  # room for 4, but never past replicas
        (False, 10, "25%", 10, 0, 3),
        (False, 3, 0, 3, 0, 0),
        (True, 4, 1, 0, 0, 4),  # Recreate goes straight to replicas
    ],
)
def test_new_rs_new_replicas(
    recreate: bool, replicas: int, surge: IntOrString, all_rs: int, new_rs: int, expected: int
) -> None:
    assert new_rs_new_replicas(recreate, replicas, surge, all_rs, new_rs) == expected


@pytest.mark.parametrize(
    ("value", "expected"), [(0.5, 1), (1.5, 2), (2.5, 3), (-2.5, -3), (2.4999, 2), (-0.4, 0)]
)
def test_round_half_away_from_zero_like_go(value: float, expected: int) -> None:
    assert round_half_away(value) == expected


@pytest.mark.parametrize(
    ("rs", "want", "most", "annotated", "to_add", "added", "expected"),
    [  # sync_test.go TestScale "proportional scaling: 5 -> 10": 3 and 2 become 6 and 4
        (3, 10, 10, 5, 5, 0, 3),
        (2, 10, 10, 5, 5, 3, 2),
        (8, 4, 4, 9, -5, 0, -4),  # "9 -> 4"
        (1, 4, 4, 9, -5, -4, -1),
        (0, 4, 4, 9, -5, 0, 0),  # an empty ReplicaSet never scales proportionally
        (3, 0, 0, 5, -5, 0, -3),  # down to zero: all of it
    ],
)
def test_proportion(
    rs: int, want: int, most: int, annotated: int, to_add: int, added: int, expected: int
) -> None:
    fraction = replica_set_fraction(rs, want, most, annotated)
    assert proportion(rs, fraction, to_add, added) == expected


@given(int_or_percent, int_or_percent, st.integers(0, 1000))
def test_fenceposts_never_both_zero(
    surge: IntOrString, unavailable: IntOrString, desired: int
) -> None:
    resolved_surge, resolved_unavailable = resolve_fenceposts(surge, unavailable, desired)
    assert resolved_surge >= 0 and resolved_unavailable >= 0
    assert (resolved_surge, resolved_unavailable) != (0, 0)


@given(int_or_percent, int_or_percent, st.integers(0, 1000))
def test_max_unavailable_never_exceeds_replicas(
    surge: IntOrString, unavailable: IntOrString, replicas: int
) -> None:
    assert 0 <= max_unavailable(True, surge, unavailable, replicas) <= replicas


@given(st.integers(0, 100), st.integers(0, 10_000))
def test_percent_rounds_up_and_down_around_the_exact_value(percent: int, total: int) -> None:
    up = scaled_value(f"{percent}%", total, True)
    down = scaled_value(f"{percent}%", total, False)
    assert down <= percent * total / 100 <= up
    assert up - down == (0 if percent * total % 100 == 0 else 1)


@given(st.integers(1, 50), st.integers(0, 20), st.integers(0, 60), st.integers(0, 50))
def test_new_rs_never_exceeds_replicas_or_the_surge_budget(
    replicas: int, surge: int, others: int, new: int
) -> None:
    new = min(new, replicas)
    target = new_rs_new_replicas(False, replicas, surge, others + new, new)
    assert new <= target <= replicas
    assert target == new or others + target <= replicas + surge
