"""A de-duplicating work queue of keys with timers, after client-go's util/workqueue.

    queue = WorkQueue[tuple[str, str]]()
    queue.add(key)                 # from an informer handler (synchronous)
    queue.add_after(key, 30.0)     # a timer: add it again in 30 s (the earliest timer wins)
    key = await queue.get()        # a worker; then, whatever happened:
    queue.done(key)

A key is queued at most once, and never handed to two workers at the same time: a key added
while a worker holds it is queued again when that worker calls `done` (client-go's dirty and
processing sets, util/workqueue/queue.go).
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(self) -> None:
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._timers: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self.closed = False

    def add(self, key: K) -> None:
        if self.closed or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Add `key` once `delay` seconds have passed, unless an earlier timer is already set."""
        if self.closed:
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + max(delay, 0.0)
        existing = self._timers.get(key)
        if existing is not None:
            if existing[0] <= when:
                return
            existing[1].cancel()
        self._timers[key] = (when, loop.call_at(when, self._fire, key))

    def cancel_timer(self, key: K) -> None:
        existing = self._timers.pop(key, None)
        if existing is not None:
            existing[1].cancel()

    def has_timer(self, key: K) -> bool:
        return key in self._timers

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    async def get(self) -> K:
        key = await self._queue.get()
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.put_nowait(key)

    def __len__(self) -> int:
        """Keys waiting for a worker (not those held by one, nor those behind a timer)."""
        return self._queue.qsize()

    def close(self) -> None:
        """Cancel every timer; from now on `add` and `add_after` do nothing."""
        self.closed = True
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
