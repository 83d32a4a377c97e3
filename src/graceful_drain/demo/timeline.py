"""What one demo run recorded, and the timeline an operator reads from it (pure).

A `RunRecord` holds times on one monotonic clock: when the drain started and finished, every
eviction request the drain client made and how the API server answered it, the Deployment's
Ready pods as a step function, the ReplicaSets created for it and the Events about it.
`timeline(record)` turns it into entries relative to the drain's start, in time order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from graceful_drain.kube.meta import HTTP_NOT_FOUND, HTTP_TOO_MANY_REQUESTS

# Entry kinds, stable for tests and tools.
DRAIN_STARTED: Final = "drain-started"
EVICTION_REFUSED: Final = "eviction-refused"
EVICTION_ALLOWED: Final = "eviction-allowed"
EVICTION_FAILED: Final = "eviction-failed"
EVICTION_GONE: Final = "eviction-gone"
POD_TERMINATING: Final = "pod-terminating"
POD_DELETED: Final = "pod-deleted"
EVENT: Final = "event"
ROLLOUT_STARTED: Final = "rollout-started"
SURGE_READY: Final = "surge-ready"
READY_CHANGED: Final = "ready-changed"
OUTAGE_STARTED: Final = "outage-started"
OUTAGE_ENDED: Final = "outage-ended"
DRAIN_FINISHED: Final = "drain-finished"
DRAIN_FAILED: Final = "drain-failed"
DRAIN_UNFINISHED: Final = "drain-unfinished"

Sample = tuple[float, int]  # (time, Ready pods from then on)


@dataclass(frozen=True, slots=True)
class EvictionAttempt:
    at: float
    pod: str  # namespace/name
    code: int  # the API server's HTTP status: 201 evicted, 429 refused...
    message: str = ""

    @property
    def allowed(self) -> bool:
        return 200 <= self.code < 300


@dataclass(frozen=True, slots=True)
class ObservedEvent:
    """A Kubernetes Event about the Deployment, as first seen (or seen again: `count` grew)."""

    at: float
    type: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class PodChange:
    """A pod of the Deployment's namespace began terminating, or was deleted."""

    at: float
    pod: str  # namespace/name
    node: str  # where it ran ("" if never scheduled)
    change: str  # POD_TERMINATING or POD_DELETED


@dataclass(frozen=True)
class RunRecord:
    client: str
    node: str
    deployment: str  # namespace/name
    with_controller: bool
    started: float
    finished: float | None  # None: the drain did not end within the demo's budget
    error: str | None  # what the drain client reported when it failed
    settled: float  # observation ends here (the workload is back, or the budget ran out)
    evictions: tuple[EvictionAttempt, ...] = ()
    ready: tuple[Sample, ...] = ()
    replicasets: tuple[tuple[float, str], ...] = ()  # (created, name)
    events: tuple[ObservedEvent, ...] = ()
    pods: tuple[PodChange, ...] = ()

    @property
    def drain_completed(self) -> bool:
        return self.finished is not None and self.error is None

    @property
    def deployment_name(self) -> str:
        return self.deployment.rpartition("/")[2]


@dataclass(frozen=True, slots=True)
class Entry:
    at: float  # seconds since the drain started
    kind: str
    text: str


def _pods(count: int) -> str:
    return f"{count} Ready pod" + ("" if count == 1 else "s")


def ready_at(samples: Iterable[Sample], at: float) -> int | None:
    """The Ready count in force at `at` (the last sample at or before it); None before any."""
    value = None
    for when, count in sorted(samples, key=lambda sample: sample[0]):
        if when > at:
            break
        value = count
    return value


def _ready_entries(record: RunRecord) -> list[Entry]:
    name = record.deployment_name
    previous = ready_at(record.ready, record.started)
    outage_since = record.started if previous == 0 else None
    entries = []
    for at, count in sorted(record.ready, key=lambda sample: sample[0]):
        if not record.started < at <= record.settled or count == previous:
            continue
        when = at - record.started
        if count == 0:
            entries.append(Entry(when, OUTAGE_STARTED, f"{name} has no Ready pod: outage begins"))
            outage_since = at
        elif previous == 0 and outage_since is not None:
            entries.append(
                Entry(
                    when,
                    OUTAGE_ENDED,
                    f"{name} serves again with {_pods(count)} after "
                    f"{at - outage_since:.2f}s without one",
                )
            )
            outage_since = None
        elif previous is not None and count > previous and count >= 2:
            entries.append(Entry(when, SURGE_READY, f"surge pod Ready: {name} has {_pods(count)}"))
        else:
            entries.append(Entry(when, READY_CHANGED, f"{name} has {_pods(count)}"))
        previous = count
    return entries


def _eviction_entries(record: RunRecord) -> list[Entry]:
    refusals: dict[str, int] = {}
    entries = []
    for attempt in sorted(record.evictions, key=lambda attempt: attempt.at):
        if not record.started <= attempt.at <= record.settled:
            continue
        when = attempt.at - record.started
        refused = refusals.get(attempt.pod, 0)
        if attempt.allowed:
            after = f" after {refused} refusal" + ("" if refused == 1 else "s") if refused else ""
            text = f"eviction of {attempt.pod} allowed{after}"
            entries.append(Entry(when, EVICTION_ALLOWED, text))
        elif attempt.code == HTTP_NOT_FOUND:
            text = f"eviction of {attempt.pod} not needed: the pod is already gone (404)"
            entries.append(Entry(when, EVICTION_GONE, text))
        elif attempt.code == HTTP_TOO_MANY_REQUESTS:
            refusals[attempt.pod] = refused + 1
            text = (
                f"eviction of {attempt.pod} refused (429): {attempt.message}"
                if refused == 0
                else f"eviction of {attempt.pod} refused again (429, attempt {refused + 1})"
            )
            entries.append(Entry(when, EVICTION_REFUSED, text))
        else:
            entries.append(
                Entry(
                    when,
                    EVICTION_FAILED,
                    f"eviction of {attempt.pod} failed ({attempt.code}): {attempt.message}",
                )
            )
    return entries


def timeline(record: RunRecord) -> list[Entry]:
    """Everything the run saw from the drain's start until it settled, in time order."""
    start = record.started
    who = "with" if record.with_controller else "without"
    entries = [
        Entry(
            0.0,
            DRAIN_STARTED,
            f"drain of {record.node} started ({record.client}-style client, {who} graceful-drain)"
            + (
                ""
                if (count := ready_at(record.ready, start)) is None
                else f"; {record.deployment_name} has {_pods(count)}"
            ),
        )
    ]
    entries += _eviction_entries(record)
    entries += [
        Entry(event.at - start, EVENT, f"{event.reason}: {event.message}")
        for event in record.events
        if start <= event.at <= record.settled
    ]
    entries += [
        Entry(at - start, ROLLOUT_STARTED, f"rollout started: new ReplicaSet {name}")
        for at, name in record.replicasets
        if start < at <= record.settled
    ]
    entries += _ready_entries(record)
    entries += [
        Entry(
            change.at - start,
            change.change,
            f"pod {change.pod} on {change.node} "
            + ("is terminating" if change.change == POD_TERMINATING else "is gone"),
        )
        for change in record.pods
        if change.node == record.node and start <= change.at <= record.settled
    ]
    if record.finished is None:
        entries.append(
            Entry(
                record.settled - start,
                DRAIN_UNFINISHED,
                f"drain of {record.node} still running when the demo gave up",
            )
        )
    elif record.error is not None:
        entries.append(
            Entry(
                record.finished - start,
                DRAIN_FAILED,
                f"drain of {record.node} failed: {record.error}",
            )
        )
    else:
        drained = f"node {record.node} drained"
        entries.append(Entry(record.finished - start, DRAIN_FINISHED, drained))
    return sorted(entries, key=lambda entry: entry.at)


def format_entries(entries: Iterable[Entry]) -> list[str]:
    return [f"{entry.at:7.2f}s  {entry.text}" for entry in entries]
