"""The demo's timeline: which entries a run record turns into, in what order, with what text."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.demo.timeline import (
    DRAIN_FAILED,
    DRAIN_FINISHED,
    DRAIN_STARTED,
    DRAIN_UNFINISHED,
    EVENT,
    EVICTION_ALLOWED,
    EVICTION_FAILED,
    EVICTION_GONE,
    EVICTION_REFUSED,
    OUTAGE_ENDED,
    OUTAGE_STARTED,
    POD_DELETED,
    POD_TERMINATING,
    READY_CHANGED,
    ROLLOUT_STARTED,
    SURGE_READY,
    EvictionAttempt,
    ObservedEvent,
    PodChange,
    RunRecord,
    format_entries,
    ready_at,
    timeline,
)

POD = "default/web-1"

# The eviction dance as the demo records it with the controller (times on one clock).
DANCE = RunRecord(
    client="kubectl",
    node="node-a",
    deployment="default/web",
    with_controller=True,
    started=100.0,
    finished=105.3,
    error=None,
    settled=105.4,
    evictions=(
        EvictionAttempt(100.2, POD, 429, "waiting for a replacement"),
        EvictionAttempt(105.2, POD, 404, 'pods "web-1" not found'),
    ),
    ready=((90.0, 0), (93.0, 1), (103.9, 2), (104.0, 1)),
    replicasets=((89.0, "web-old"), (100.3, "web-new")),
    events=(ObservedEvent(100.25, "Normal", "GracefulDrainStarted", "rollout requested"),),
    pods=(
        PodChange(104.0, POD, "node-a", POD_TERMINATING),
        PodChange(104.5, POD, "node-a", POD_DELETED),
        PodChange(104.6, "default/other", "node-b", POD_DELETED),
    ),
)

# The same drain with nothing installed.
UNPROTECTED = RunRecord(
    client="kubectl",
    node="node-a",
    deployment="default/web",
    with_controller=False,
    started=10.0,
    finished=11.0,
    error=None,
    settled=13.7,
    evictions=(EvictionAttempt(10.05, POD, 201),),
    ready=((5.0, 1), (10.07, 0), (13.6, 1)),
    replicasets=((4.0, "web-old"),),
)


def kinds(record: RunRecord) -> list[str]:
    return [entry.kind for entry in timeline(record)]


def test_the_eviction_dance_reads_in_order() -> None:
    assert kinds(DANCE) == [
        DRAIN_STARTED,
        EVICTION_REFUSED,
        EVENT,
        ROLLOUT_STARTED,
        SURGE_READY,
        READY_CHANGED,
        POD_TERMINATING,
        POD_DELETED,
        EVICTION_GONE,
        DRAIN_FINISHED,
    ]
    entries = timeline(DANCE)
    assert [round(entry.at, 2) for entry in entries][:4] == [0.0, 0.2, 0.25, 0.3]
    texts = [entry.text for entry in entries]
    assert texts[0] == (
        "drain of node-a started (kubectl-style client, with graceful-drain); web has 1 Ready pod"
    )
    assert texts[1] == f"eviction of {POD} refused (429): waiting for a replacement"
    assert texts[2] == "GracefulDrainStarted: rollout requested"
    assert texts[3] == "rollout started: new ReplicaSet web-new"
    assert texts[4] == "surge pod Ready: web has 2 Ready pods"
    assert texts[-1] == "node node-a drained"


def test_the_unprotected_drain_shows_the_outage_and_its_length() -> None:
    assert kinds(UNPROTECTED) == [DRAIN_STARTED, EVICTION_ALLOWED, OUTAGE_STARTED, DRAIN_FINISHED,
                                  OUTAGE_ENDED]  # fmt: skip
    ended = timeline(UNPROTECTED)[-1]
    assert ended.text == "web serves again with 1 Ready pod after 3.53s without one"


@pytest.mark.parametrize(
    ("attempts", "texts"),
    [
        (
            [(429, "held"), (429, "held"), (201, "")],
            [
                f"eviction of {POD} refused (429): held",
                f"eviction of {POD} refused again (429, attempt 2)",
                f"eviction of {POD} allowed after 2 refusals",
            ],
        ),
        (
            [(429, "held"), (201, "")],
            [
                f"eviction of {POD} refused (429): held",
                f"eviction of {POD} allowed after 1 refusal",
            ],
        ),
        ([(201, "")], [f"eviction of {POD} allowed"]),
        ([(404, "gone")], [f"eviction of {POD} not needed: the pod is already gone (404)"]),
        ([(500, "boom")], [f"eviction of {POD} failed (500): boom"]),
    ],
)
def test_eviction_texts(attempts: list[tuple[int, str]], texts: list[str]) -> None:
    evictions = tuple(
        EvictionAttempt(10.0 + index, POD, code, message)
        for index, (code, message) in enumerate(attempts)
    )
    record = replace(UNPROTECTED, evictions=evictions, ready=(), finished=20.0, settled=20.0)
    kinds_seen = {EVICTION_REFUSED, EVICTION_ALLOWED, EVICTION_GONE, EVICTION_FAILED}
    assert [e.text for e in timeline(record) if e.kind in kinds_seen] == texts


@pytest.mark.parametrize(
    ("finished", "error", "kind", "text"),
    [
        (11.0, None, DRAIN_FINISHED, "node node-a drained"),
        (11.0, "global timeout reached", DRAIN_FAILED,
         "drain of node-a failed: global timeout reached"),
        (None, None, DRAIN_UNFINISHED, "drain of node-a still running when the demo gave up"),
    ],
)  # fmt: skip
def test_how_the_drain_ended(finished: float | None, error: str | None, kind: str,
                             text: str) -> None:  # fmt: skip
    record = replace(UNPROTECTED, finished=finished, error=error)
    last = [entry for entry in timeline(record) if entry.kind.startswith("drain-")][-1]
    assert (last.kind, last.text) == (kind, text)
    assert record.drain_completed is (kind == DRAIN_FINISHED)


def test_what_happened_outside_the_window_is_left_out() -> None:
    record = replace(
        DANCE,
        events=(ObservedEvent(99.0, "Normal", "ScalingReplicaSet", "before"),
                ObservedEvent(106.0, "Normal", "GracefulDrainCompleted", "after")),
        ready=((90.0, 1), (106.0, 2)),
    )  # fmt: skip
    assert EVENT not in kinds(record)
    assert SURGE_READY not in kinds(record)


def test_an_outage_in_progress_at_the_start_ends_with_its_length_from_the_start() -> None:
    record = replace(UNPROTECTED, ready=((5.0, 0), (12.0, 1)))
    [ended] = [entry for entry in timeline(record) if entry.kind == OUTAGE_ENDED]
    assert ended.text == "web serves again with 1 Ready pod after 2.00s without one"
    assert timeline(record)[0].text.endswith("web has 0 Ready pods")


def test_ready_at_is_the_last_sample_at_or_before() -> None:
    samples = ((1.0, 1), (2.0, 2), (2.0, 3))
    assert [ready_at(samples, t) for t in (0.5, 1.0, 1.5, 2.0)] == [None, 1, 1, 3]


def test_format_entries() -> None:
    assert format_entries(timeline(UNPROTECTED))[:2] == [
        "   0.00s  drain of node-a started (kubectl-style client, without graceful-drain); "
        "web has 1 Ready pod",
        f"   0.05s  eviction of {POD} allowed",
    ]


times = st.floats(min_value=0.0, max_value=100.0, allow_nan=False)


@given(
    start=times,
    length=st.floats(min_value=0.0, max_value=50.0),
    samples=st.lists(st.tuples(times, st.integers(min_value=0, max_value=3)), max_size=12),
    codes=st.lists(st.tuples(times, st.sampled_from([201, 404, 429, 500])), max_size=8),
)
def test_any_record_gives_a_sorted_timeline_with_one_entry_per_eviction(
    start: float, length: float, samples: list[tuple[float, int]],
    codes: list[tuple[float, int]],
) -> None:  # fmt: skip
    record = RunRecord(
        client="karpenter", node="node-a", deployment="default/web", with_controller=True,
        started=start, finished=start + length, error=None, settled=start + length,
        evictions=tuple(EvictionAttempt(at, POD, code, "m") for at, code in codes),
        ready=tuple(samples),
    )  # fmt: skip
    entries = timeline(record)
    assert [e.at for e in entries] == sorted(e.at for e in entries)
    assert entries[0].kind == DRAIN_STARTED
    assert entries[-1].at == pytest.approx(length)
    eviction_kinds = {EVICTION_REFUSED, EVICTION_ALLOWED, EVICTION_GONE, EVICTION_FAILED}
    inside = [at for at, _ in codes if start <= at <= start + length]
    assert sum(1 for e in entries if e.kind in eviction_kinds) == len(inside)
    outages = [e.kind for e in entries if e.kind in (OUTAGE_STARTED, OUTAGE_ENDED)]
    assert all(a != b for a, b in itertools.pairwise(outages))  # they alternate
