"""ReconcileLoop: what a reconcile's outcome does to its key and how it is counted
(controller-runtime's reconcileHandler), a terminal error that is not retried, each
reconcile's own reconcile_id on every line logged during it, back-off with bounded jitter,
one worker per key, and a stop that lets the reconcile in flight finish and starts nothing
after."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graceful_drain.kube.backoff import Backoff
from graceful_drain.kube.loop import REQUEUE, Outcome, ReconcileLoop, Requeue, TerminalError
from graceful_drain.kube.workqueue import WorkQueue
from graceful_drain.logs import configure_logging, get_logger
from tests.unit.logging_state import logging_restored

BOUND = 10.0  # seconds any single wait may take before the test fails
JITTER = 0.5


class Failed(Exception):
    pass


class RecordingQueue(WorkQueue[str]):
    """A WorkQueue that remembers what the loop asked of it and signals every `done`."""

    def __init__(self) -> None:
        super().__init__()
        self.timers: list[tuple[str, float]] = []
        self.cancelled: list[str] = []
        self.finished: asyncio.Queue[str] = asyncio.Queue()

    def add_after(self, key: str, delay: float) -> None:
        self.timers.append((key, delay))
        super().add_after(key, delay)

    def cancel_timer(self, key: str) -> None:
        self.cancelled.append(key)
        super().cancel_timer(key)

    def done(self, key: str) -> None:
        super().done(key)
        self.finished.put_nowait(key)


Returned = float | Requeue | None


@dataclass
class Rig:
    outcomes: Callable[[str, int], Returned]  # key, call number -> what it returns, or raise
    calls: Counter[str] = field(default_factory=Counter)
    queue: RecordingQueue | None = None

    async def reconcile(self, key: str) -> Returned:
        self.calls[key] += 1
        return self.outcomes(key, self.calls[key])

    def make_queue(self) -> WorkQueue[str]:
        self.queue = RecordingQueue()
        return self.queue

    def loop(self, **options: object) -> ReconcileLoop[str]:
        return ReconcileLoop(
            self.reconcile,
            name="test",
            queue=self.make_queue,
            **options,  # type: ignore[arg-type]
        )

    async def finished(self, count: int = 1) -> list[str]:
        assert self.queue is not None
        async with asyncio.timeout(BOUND):
            return [await self.queue.finished.get() for _ in range(count)]

    @property
    def delays(self) -> list[float]:
        """The delays of the timers the loop set, in order."""
        assert self.queue is not None
        return [delay for _, delay in self.queue.timers]


def fail(_key: str, _call: int) -> Returned:
    raise Failed("refused")


def fail_for_good(_key: str, _call: int) -> Returned:
    raise TerminalError("refused for good")


@pytest.mark.parametrize(
    ("outcome", "timer", "cancelled", "failures", "counted"),
    [
        # requeue_after: forget the failures, reconcile again after that long
        (lambda _k, _n: 30.0, ("k", 30.0), [], 0, Outcome.REQUEUE_AFTER),
        # done: nothing to wait for, the key's timer goes
        (lambda _k, _n: None, None, ["k"], 0, Outcome.SUCCESS),
        # requeue: again after the key's back-off, not a failure
        (lambda _k, _n: REQUEUE, "backoff", [], 0, Outcome.REQUEUE),
        # an error: a rate-limited retry, the failure counted
        (fail, "backoff", [], 1, Outcome.ERROR),
        # a terminal error: not retried, the key's timer goes, its failures are forgotten
        (fail_for_good, None, ["k"], 0, Outcome.ERROR),
    ],
    ids=["requeue-after", "done", "requeue", "error", "terminal"],
)
async def test_what_one_reconcile_does_to_its_key(
    outcome: Callable[[str, int], Returned],
    timer: tuple[str, float] | str | None,
    cancelled: list[str],
    failures: int,
    counted: Outcome,
) -> None:
    rig = Rig(outcome)
    loop = rig.loop(workers=1, backoff=lambda: Backoff(60.0, 120.0, jitter=JITTER))
    assert loop.counts.outcomes == dict.fromkeys(Outcome, 0)  # every outcome, from the start
    await loop.start()
    loop.add("k")
    assert await rig.finished() == ["k"]
    assert rig.queue is not None
    if timer == "backoff":
        [(key, delay)] = rig.queue.timers
        assert key == "k" and (1 - JITTER) * 60.0 <= delay <= 60.0
    else:
        assert rig.queue.timers == ([] if timer is None else [timer])
    assert rig.queue.cancelled == cancelled
    assert loop.failures("k") == failures
    assert loop.counts.outcomes == {**dict.fromkeys(Outcome, 0), counted: 1}
    assert loop.counts.terminal_errors == (1 if outcome is fail_for_good else 0)
    assert loop.counts.errors == (1 if counted is Outcome.ERROR else 0)
    await loop.stop()


async def test_a_terminal_error_comes_back_only_when_added_or_at_its_deadline() -> None:
    """Not retried: the key is reconciled again when it is added (its object changed), and a
    terminal error that names a deadline sets that timer (time alone changes the step)."""

    def outcome(_key: str, call: int) -> Returned:
        if call == 1:
            raise TerminalError("refused for good")
        if call == 2:
            raise TerminalError("refused for good until the deadline", requeue_after=0.001)
        return None

    rig = Rig(outcome)
    loop = rig.loop(workers=1, backoff=lambda: Backoff(0.001, 0.001))
    await loop.start()
    loop.add("k")
    await rig.finished()
    assert rig.delays == [] and rig.calls["k"] == 1  # no retry of its own
    loop.add("k")  # the object changed
    assert await rig.finished(2) == ["k", "k"]  # the second time by the deadline's timer
    assert rig.delays == [0.001] and rig.calls["k"] == 3
    assert loop.counts.terminal_errors == 2 and loop.counts.outcomes[Outcome.SUCCESS] == 1
    await loop.stop()


async def test_requeue_backs_off_without_counting_a_failure() -> None:
    initial, rounds = 0.001, 4
    rig = Rig(lambda _k, call: None if call > rounds else REQUEUE)
    loop = rig.loop(workers=1, backoff=lambda: Backoff(initial, 1.0, jitter=JITTER))
    await loop.start()
    loop.add("k")
    await rig.finished(rounds + 1)  # each requeue comes back by its timer
    for attempt, delay in enumerate(rig.delays):
        assert (1 - JITTER) * initial * 2**attempt <= delay <= initial * 2**attempt
    assert len(rig.delays) == rounds and loop.failures("k") == 0
    assert loop.counts.outcomes[Outcome.REQUEUE] == rounds
    await loop.stop()


async def test_requeue_after_brings_the_key_back() -> None:
    rig = Rig(lambda _k, call: 0.01 if call == 1 else None)
    loop = rig.loop(workers=1)
    await loop.start()
    loop.add("k")
    assert await rig.finished(2) == ["k", "k"]  # the second time by its timer alone
    assert rig.calls["k"] == 2
    await loop.stop()


async def test_failures_back_off_exponentially_with_bounded_jitter_then_reset() -> None:
    initial, maximum, rounds = 0.001, 0.016, 8
    rig = Rig(lambda _k, call: None if call == rounds + 1 else fail(_k, call))
    rng = random.Random(7)
    loop = rig.loop(workers=1, backoff=lambda: Backoff(initial, maximum, jitter=JITTER, rng=rng))
    await loop.start()
    loop.add("k")
    await rig.finished(rounds + 1)  # each retry comes by its timer
    delays = rig.delays
    assert len(delays) == rounds
    for attempt, delay in enumerate(delays):
        ceiling = min(maximum, initial * 2**attempt)
        assert (1 - JITTER) * ceiling <= delay <= ceiling
    assert len(set(delays)) == rounds  # jittered, not one fixed sequence of powers of two
    assert loop.failures("k") == 0  # the success forgot them

    rig.outcomes = fail
    loop.add("k")
    await rig.finished()
    assert (1 - JITTER) * initial <= rig.delays[-1] <= initial  # the back-off started over
    await loop.stop()


async def test_forget_cancels_the_timer_and_the_failures() -> None:
    rig = Rig(fail)
    loop = rig.loop(workers=1, backoff=lambda: Backoff(3600.0, 3600.0))
    await loop.start()
    loop.add("k")
    await rig.finished()
    assert rig.queue is not None and rig.queue.has_timer("k") and loop.failures("k") == 1
    loop.forget("k")
    assert not rig.queue.has_timer("k") and loop.failures("k") == 0
    await loop.stop()


async def test_stop_lets_the_reconcile_in_flight_finish_and_starts_nothing_after() -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    finished: list[str] = []
    started: list[str] = []
    d_finished = asyncio.Event()

    async def reconcile(key: str) -> float | None:
        started.append(key)
        if key == "a":
            entered.set()
            await release.wait()
        finished.append(key)
        if key == "d":
            d_finished.set()
            return None
        return 0.001  # a timer that must not fire once stopped

    loop: ReconcileLoop[str] = ReconcileLoop(reconcile, name="test", workers=1)
    await loop.start()
    loop.add("a")
    loop.add("b")  # queued behind "a": dropped by the stop
    async with asyncio.timeout(BOUND):
        await entered.wait()
    stopping = asyncio.create_task(loop.stop())
    await asyncio.sleep(0)  # a turn of the loop for stop() to run up to its wait
    assert not loop.running and not stopping.done()
    loop.add("c")  # stopped: ignored
    release.set()
    async with asyncio.timeout(BOUND):
        await stopping
    assert finished == ["a"] and started == ["a"]

    # Started again, only what is added now runs: no timer of the last run fires.
    await loop.start()
    loop.add("d")
    async with asyncio.timeout(BOUND):
        await d_finished.wait()
    await loop.stop()
    assert started == ["a", "d"]


async def test_stop_cancels_a_reconcile_that_outlives_the_grace() -> None:
    entered = asyncio.Event()
    cancelled: list[str] = []

    async def hang(key: str) -> float | None:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(key)
            raise
        return None

    loop: ReconcileLoop[str] = ReconcileLoop(hang, name="test", workers=2, stop_grace=0.01)
    await loop.start()
    loop.add("a")
    async with asyncio.timeout(BOUND):
        await entered.wait()
        await loop.stop()
    assert cancelled == ["a"]


def test_a_loop_needs_a_worker() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        ReconcileLoop(fail_async, name="test", workers=0)


async def fail_async(key: str) -> float | None:
    raise Failed(key)


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """The process's logging configured as in a cluster (JSON lines) into a buffer."""
    with logging_restored():
        stream = io.StringIO()
        configure_logging("json", "info", stream=stream)
        yield stream


async def test_every_line_of_one_reconcile_carries_its_own_reconcile_id(
    json_log: io.StringIO,
) -> None:
    """Two keys reconciled at once by two workers, their lines interleaved, one failing, then
    one reconciled again: every line logged during a reconcile (its own, a library's through
    the stdlib, the loop's warning about it) carries that reconcile's id, each reconcile has
    its own, and a line logged outside any reconcile has none."""
    log = get_logger("test")
    first_logged = {"a": asyncio.Event(), "b": asyncio.Event()}
    calls: Counter[str] = Counter()

    async def reconcile(key: str) -> float | None:
        calls[key] += 1
        call = calls[key]
        log.info("first", key=key, call=call)
        first_logged[key].set()
        await first_logged["b" if key == "a" else "a"].wait()  # the other has logged too
        logging.getLogger("httpx").warning("request of %s %d", key, call)
        log.info("second", key=key, call=call)
        if key == "b":
            raise Failed(key)
        return None

    queue = RecordingQueue()
    loop: ReconcileLoop[str] = ReconcileLoop(reconcile, name="test", workers=2,
                                             queue=lambda: queue,
                                             backoff=lambda: Backoff(3600.0, 3600.0))  # fmt: skip
    await loop.start()
    loop.add("a")
    loop.add("b")
    async with asyncio.timeout(BOUND):
        assert {await queue.finished.get(), await queue.finished.get()} == {"a", "b"}
        loop.add("a")
        assert await queue.finished.get() == "a"
    await loop.stop()
    log.info("outside")

    lines = [json.loads(line) for line in json_log.getvalue().splitlines()]
    ids: dict[tuple[str, int], set[str]] = {}
    for line in lines:
        if line["msg"] in ("first", "second"):
            ids.setdefault((line["key"], line["call"]), set()).add(line["reconcile_id"])
    by_text = {line["msg"]: line for line in lines}
    for key, call in (("a", 1), ("b", 1), ("a", 2)):
        library = by_text[f"request of {key} {call}"]["reconcile_id"]
        ids[key, call].add(library)
    ids["b", 1].add(by_text["reconcile failed, retrying"]["reconcile_id"])
    assert all(len(found) == 1 for found in ids.values()), ids  # one id per reconcile
    distinct = {reconcile_id for found in ids.values() for reconcile_id in found}
    assert len(distinct) == 3  # a fresh one each time
    assert all(len(reconcile_id) == 12 and int(reconcile_id, 16) >= 0 for reconcile_id in distinct)
    assert "reconcile_id" not in by_text["outside"]
    # The premise: the two first reconciles' lines interleave, so the ids follow the reconcile
    # and not the order of the lines.
    order = [
        (line["msg"], line.get("call")) for line in lines if line["msg"] in ("first", "second")
    ]
    assert order[:4] == [("first", 1), ("first", 1), ("second", 1), ("second", 1)]


async def test_a_terminal_error_is_logged_as_an_error_with_its_cause(
    json_log: io.StringIO,
) -> None:
    async def reconcile(key: str) -> float | None:
        try:
            raise ValueError("400 BadRequest: the patch is malformed")
        except ValueError as error:
            raise TerminalError("the write was refused for good", requeue_after=60.0) from error

    queue = RecordingQueue()
    loop: ReconcileLoop[str] = ReconcileLoop(reconcile, name="test", queue=lambda: queue)
    await loop.start()
    loop.add("k")
    async with asyncio.timeout(BOUND):
        assert await queue.finished.get() == "k"
    await loop.stop()

    [line] = [json.loads(text) for text in json_log.getvalue().splitlines()]
    assert line["level"] == "error" and line["msg"] == "reconcile failed for good, not retried"
    assert line["error"] == "the write was refused for good"
    assert line["cause"] == "ValueError: 400 BadRequest: the patch is malformed"
    assert line["again_in_seconds"] == 60.0 and line["key"] == "k" and line["loop"] == "test"
    assert "reconcile_id" in line


# --- the property: one worker per key, every change seen ------------------------------------

KEYS = "abc"
# What a key's reconciles return before the first that is done (an unscripted one is).
outcome = st.sampled_from(["requeue", "error"])
scripts = st.dictionaries(st.sampled_from(KEYS), st.lists(outcome, max_size=4))
adds = st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 3)), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(workers=st.integers(1, 4), scripts=scripts, adds=adds, yields=st.integers(0, 3))
def test_a_key_is_never_reconciled_by_two_workers_at_once(
    workers: int, scripts: dict[str, list[str]], adds: list[tuple[str, int]], yields: int
) -> None:
    """Whatever the interleaving of adds, requeues and failures: a key is never held by two
    workers, and every key added is reconciled after its last add."""

    async def run() -> None:
        in_flight: set[str] = set()
        added = {key for key, _ in adds}
        remaining = {key: list(script) for key, script in scripts.items() if key in added}
        added_at: dict[str, int] = {}  # key -> the number of its last add
        seen_at: dict[str, int] = {}  # key -> the adds made before its last reconcile started
        clock = 0
        progress = asyncio.Event()

        async def reconcile(key: str) -> float | None:
            assert key not in in_flight, f"{key} reconciled by two workers at once"
            in_flight.add(key)
            seen_at[key] = clock
            try:
                for _ in range(yields):
                    await asyncio.sleep(0)
                step = remaining[key].pop(0) if remaining.get(key) else "done"
            finally:
                in_flight.discard(key)
                progress.set()
            if step == "error":
                raise Failed(key)
            return 0.001 if step == "requeue" else None

        def settled() -> bool:
            caught_up = all(seen_at.get(key, 0) >= at for key, at in added_at.items())
            return caught_up and not any(remaining.values()) and not in_flight

        loop: ReconcileLoop[str] = ReconcileLoop(
            reconcile, name="prop", workers=workers, backoff=lambda: Backoff(0.001, 0.002)
        )
        await loop.start()
        for key, pause in adds:
            clock += 1
            added_at[key] = clock
            loop.add(key)
            for _ in range(pause):
                await asyncio.sleep(0)
        async with asyncio.timeout(BOUND):
            while not settled():
                progress.clear()
                await progress.wait()
        await loop.stop()
        assert not in_flight

    asyncio.run(run())
