"""Back-off delays: exponential, capped, jittered within bounds, reset after success."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.kube.backoff import Backoff


@given(
    initial=st.floats(min_value=0.001, max_value=5),
    cap_factor=st.floats(min_value=1, max_value=100),
    factor=st.floats(min_value=1, max_value=4),
    jitter=st.floats(min_value=0, max_value=0.99),
    seed=st.integers(),
    steps=st.integers(min_value=1, max_value=200),
)
def test_every_delay_is_within_bounds(
    initial: float, cap_factor: float, factor: float, jitter: float, seed: int, steps: int
) -> None:
    maximum = initial * cap_factor
    backoff = Backoff(initial, maximum, factor=factor, jitter=jitter, rng=random.Random(seed))
    for attempt in range(steps):
        base = min(maximum, initial * factor**attempt)
        delay = backoff.next_delay()
        assert base * (1 - jitter) - 1e-9 <= delay <= maximum + 1e-9


def test_without_jitter_it_doubles_up_to_the_cap_then_resets() -> None:
    backoff = Backoff(1, 10, jitter=0)
    assert [backoff.next_delay() for _ in range(6)] == [1, 2, 4, 8, 10, 10]
    backoff.reset()
    assert backoff.next_delay() == 1


def test_jitter_spreads_delays_at_the_cap() -> None:
    backoff = Backoff(1, 1, jitter=0.5, rng=random.Random(7))
    assert len({backoff.next_delay() for _ in range(20)}) > 1


@pytest.mark.parametrize(
    "kwargs",
    [{"initial": 0, "maximum": 1}, {"initial": 2, "maximum": 1},
     {"initial": 1, "maximum": 2, "factor": 0.5}, {"initial": 1, "maximum": 2, "jitter": 1}],
)  # fmt: skip
def test_rejects_nonsense(kwargs: dict[str, float]) -> None:
    initial, maximum = kwargs.pop("initial"), kwargs.pop("maximum")
    with pytest.raises(ValueError):
        Backoff(initial, maximum, **kwargs)  # type: ignore[arg-type]


def test_the_default_cap_keeps_an_informer_blind_at_most_5_seconds_after_an_outage() -> None:
    """However many attempts failed, the next one comes within 5 s (docs/reliability.md)."""
    backoff = Backoff(rng=random.Random(7))
    delays = [backoff.next_delay() for _ in range(1000)]
    assert max(delays) <= 5.0
    assert max(delays) > 2.5  # the cap is reached, not some smaller plateau
