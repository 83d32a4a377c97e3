"""Kubernetes Events, written best effort (never raises, never blocks).

    recorder = EventRecorder(client, instance=pod_name)      # a component: start/stop
    recorder.record(InvolvedObject.deployment("shop", "web"), NORMAL, "SomeReason", "text")

What graceful-drain says in them is controller/writes/events.py's business. The bodies
are kube/eventbody.py's (re-exported here); a process that writes one Event and exits (the
termination-cause detector) builds it there with `event_body` and `event_name` and creates
it itself.

Which API: core/v1 Events. `kubectl describe` lists exactly those (kubectl
pkg/describe/describe.go: searchEvents -> CoreV1().Events(ns) with an involvedObject
name/namespace/kind/uid field selector, printed by DescribeEvents), with no reliance on the
server converting from events.k8s.io/v1 (a real API server stores both in one resource; a
legacy or simulated one may not), and every kubectl version prints a core `count` as
"(xN over ...)". The reporting controller is set in both places describe and the new API read
it: `source.component` and `reportingComponent` (events.k8s.io/v1 `reportingController`).

Aggregation: an event isomorphic to one written less than `series_window` ago (same object,
type, reason and reporting controller; the message may differ, as with client-go's
tools/events getKey) is not written again: the existing Event gets `count + 1`, a new
`lastTimestamp` and the latest message, by merge patch. Six minutes is client-go's series
finish time (tools/events/event_broadcaster.go finishTime).

Writes go through a bounded queue drained by one task: `record` is synchronous and cheap, so
the admission path can call it; when the queue is full the event is dropped and counted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import cast

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Event
from lightkube.types import PatchType

from graceful_drain.kube.client import error_detail, http_status
from graceful_drain.kube.eventbody import MAX_MESSAGE_CHARS as MAX_MESSAGE_CHARS
from graceful_drain.kube.eventbody import NORMAL as NORMAL
from graceful_drain.kube.eventbody import REPORTING_CONTROLLER as REPORTING_CONTROLLER
from graceful_drain.kube.eventbody import WARNING as WARNING
from graceful_drain.kube.eventbody import EventRecord as EventRecord
from graceful_drain.kube.eventbody import InvolvedObject as InvolvedObject
from graceful_drain.kube.eventbody import event_body as event_body
from graceful_drain.kube.eventbody import repeat_patch as repeat_patch
from graceful_drain.kube.meta import HTTP_NOT_FOUND, event_name, utc_now
from graceful_drain.logs import get_logger

SERIES_WINDOW = timedelta(minutes=6)
QUEUE_LIMIT = 1024
STOP_FLUSH_SECONDS = 2.0

_log = get_logger("events")


@dataclass(frozen=True, slots=True)
class Series:
    name: str  # the Event object carrying the series
    count: int
    last: datetime


@dataclass
class SeriesCache:
    """Which Event carries each recent series; entries expire `window` after their last use."""

    window: timedelta = SERIES_WINDOW
    max_keys: int = 4096
    _series: dict[Hashable, Series] = field(default_factory=dict)

    def find(self, key: Hashable, now: datetime) -> Series | None:
        series = self._series.get(key)
        if series is None:
            return None
        if now - series.last >= self.window:
            del self._series[key]
            return None
        return series

    def remember(self, key: Hashable, series: Series) -> None:
        self._series.pop(key, None)  # re-insert: dicts keep insertion order, oldest first
        self._series[key] = series
        if len(self._series) > self.max_keys:
            oldest = next(iter(self._series))
            del self._series[oldest]

    def forget(self, key: Hashable) -> None:
        self._series.pop(key, None)

    def __len__(self) -> int:
        return len(self._series)


# --- the writer -----------------------------------------------------------------------------


UidResolver = Callable[[InvolvedObject], Awaitable[str | None]]


def deployment_uid_resolver(client: AsyncClient) -> UidResolver:
    """Look a Deployment's uid up with a live GET (other kinds stay without one)."""

    async def resolve(regarding: InvolvedObject) -> str | None:
        if (regarding.api_version, regarding.kind) != ("apps/v1", "Deployment"):
            return None
        deployment = await client.get(Deployment, regarding.name, namespace=regarding.namespace)
        return None if deployment.metadata is None else deployment.metadata.uid

    return resolve


@dataclass(slots=True)
class RecorderStats:
    created: int = 0
    aggregated: int = 0  # occurrences folded into an existing Event
    dropped: int = 0  # queue full, or recorded after stop
    failed: int = 0  # the API server refused or could not be reached


class EventRecorder:
    """Writes EventRecords to the API server from one background task; a component."""

    name = "event-recorder"

    def __init__(
        self,
        client: AsyncClient,
        *,
        instance: str,
        clock: Callable[[], datetime] = utc_now,
        series_window: timedelta = SERIES_WINDOW,
        queue_limit: int = QUEUE_LIMIT,
        resolve_uid: UidResolver | None = None,
    ) -> None:
        self._client = client
        self._instance = instance
        self._clock = clock
        self._series = SeriesCache(series_window)
        self._queue: asyncio.Queue[EventRecord] = asyncio.Queue(maxsize=queue_limit)
        self._resolve_uid = resolve_uid or deployment_uid_resolver(client)
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.stats = RecorderStats()

    # --- the API callers use -----------------------------------------------------------------

    def record(self, regarding: InvolvedObject, type_: str, reason: str, message: str) -> None:
        """Queue an event. Never raises, never waits; drops the event if the queue is full."""
        try:
            if self._closed:
                self.stats.dropped += 1
                return
            self._queue.put_nowait(EventRecord(regarding, type_, reason, message, self._clock()))
        except asyncio.QueueFull:
            self.stats.dropped += 1
            _log.warning("event dropped: queue full", reason=reason, object=regarding.name)
        except Exception as error:  # a clock or a bug: an event is never worth an exception
            self.stats.dropped += 1
            _log.warning("event dropped", reason=reason, error=error_detail(error))

    async def flush(self) -> None:
        """Until every event queued so far has been written (or has failed)."""
        await self._queue.join()

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        self._closed = False
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="event-recorder")

    async def stop(self) -> None:
        """Write what is queued (for a short while), then stop."""
        self._closed = True
        if self._task is None:
            return
        try:
            async with asyncio.timeout(STOP_FLUSH_SECONDS):
                await self._queue.join()
        except TimeoutError:
            _log.warning("stopping with events still queued", queued=self._queue.qsize())
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._task = None

    # --- writing -----------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            record = await self._queue.get()
            try:
                await self._write(record)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self.stats.failed += 1
                _log.warning(
                    "could not write event",
                    reason=record.reason,
                    object=f"{record.regarding.namespace}/{record.regarding.name}",
                    error=error_detail(error),
                )
            finally:
                self._queue.task_done()

    async def _write(self, record: EventRecord) -> None:
        if not record.regarding.uid:
            uid = await self._resolve_uid(record.regarding)
            if uid:
                record = replace(record, regarding=replace(record.regarding, uid=uid))
        key = record.series_key
        series = self._series.find(key, record.at)
        if series is not None:
            count = series.count + 1
            try:
                await self._client.patch(
                    Event,
                    series.name,
                    repeat_patch(record, count),
                    namespace=record.regarding.event_namespace,
                    patch_type=PatchType.MERGE,
                )
            except ApiError as error:
                if http_status(error) != HTTP_NOT_FOUND:
                    raise
                self._series.forget(key)  # the Event expired (TTL) or was deleted: start over
            else:
                self._series.remember(key, Series(series.name, count, record.at))
                self.stats.aggregated += 1
                return
        name = event_name(record.regarding.name, record.at)
        event = cast(Event, Event.from_dict(event_body(record, name, self._instance)))
        await self._client.create(event)
        self._series.remember(key, Series(name, 1, record.at))
        self.stats.created += 1
