"""RateLimiter: one event per key per interval (held-eviction and cannot-surge events)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.kube.ratelimit import RateLimiter


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_rate_limiter_allows_once_per_interval_per_key() -> None:
    clock = FakeClock()
    limiter = RateLimiter(30.0, clock=clock)

    assert limiter.allow("web")
    assert not limiter.allow("web")
    assert limiter.allow("api")  # another Deployment has its own budget
    clock.now += 29.9
    assert not limiter.allow("web")
    clock.now += 0.1
    assert limiter.allow("web")


@given(st.lists(st.tuples(st.sampled_from("abc"), st.floats(0, 100)), max_size=50))
def test_rate_limiter_never_allows_a_key_twice_within_the_interval(
    steps: list[tuple[str, float]],
) -> None:
    clock = FakeClock()
    limiter = RateLimiter(30.0, clock=clock)
    allowed_at: dict[str, float] = {}
    for key, advance in steps:
        clock.now += advance
        last = allowed_at.get(key)
        due = last is None or clock.now - last >= 30.0
        assert limiter.allow(key) == due
        if due:
            allowed_at[key] = clock.now


def test_rate_limiter_memory_is_bounded() -> None:
    clock = FakeClock()
    limiter = RateLimiter(30.0, clock=clock, max_keys=8)
    for index in range(100):
        assert limiter.allow(index)
    assert len(limiter._last) <= 8
