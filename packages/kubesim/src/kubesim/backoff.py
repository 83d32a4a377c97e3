"""Back-off: how long kubesim waits before trying again, wherever it retries.

One sequence, client-go's wait.Backoff: `initial`, then times `factor`, capped at `maximum`,
each delay stretched by up to `jitter` of itself (wait.Jitter). Factor 2 is the exponential
back-off of informers, work-queue retries and crashed containers; factor 1 the evenly spaced
retries of the eviction subresource.
"""

from __future__ import annotations

import random


class Backoff:
    def __init__(
        self,
        initial: float,
        maximum: float | None = None,
        *,
        factor: float = 2.0,
        jitter: float = 0.0,
        rng: random.Random | None = None,
    ) -> None:
        if initial <= 0 or (maximum is not None and maximum < initial):
            raise ValueError("need 0 < initial <= maximum")
        if factor < 1 or jitter < 0:
            raise ValueError("need factor >= 1 and jitter >= 0")
        self.initial = initial
        self.maximum = initial if maximum is None else maximum
        self.factor = factor
        self.jitter = jitter
        self._rng = rng or random.Random()
        self._current = initial

    def next_delay(self) -> float:
        delay = self._current
        self._current = min(self._current * self.factor, self.maximum)
        if self.jitter:
            delay += delay * self.jitter * self._rng.random()
        return delay

    def reset(self) -> None:
        self._current = self.initial
