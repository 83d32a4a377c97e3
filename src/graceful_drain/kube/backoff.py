"""Exponential back-off with jitter, bounded: the informer's delay between failed attempts.

The default cap (5 s) is how long the reconciler can stay blind after the API server recovers
from an outage of any length: client-go's 30 s left it blind 25 s after recovery.
"""

from __future__ import annotations

import random


class Backoff:
    """Delays initial, initial*factor, ... capped at `maximum`, each shortened by up to `jitter`.

    The jitter is applied after the cap, so replicas that all reached the cap still spread out.
    Every delay lies in [(1 - jitter) * min(maximum, initial * factor**n), maximum].
    """

    def __init__(
        self,
        initial: float = 0.5,
        maximum: float = 5.0,
        *,
        factor: float = 2.0,
        jitter: float = 0.5,
        rng: random.Random | None = None,
    ) -> None:
        if not 0 < initial <= maximum:
            raise ValueError("need 0 < initial <= maximum")
        if factor < 1 or not 0 <= jitter < 1:
            raise ValueError("need factor >= 1 and 0 <= jitter < 1")
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self.jitter = jitter
        self._rng = rng or random.Random()
        self.attempt = 0

    def next_delay(self) -> float:
        base = self.maximum
        # Stop growing once the cap is reached: no float overflow however long it fails.
        if self.initial * self.factor**self.attempt < self.maximum:
            base = self.initial * self.factor**self.attempt
            self.attempt += 1
        return base * (1 - self.jitter * self._rng.random())

    def reset(self) -> None:
        self.attempt = 0
