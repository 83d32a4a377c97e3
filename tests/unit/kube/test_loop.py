"""ReconcileLoop: what a reconcile's outcome does to its key (controller-runtime's
reconcileHandler), back-off with bounded jitter, one worker per key, and a stop that lets the
reconcile in flight finish and starts nothing after."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graceful_drain.kube.backoff import Backoff
from graceful_drain.kube.loop import ReconcileLoop
from graceful_drain.kube.workqueue import WorkQueue

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


@dataclass
class Rig:
    outcomes: Callable[[str, int], float | None]  # key, call number -> requeue_after or raise
    calls: Counter[str] = field(default_factory=Counter)
    errors: list[tuple[str, float]] = field(default_factory=list)
    queue: RecordingQueue | None = None

    async def reconcile(self, key: str) -> float | None:
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
            on_error=lambda key, _error, delay: self.errors.append((key, delay)),
            **options,  # type: ignore[arg-type]
        )

    async def finished(self, count: int = 1) -> list[str]:
        assert self.queue is not None
        async with asyncio.timeout(BOUND):
            return [await self.queue.finished.get() for _ in range(count)]


def fail(_key: str, _call: int) -> float | None:
    raise Failed("refused")


@pytest.mark.parametrize(
    ("outcome", "timer", "cancelled", "failures"),
    [
        # requeue_after: forget the failures, reconcile again after that long
        (lambda _k, _n: 30.0, ("k", 30.0), [], 0),
        # done: nothing to wait for, the key's timer goes
        (lambda _k, _n: None, None, ["k"], 0),
        # an error: a rate-limited retry, the failure counted
        (fail, "backoff", [], 1),
    ],
    ids=["requeue-after", "done", "error"],
)
async def test_what_one_reconcile_does_to_its_key(
    outcome: Callable[[str, int], float | None],
    timer: tuple[str, float] | str | None,
    cancelled: list[str],
    failures: int,
) -> None:
    rig = Rig(outcome)
    loop = rig.loop(workers=1, backoff=lambda: Backoff(60.0, 120.0, jitter=JITTER))
    await loop.start()
    loop.add("k")
    assert await rig.finished() == ["k"]
    assert rig.queue is not None
    if timer == "backoff":
        [(key, delay)] = rig.queue.timers
        assert key == "k" and (1 - JITTER) * 60.0 <= delay <= 60.0
        assert rig.errors == [("k", delay)]
    else:
        assert rig.queue.timers == ([] if timer is None else [timer])
        assert rig.errors == []
    assert rig.queue.cancelled == cancelled
    assert loop.failures("k") == failures
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
    delays = [delay for _, delay in rig.errors]
    assert len(delays) == rounds
    for attempt, delay in enumerate(delays):
        ceiling = min(maximum, initial * 2**attempt)
        assert (1 - JITTER) * ceiling <= delay <= ceiling
    assert len(set(delays)) == rounds  # jittered, not one fixed sequence of powers of two
    assert loop.failures("k") == 0  # the success forgot them

    rig.outcomes = fail
    loop.add("k")
    await rig.finished()
    assert (1 - JITTER) * initial <= rig.errors[-1][1] <= initial  # the back-off started over
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
