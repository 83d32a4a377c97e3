"""kubesim's controller runtime: the back-off, key_of, the informer's resilience, the retry loop.

The informer is driven by a scripted client (what an API server could send, including what a
real one should not: an object without a name), so each failure is exercised on purpose;
its behaviour against kubesim over HTTP is covered by every end-to-end test.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Mapping
from typing import cast

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.backoff import Backoff
from kubesim.client import ApiStatusError, KubeClient
from kubesim.cluster.runtime import (
    Controller,
    Informer,
    SharedInformers,
    Unkeyable,
    WorkQueue,
    key_of,
)
from kubesim.types import Key, Obj


@pytest.mark.parametrize(
    ("initial", "maximum", "factor", "expected"),
    [
        (0.1, 5.0, 2.0, [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]),
        (10, 300, 2.0, [10, 20, 40, 80, 160, 300, 300, 300]),
        (0.5, None, 1.0, [0.5] * 8),
        (1, 10, 3.0, [1, 3, 9, 10, 10, 10, 10, 10]),
    ],
)
def test_backoff_sequence(
    initial: float, maximum: float | None, factor: float, expected: list[float]
) -> None:
    backoff = Backoff(initial, maximum, factor=factor)
    assert [backoff.next_delay() for _ in expected] == pytest.approx(expected)
    backoff.reset()
    assert backoff.next_delay() == pytest.approx(initial)


@given(st.floats(0.001, 10), st.floats(1, 4), st.floats(0, 1), st.integers(1, 40), st.integers())
def test_backoff_jitter_only_stretches(
    initial: float, factor: float, jitter: float, steps: int, seed: int
) -> None:
    plain = Backoff(initial, initial * 50, factor=factor)
    jittered = Backoff(initial, initial * 50, factor=factor, jitter=jitter, rng=random.Random(seed))
    for _ in range(steps):
        base, delay = plain.next_delay(), jittered.next_delay()
        assert base <= delay <= base * (1 + jitter) + 1e-12


@pytest.mark.parametrize(
    ("initial", "maximum", "factor", "jitter"),
    [(0, 1, 2, 0), (-1, 1, 2, 0), (2, 1, 2, 0), (1, 2, 0.5, 0), (1, 2, 2, -0.1)],
)
def test_backoff_refuses_nonsense(
    initial: float, maximum: float, factor: float, jitter: float
) -> None:
    with pytest.raises(ValueError):
        Backoff(initial, maximum, factor=factor, jitter=jitter)


@pytest.mark.parametrize(
    ("obj", "key"),
    [
        ({"metadata": {"name": "web", "namespace": "shop"}}, ("shop", "web")),
        ({"metadata": {"name": "node-a"}}, ("", "node-a")),
        ({"metadata": {"name": "node-a", "namespace": None}}, ("", "node-a")),
    ],
)
def test_key_of(obj: Obj, key: Key) -> None:
    assert key_of(obj) == key


@pytest.mark.parametrize(
    "obj",
    [{}, {"metadata": None}, {"metadata": []}, {"metadata": {}}, {"metadata": {"name": ""}},
     {"metadata": {"name": 7}}, {"kind": "Status", "status": "Failure"}],
)  # fmt: skip
def test_key_of_refuses_what_it_cannot_key(obj: Obj) -> None:
    with pytest.raises(Unkeyable):
        key_of(obj)


def pod(name: str, rv: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


class ScriptedClient:
    """`get` answers from `lists` (an exception is raised), `watch` streams from `watches`."""

    def __init__(self, lists: list[Obj | Exception], watches: list[list[Obj]]) -> None:
        self.lists = lists
        self.watches = watches
        self.calls: list[str] = []
        self.idle = asyncio.Event()

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> Obj:
        self.calls.append("list")
        answer = self.lists.pop(0) if len(self.lists) > 1 else self.lists[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def watch(
        self, path: str, resource_version: str, timeout_seconds: int = 300,
        params: Mapping[str, str] | None = None,
    ) -> AsyncIterator[Obj]:  # fmt: skip
        self.calls.append(f"watch@{resource_version}")
        if not self.watches:
            self.idle.set()
            await asyncio.Event().wait()  # a quiet watch, until cancelled
        for event in self.watches.pop(0):
            yield event


def informer_for(client: ScriptedClient) -> Informer:
    informer = Informer(cast(KubeClient, client), "v1", "pods", "Pod")
    informer.backoff = Backoff(0.001, 0.004)
    return informer


async def test_informer_retries_any_failure_until_it_lists() -> None:
    listed = {"metadata": {"resourceVersion": "5"}, "items": [pod("a", "5")]}
    client = ScriptedClient(
        [aiohttp.ClientConnectionError("refused"), ApiStatusError(500, {}),
         RuntimeError("a bug in the decoder"), ValueError("bad JSON"), listed],
        [],
    )  # fmt: skip
    informer = informer_for(client)
    async with asyncio.timeout(10):
        await informer.start()
        await client.idle.wait()
    try:
        assert client.calls == ["list"] * 5 + ["watch@5"]
        assert informer.get("ns", "a") is not None
    finally:
        await informer.stop()


async def test_informer_skips_what_it_cannot_key_and_survives_failing_handlers() -> None:
    listed = {"metadata": {"resourceVersion": "1"},
              "items": [pod("a", "1"), {"metadata": {"resourceVersion": "1"}}]}  # fmt: skip
    client = ScriptedClient(
        [listed],
        [[{"type": "ADDED", "object": {"metadata": {"resourceVersion": "2"}}},
          {"type": "ADDED", "object": pod("b", "3")},
          {"type": "ERROR", "object": {"kind": "Status", "code": 410}}],
         [{"type": "MODIFIED", "object": pod("b", "4")}]],
    )  # fmt: skip
    informer = informer_for(client)
    seen: list[tuple[str, str]] = []

    def fails(_type: str, _obj: Obj, _old: Obj | None) -> None:
        raise RuntimeError("handler bug")

    informer.add_handler(fails)
    informer.add_handler(lambda type_, obj, _old: seen.append((type_, obj["metadata"]["name"])))
    async with asyncio.timeout(10):
        await informer.start()
        await client.idle.wait()
    try:
        # a is listed; the nameless objects are skipped; b arrives; 410 re-lists (b is gone
        # from the list, so DELETED), and the resumed watch brings it back.
        assert seen == [("ADDED", "a"), ("ADDED", "b"), ("DELETED", "b"), ("MODIFIED", "b")]
        assert client.calls == ["list", "watch@1", "list", "watch@1", "watch@4"]
        assert sorted(informer.cache) == [("ns", "a"), ("ns", "b")]
    finally:
        await informer.stop()


class Flaky(Controller):
    name = "flaky"

    def __init__(self, failures: int) -> None:
        super().__init__(cast(KubeClient, None))
        self.failures = failures
        self.attempts: list[Key] = []
        self.done = asyncio.Event()

    async def reconcile(self, key: Key) -> float | None:
        self.attempts.append(key)
        if len(self.attempts) <= self.failures:
            raise ApiStatusError(409, {}) if len(self.attempts) % 2 else RuntimeError("boom")
        self.done.set()
        return None


async def test_a_failing_key_is_retried_until_it_is_handled() -> None:
    controller = Flaky(failures=4)
    await controller.start()
    try:
        controller.queue.add(("ns", "web"))
        async with asyncio.timeout(10):
            await controller.done.wait()
        assert controller.attempts == [("ns", "web")] * 5
        assert controller.queue._failures == {}  # handled: its back-off starts afresh
    finally:
        await controller.stop()


@pytest.mark.parametrize(
    ("error", "warned"),
    [(ApiStatusError(404, {}), False), (ApiStatusError(409, {}), False),
     (ApiStatusError(500, {}), True), (RuntimeError("boom"), True)],
)  # fmt: skip
async def test_a_race_is_retried_quietly_anything_else_with_a_warning(
    caplog: pytest.LogCaptureFixture, error: Exception, warned: bool
) -> None:
    class Once(Flaky):
        async def reconcile(self, key: Key) -> float | None:
            self.attempts.append(key)
            if len(self.attempts) == 1:
                raise error
            self.done.set()
            return None

    controller = Once(failures=1)
    await controller.start()
    try:
        controller.queue.add(("ns", "web"))
        async with asyncio.timeout(10):
            await controller.done.wait()
    finally:
        await controller.stop()
    assert controller.attempts == [("ns", "web")] * 2
    assert any("flaky: " in r.getMessage() for r in caplog.records) == warned


async def test_extra_loops_retry_too_and_stop_with_the_controller() -> None:
    controller = Flaky(failures=0)
    attempts: list[Key] = []
    handled = asyncio.Event()

    async def stale(key: Key) -> None:
        attempts.append(key)
        if len(attempts) < 3:
            raise RuntimeError("not yet")
        handled.set()

    other = type(controller.queue)()
    controller.add_loop("stale", other, stale)
    await controller.start()
    try:
        other.add(("ns", "p"))
        async with asyncio.timeout(10):
            await handled.wait()
        assert attempts == [("ns", "p")] * 3
    finally:
        await controller.stop()


class Watching(Controller):
    """Records what its pods informer hands it."""

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client)
        self.pods = self.informer("v1", "pods", "Pod")
        self.seen: list[tuple[str, str]] = []
        self.pods.add_handler(lambda type_, obj, _old: self.seen.append(
            (type_, obj["metadata"]["name"])))  # fmt: skip

    async def reconcile(self, key: Key) -> float | None:
        return None


async def test_controllers_built_together_share_one_informer_and_catch_up() -> None:
    listed = {"metadata": {"resourceVersion": "1"}, "items": [pod("a", "1")]}
    client = ScriptedClient([listed], [[{"type": "ADDED", "object": pod("b", "2")}]])
    shared = SharedInformers(cast(KubeClient, client))
    with shared.building():
        first = Watching(cast(KubeClient, client))
    async with asyncio.timeout(10):
        await first.start()
        await client.idle.wait()
        with shared.building():
            late = Watching(cast(KubeClient, client))  # built once the informer runs
        await late.start()
    unshared = Watching(cast(KubeClient, client))  # outside `building`: an informer of its own
    try:
        assert late.pods is first.pods and unshared.pods is not first.pods
        assert client.calls == ["list", "watch@1", "watch@2"]  # one list and watch for both
        assert first.seen == [("ADDED", "a"), ("ADDED", "b")]
        assert late.seen == [("ADDED", "a"), ("ADDED", "b")]  # the cache, handed over
        await first.stop()  # a controller leaves the informer it shares running
        assert first.pods._task is not None
    finally:
        await late.stop()
        await shared.stop()
    assert first.pods._task is None


async def test_a_key_is_handed_to_one_worker_at_a_time() -> None:
    queue = WorkQueue()
    queue.add(("ns", "a"))
    assert await queue.get() == ("ns", "a")
    queue.add(("ns", "a"))  # changed again while a worker has it
    queue.add(("ns", "b"))
    assert await queue.get() == ("ns", "b")  # not a second copy of a
    queue.done(("ns", "b"))
    queue.done(("ns", "a"))  # now it is queued again, once
    queue.add(("ns", "a"))
    assert len(queue) == 1
    assert await queue.get() == ("ns", "a")
    assert len(queue) == 0


# --- the informer's index by controller UID ------------------------------------------------

OWNERS = st.sampled_from([None, "rs-1", "rs-2"])


def owned_pod(name: str, rv: int, owner: str | None) -> Obj:
    obj = pod(name, str(rv))
    refs = [{"uid": "other", "controller": False}]
    if owner is not None:
        refs.append({"uid": owner, "controller": True})
    obj["metadata"]["ownerReferences"] = refs
    return obj


def by_controller_scan(informer: Informer, uid: str) -> list[Obj]:
    def controller(obj: Obj) -> str:
        refs = obj["metadata"].get("ownerReferences") or []
        return next((str(r["uid"]) for r in refs if r.get("controller")), "")

    return [obj for obj in informer.items() if controller(obj) == uid]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["ADDED", "MODIFIED", "DELETED"]),
            st.sampled_from(["a", "b", "c"]),
            OWNERS,
        ),
        max_size=12,
    ),
    st.integers(min_value=0, max_value=12),
    st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), OWNERS), max_size=3),
)
def test_controlled_by_is_the_cache_filtered_by_controller(
    events: list[tuple[str, str, str | None]], first_use: int,
    relisted: list[tuple[str, str | None]],
) -> None:  # fmt: skip
    """Whenever the index is first used (before, between or after the events, and after a
    re-list), it answers what a scan of the cache answers (the same objects)."""
    informer = informer_for(ScriptedClient([{}], []))

    def check() -> None:
        for uid in ("", "rs-1", "rs-2"):
            indexed = sorted(informer.controlled_by(uid), key=key_of)
            assert indexed == sorted(by_controller_scan(informer, uid), key=key_of)

    for index, (type_, name, owner) in enumerate(events, start=1):
        if index == first_use:
            check()
        informer._apply({"type": type_, "object": owned_pod(name, index, owner)})
    check()
    items = [owned_pod(name, 100 + i, owner) for i, (name, owner) in enumerate(relisted)]
    informer.client = cast(KubeClient, ScriptedClient([{"metadata": {}, "items": items}], []))
    asyncio.run(informer._list())
    check()
