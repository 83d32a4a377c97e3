"""A demo run's timeline printed as it happens: each entry once it has been observed, and a
progress line while nothing new happens (the drain held while the replacement starts). Once
the drain has ended, no progress line: the output ends with the outcome.

`poll()` reads a snapshot of the run (a `RunRecord` observed up to now) and prints the
timeline entries not printed yet, with their own times; `finish(record)` prints what remains
of the final record, so the whole timeline is printed once, in the order it was seen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TextIO

from graceful_drain.kube.meta import HTTP_TOO_MANY_REQUESTS

from .timeline import (
    DRAIN_UNFINISHED,
    Entry,
    RunRecord,
    format_entries,
    ready_at,
    timeline,
)

Clock = Callable[[], float]
# Seconds without a new entry before a progress line says what the run is waiting for.
QUIET_SECONDS = 2.0
POLL_SECONDS = 0.2


class LiveTimeline:
    def __init__(
        self, out: TextIO, snapshot: Callable[[float], RunRecord], clock: Clock,
        *, quiet_seconds: float = QUIET_SECONDS,
    ) -> None:  # fmt: skip
        self._out = out
        self._snapshot = snapshot  # the run as observed up to the given time
        self._clock = clock
        self._quiet = quiet_seconds
        self._printed: set[Entry] = set()
        self._last_line: float | None = None

    def _print_new(self, entries: list[Entry]) -> bool:
        new = [entry for entry in entries if entry not in self._printed]
        for line in format_entries(new):
            print(line, file=self._out)
        self._printed.update(new)
        if new:
            self._out.flush()
        return bool(new)

    def poll(self) -> None:
        now = self._clock()
        record = self._snapshot(now)
        # A snapshot's drain has not finished yet: that is no "gave up" entry.
        entries = [entry for entry in timeline(record) if entry.kind != DRAIN_UNFINISHED]
        if self._print_new(entries) or self._last_line is None:
            self._last_line = now
        elif record.finished is None and now - self._last_line >= self._quiet:
            print(progress_line(record, now), file=self._out)
            self._out.flush()
            self._last_line = now

    def finish(self, record: RunRecord) -> None:
        self._print_new(timeline(record))

    async def run(self, interval: float = POLL_SECONDS) -> None:
        """Poll until cancelled."""
        while True:
            self.poll()
            await asyncio.sleep(interval)


def progress_line(record: RunRecord, now: float) -> str:
    ready = ready_at(record.ready, now)
    refused = sum(1 for attempt in record.evictions if attempt.code == HTTP_TOO_MANY_REQUESTS)
    state = (
        ""
        if ready is None
        else f"{record.deployment_name} has {ready} Ready pod" + ("" if ready == 1 else "s")
    )
    held = f"{refused} eviction" + ("" if refused == 1 else "s") + " refused so far"
    return f"{now - record.started:7.2f}s  ... drain of {record.node} running: " + "; ".join(
        part for part in (state, held) if part
    )


def print_timeline(out: TextIO, record: RunRecord) -> None:
    """A whole recorded run at once (what `finish` prints when nothing was polled)."""
    LiveTimeline(out, lambda _: record, lambda: record.settled).finish(record)
