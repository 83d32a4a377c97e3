"""WorkQueue: de-duplication, one worker per key, timers (client-go util/workqueue semantics)."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.kube.workqueue import WorkQueue

BOUND = 5.0  # seconds any single wait may take before the test fails


async def test_a_key_added_twice_is_queued_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("a")
    queue.add("b")

    assert len(queue) == 2
    assert await queue.get() == "a"
    assert await queue.get() == "b"


async def test_a_key_added_while_held_comes_back_after_done_only() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    held = await queue.get()

    queue.add("a")  # changed while a worker holds it
    assert len(queue) == 0  # no second worker may take it now

    queue.done(held)
    assert len(queue) == 1
    assert await queue.get() == "a"


async def test_done_without_changes_does_not_requeue() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.done(await queue.get())

    assert len(queue) == 0


async def test_timer_adds_the_key_when_it_fires() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 0.01)
    assert queue.has_timer("a") and len(queue) == 0

    async with asyncio.timeout(BOUND):
        assert await queue.get() == "a"
    assert not queue.has_timer("a")


async def test_the_earliest_timer_wins() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 3600)
    queue.add_after("a", 0.01)  # earlier: replaces
    queue.add_after("a", 7200)  # later: ignored

    async with asyncio.timeout(BOUND):
        assert await queue.get() == "a"


async def test_cancelled_timer_never_fires() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 0.01)
    queue.cancel_timer("a")
    queue.add_after("b", 0.02)

    async with asyncio.timeout(BOUND):
        assert await queue.get() == "b"  # "a" would have come first
    assert len(queue) == 0


async def test_close_cancels_every_timer() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 0.01)
    queue.close()

    assert not queue.has_timer("a")


async def test_a_closed_queue_takes_nothing_more() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.close()
    queue.add("a")
    queue.add_after("b", 0.01)

    assert len(queue) == 0 and not queue.has_timer("b")


operations = st.lists(
    st.tuples(st.sampled_from(["add", "get", "done"]), st.sampled_from("abc")), max_size=40
)


@given(operations)
def test_no_key_is_ever_held_twice_or_queued_twice(ops: list[tuple[str, str]]) -> None:
    async def run() -> None:
        queue: WorkQueue[str] = WorkQueue()
        held: set[str] = set()
        for op, key in ops:
            if op == "add":
                queue.add(key)
            elif op == "get" and len(queue):
                got = await queue.get()
                assert got not in held
                held.add(got)
            elif op == "done" and key in held:
                held.discard(key)
                queue.done(key)
            waiting = list(queue._queue._queue)  # type: ignore[attr-defined]
            assert len(waiting) == len(set(waiting))
            assert not set(waiting) & held

    asyncio.run(run())
