"""A per-key rate limiter: at most one event per key per interval (held-eviction events)."""

from __future__ import annotations

import time
from collections.abc import Callable


class RateLimiter:
    """At most one `allow(key)` per key per `interval` seconds; forgets keys once they expire."""

    def __init__(
        self, interval: float, *, clock: Callable[[], float] = time.monotonic, max_keys: int = 4096
    ) -> None:
        self.interval = interval
        self._clock = clock
        self._max_keys = max_keys
        self._last: dict[object, float] = {}

    def allow(self, key: object) -> bool:
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            return False
        if len(self._last) >= self._max_keys:
            self._last = {k: t for k, t in self._last.items() if now - t < self.interval}
            if len(self._last) >= self._max_keys:  # all recent: drop the oldest half
                keep = sorted(self._last.items(), key=lambda item: item[1])[self._max_keys // 2 :]
                self._last = dict(keep)
        self._last[key] = now
        return True
