"""The informer loop against a scripted list/watch source: store, indexes, resume, 410, errors."""

from __future__ import annotations

import asyncio
import copy
import gc
import random
import tracemalloc
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lightkube.resources.core_v1 import Pod

from graceful_drain.controller.decision.model import PodInfo, ReplicaSetInfo
from graceful_drain.kube.backoff import Backoff
from graceful_drain.kube.client import RawListPage, RawWatchEvent, WatchGone, decode
from graceful_drain.kube.informer import Change, Informer, LightkubeListWatch, ListChunk, Store

DEADLINE = 10.0
END = object()  # ends the current watch stream normally


def pod(name: str, rs: str | None = "web-5d9", *, namespace: str = "default",
        rv: str = "1", ready: bool = True) -> dict[str, Any]:  # fmt: skip
    metadata: dict[str, Any] = {
        "name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": rv,
    }  # fmt: skip
    if rs is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "controller": True}
        ]
    return {
        "metadata": metadata,
        "spec": {"nodeName": "node-a"},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


class ScriptedSource:
    """Lists serve `objects`; watch streams play what the test puts on `stream`."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.version = "10"
        self.list_errors: list[Exception] = []
        self.list_calls = 0
        self.watch_versions: list[str] = []
        self.stream: asyncio.Queue[object] = asyncio.Queue()

    async def list(self) -> AsyncIterator[ListChunk]:
        self.list_calls += 1
        if self.list_errors:
            raise self.list_errors.pop(0)
        items = [copy.deepcopy(obj) for obj in self.objects.values()]
        half = len(items) // 2
        yield ListChunk(self.version, iter(items[:half]))  # two pages
        yield ListChunk(self.version, iter(items[half:]))

    async def watch(
        self, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[RawWatchEvent]:
        assert 1 <= timeout_seconds < 120  # ends before the default silence limit (125 s)
        self.watch_versions.append(resource_version)
        while True:
            item = await self.stream.get()
            if item is END:
                return
            if isinstance(item, Exception):
                raise item
            assert isinstance(item, RawWatchEvent)
            yield item

    def event(self, kind: str, obj: dict[str, Any]) -> None:
        self.stream.put_nowait(RawWatchEvent(kind, obj))


@pytest.fixture
def source() -> ScriptedSource:
    return ScriptedSource()


def pod_informer(source: ScriptedSource) -> Informer[PodInfo]:
    return Informer(
        "pods",
        source,
        PodInfo.from_object,
        indexers={"replicaset": lambda p: p.owner_replicaset},
        backoff=Backoff(0.001, 0.002),
        rng=random.Random(1),
    )


async def until(informer: Informer[Any], predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(DEADLINE):
        await informer.wait_for(predicate)


@pytest.fixture
async def running(source: ScriptedSource) -> AsyncIterator[Informer[PodInfo]]:
    informer = pod_informer(source)
    task = asyncio.create_task(informer.run())
    yield informer
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_list_fills_store_and_indexes_then_watch_starts_from_list_version(
    source: ScriptedSource,
) -> None:
    source.objects = {n: pod(n) for n in ("a", "b", "c")}
    source.objects["bare"] = pod("bare", rs=None)
    informer = pod_informer(source)
    task = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(DEADLINE):
            await informer.synced.wait()
        await until(informer, lambda: source.watch_versions == ["10"])
        assert len(informer) == 4
        assert informer.get("default", "a") == PodInfo.from_object(pod("a"))
        names = [p.name for p in informer.by_index("replicaset", "default", "web-5d9")]
        assert names == ["a", "b", "c"]
        assert informer.by_index("replicaset", "other", "web-5d9") == []
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_watch_events_update_store_indexes_and_version(
    source: ScriptedSource, running: Informer[PodInfo]
) -> None:
    await until(running, lambda: source.watch_versions == ["10"])
    source.event("ADDED", pod("a", rv="11"))
    source.event("MODIFIED", pod("a", rs="web-new", rv="12"))
    source.event("ADDED", pod("b", rv="13"))
    source.event("DELETED", pod("b", rv="14"))
    await until(running, lambda: running.resource_version == "14")
    assert running.get("default", "a") is not None
    assert running.get("default", "b") is None
    assert running.by_index("replicaset", "default", "web-5d9") == []
    assert [p.name for p in running.by_index("replicaset", "default", "web-new")] == ["a"]


async def test_bookmark_moves_the_version_and_a_resumed_watch_uses_it(
    source: ScriptedSource, running: Informer[PodInfo]
) -> None:
    await until(running, lambda: source.watch_versions == ["10"])
    source.event("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "42"}})
    source.stream.put_nowait(END)  # the server closed the watch (timeoutSeconds, restart...)
    await until(running, lambda: len(source.watch_versions) == 2)
    assert source.watch_versions == ["10", "42"]
    assert source.list_calls == 1
    assert running.stats.resumed == 1


async def test_gone_forces_a_full_relist_that_drops_vanished_objects(
    source: ScriptedSource, running: Informer[PodInfo]
) -> None:
    seen: list[tuple[str, str]] = []
    running.add_handler(lambda change: seen.append((change.type, change.key[1])))
    await until(running, lambda: source.watch_versions == ["10"])
    source.objects = {"a": pod("a"), "b": pod("b")}
    source.event("ADDED", pod("a", rv="11"))
    source.event("ADDED", pod("b", rv="12"))
    await until(running, lambda: len(running) == 2)
    seen.clear()
    del source.objects["a"]
    source.objects["c"] = pod("c")
    source.objects["b"] = pod("b", ready=False)
    source.version = "50"
    source.stream.put_nowait(WatchGone("too old resource version"))
    await until(running, lambda: source.watch_versions == ["10", "50"])
    assert source.list_calls == 2
    assert running.stats.gone == 1
    assert sorted(seen) == [("ADDED", "c"), ("DELETED", "a"), ("MODIFIED", "b")]
    assert running.get("default", "a") is None


async def test_errors_back_off_and_retry_the_list(source: ScriptedSource) -> None:
    source.objects = {"a": pod("a")}
    source.list_errors = [ConnectionError("refused"), RuntimeError("boom")]
    informer = pod_informer(source)
    task = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(DEADLINE):
            await informer.synced.wait()
        assert informer.stats.errors == 2
        assert source.list_calls == 3
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_watch_error_resumes_from_the_last_version_without_relisting(
    source: ScriptedSource, running: Informer[PodInfo]
) -> None:
    await until(running, lambda: source.watch_versions == ["10"])
    source.event("ADDED", pod("a", rv="12"))
    source.stream.put_nowait(ConnectionResetError("reset by peer"))
    await until(running, lambda: len(source.watch_versions) == 2)
    assert source.watch_versions == ["10", "12"]
    assert source.list_calls == 1
    assert running.stats.errors == 1


async def test_malformed_objects_are_skipped_not_fatal(
    source: ScriptedSource, running: Informer[PodInfo]
) -> None:
    await until(running, lambda: source.watch_versions == ["10"])
    source.event("ADDED", {"metadata": "not a mapping"})
    source.event("ADDED", {"metadata": {"namespace": "default"}})  # no name
    source.event("ADDED", pod("ok", rv="20"))
    await until(running, lambda: running.resource_version == "20")
    assert running.stats.skipped == 2
    assert [p.name for p in running.items()] == ["ok"]


async def test_a_failing_handler_does_not_stop_the_informer(
    source: ScriptedSource, running: Informer[PodInfo]
) -> None:
    def broken(change: Change[PodInfo]) -> None:
        raise RuntimeError("handler bug")

    running.add_handler(broken)
    await until(running, lambda: source.watch_versions == ["10"])
    source.event("ADDED", pod("a", rv="11"))
    source.event("ADDED", pod("b", rv="12"))
    await until(running, lambda: running.resource_version == "12")
    assert len(running) == 2


# --- the store and its indexes ----------------------------------------------------------------

OPS = st.lists(
    st.tuples(
        st.sampled_from(["put", "remove"]),
        st.sampled_from(["p1", "p2", "p3", "p4"]),
        st.sampled_from(["rs-a", "rs-b", None]),
    ),
    max_size=40,
)


@given(OPS)
def test_indexes_always_agree_with_the_objects(ops: list[tuple[str, str, str | None]]) -> None:
    store: Store[ReplicaSetInfo] = Store({"owner": lambda rs: rs.owner_deployment})
    for op, name, owner in ops:
        if op == "put":
            store.put(("ns", name), ReplicaSetInfo("ns", name, "uid", owner))
        else:
            store.remove(("ns", name))
    for owner in ("rs-a", "rs-b"):
        expected = sorted(name for (_, name), rs in store.items() if rs.owner_deployment == owner)
        assert [rs.name for rs in store.by_index("owner", "ns", owner)] == expected


# --- memory -----------------------------------------------------------------------------------


def realistic_pods(count: int) -> Iterator[dict[str, Any]]:
    for index in range(count):
        raw = pod(f"checkout-api-7f9c8d6b5-{index:05d}", "checkout-api-7f9c8d6b5",
                  namespace=f"team-{index % 20}", rv=str(1000 + index))  # fmt: skip
        raw["metadata"]["uid"] = f"5c1f0b7e-1d2a-4c3b-9e8f-{index:012d}"
        raw["metadata"]["labels"] = {"app": "checkout-api", "pod-template-hash": "7f9c8d6b5"}
        raw["metadata"]["managedFields"] = [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]
        raw["spec"]["nodeName"] = f"ip-10-0-{index % 50}-1.eu-west-1.compute.internal"
        raw["spec"]["containers"] = [{"name": "app", "image": "registry/app:1", "env": []}]
        yield raw


def test_a_cached_pod_costs_well_under_2_kib() -> None:
    count = 2000
    store: Store[PodInfo] = Store({"replicaset": lambda p: p.owner_replicaset})
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for raw in realistic_pods(count):  # each raw object is dropped once transformed
            info = PodInfo.from_object(raw)
            store.put((info.namespace, info.name), info)
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(store) == count
    assert retained / count < 1024, f"{retained / count:.0f} bytes per cached pod"


async def test_empty_watches_back_off_instead_of_spinning(
    source: ScriptedSource, running: Informer[PodInfo]
) -> None:
    await until(running, lambda: source.watch_versions == ["10"])
    delays: list[float] = []
    backoff = running._backoff
    original = backoff.next_delay

    def recorded() -> float:
        delays.append(original())
        return delays[-1]

    backoff.next_delay = recorded  # type: ignore[method-assign]
    for _ in range(3):
        source.stream.put_nowait(END)
    await until(running, lambda: len(source.watch_versions) == 4)
    assert len(delays) == 3
    assert source.list_calls == 1


async def test_default_watch_timeouts_end_before_a_watch_could_look_silent(
    source: ScriptedSource,
) -> None:
    seen: list[int] = []
    watch = source.watch

    def recording(resource_version: str, timeout_seconds: int) -> AsyncIterator[RawWatchEvent]:
        seen.append(timeout_seconds)
        return watch(resource_version, timeout_seconds)

    source.watch = recording  # type: ignore[method-assign]
    informer = pod_informer(source)
    task = asyncio.create_task(informer.run())
    try:
        for _ in range(20):
            count = len(seen)
            await until(informer, lambda count=count: len(seen) > count)  # type: ignore[misc]
            source.stream.put_nowait(END)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert all(60 <= timeout < 120 for timeout in seen)  # client-go's spread, scaled to 2 min
    assert informer.silence_limit == 125.0
    assert len(set(seen)) > 1  # jittered


async def test_a_silent_watch_is_abandoned_and_the_informer_re_lists(
    source: ScriptedSource,
) -> None:
    """Issue 15: a half-open watch (nothing, not even bookmarks) went unnoticed 6-11 min."""
    source.objects = {"a": pod("a")}
    informer = Informer("pods", source, PodInfo.from_object, backoff=Backoff(0.001, 0.002),
                        silence_limit=0.2)  # fmt: skip
    task = asyncio.create_task(informer.run())
    try:
        await until(informer, lambda: source.watch_versions == ["10"])
        # The stream stays open and silent; meanwhile the cluster changes.
        source.objects["b"] = pod("b", rv="11")
        source.version = "11"
        await until(informer, lambda: informer.get("default", "b") is not None)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert informer.stats.silent >= 1
    assert source.list_calls >= 2


async def test_staleness_counts_from_the_last_sign_of_life(source: ScriptedSource) -> None:
    now = [100.0]
    source.objects = {"a": pod("a")}
    informer = Informer("pods", source, PodInfo.from_object, backoff=Backoff(0.001, 0.002),
                        monotonic=lambda: now[0])  # fmt: skip
    assert informer.staleness() == float("inf")  # never listed
    task = asyncio.create_task(informer.run())
    try:
        await until(informer, lambda: source.watch_versions == ["10"])
        assert informer.staleness() == 0.0
        now[0] = 130.0
        assert informer.staleness() == 30.0
        source.event("BOOKMARK", {"metadata": {"resourceVersion": "12"}})
        await until(informer, lambda: informer.resource_version == "12")
        assert informer.staleness() == 0.0
        now[0] = 140.0
        source.stream.put_nowait(END)  # the server ends the watch: alive
        await until(informer, lambda: len(source.watch_versions) == 2)
        assert informer.staleness() == 0.0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class PagedApi:
    """list_page over three pages, recording the order of requests and page hand-outs."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.log: list[str] = []
        self.fail_on = fail_on
        self.cancelled: list[str] = []

    async def list_page(self, resource: object, namespace: object, *, limit: int,
                        continue_token: str | None,
                        field_selector: str | None = None) -> RawListPage:  # fmt: skip
        token = continue_token or "p1"
        self.log.append(f"request {token}")
        try:
            await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            self.cancelled.append(token)
            raise
        if token == self.fail_on:
            raise RuntimeError(f"{token} failed")
        following = {"p1": "p2", "p2": "p3", "p3": ""}[token]
        item = msgspec.json.encode({"metadata": {"name": token}})
        return RawListPage("7", following, [msgspec.Raw(item)])


def lister(api: PagedApi) -> LightkubeListWatch:
    return LightkubeListWatch(api, Pod, None, page_size=1)  # type: ignore[arg-type]


async def test_list_requests_the_next_page_before_handing_out_the_current() -> None:
    api = PagedApi()
    names = []
    async for chunk in lister(api).list():
        api.log.append("handed out")
        names += [decode(item)["metadata"]["name"] for item in chunk.items]
    assert names == ["p1", "p2", "p3"]
    assert api.log == ["request p1", "request p2", "handed out", "request p3", "handed out",
                       "handed out"]  # fmt: skip


async def test_a_list_abandoned_early_cancels_its_prefetch() -> None:
    api = PagedApi()
    pages = lister(api).list()
    async for _ in pages:
        break
    await pages.aclose()  # type: ignore[attr-defined]
    await asyncio.sleep(0)
    assert api.cancelled == ["p2"]


async def test_a_failing_page_fails_the_list_in_order() -> None:
    api = PagedApi(fail_on="p2")
    seen = []
    with pytest.raises(RuntimeError, match="p2 failed"):
        async for chunk in lister(api).list():
            seen += [decode(item)["metadata"]["name"] for item in chunk.items]
    assert seen == ["p1"]


class RawSource(ScriptedSource):
    """Lists hand out their items still encoded, as LightkubeListWatch does."""

    async def list(self) -> AsyncIterator[ListChunk]:
        self.list_calls += 1
        items = [msgspec.Raw(msgspec.json.encode(obj)) for obj in self.objects.values()]
        yield ListChunk(self.version, items)


async def test_encoded_items_take_the_fast_decode_or_else_the_transform() -> None:
    source = RawSource()
    nameless: dict[str, Any] = {"metadata": {}}
    for obj in (pod("fast-1"), pod("slow"), pod("fast-2", rs=None), nameless):
        source.objects[obj["metadata"].get("name", "nameless")] = obj
    declined: list[str] = []

    def fast(raw: msgspec.Raw) -> tuple[tuple[str, str], PodInfo] | None:
        obj = decode(raw)
        name = obj["metadata"].get("name", "nameless")
        if not name.startswith("fast"):
            declined.append(name)
            return None
        return ("default", name), PodInfo.from_object(obj)

    informer: Informer[PodInfo] = Informer("pods", source, PodInfo.from_object,
                                           indexers={"replicaset": lambda p: p.owner_replicaset},
                                           fast_decode=fast)  # fmt: skip
    task = asyncio.create_task(informer.run())
    try:
        await until(informer, lambda: informer.synced.is_set())
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert declined == ["slow", "nameless"]
    assert sorted(p.name for p in informer.items()) == ["fast-1", "fast-2", "slow"]
    assert informer.stats.skipped == 1  # the nameless one, through the tolerant path
    assert [p.name for p in informer.by_index("replicaset", "default", "web-5d9")] == [
        "fast-1", "slow"]  # fmt: skip
