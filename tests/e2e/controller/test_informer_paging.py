"""The informer's paged list against kubesim over HTTPS, with the next page prefetched while
the current one is decoded: pages applied in order, a continue token refused mid-list (410)
followed by a fresh list, the prefetch cancelled with the informer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Pod

from graceful_drain.controller.decision.model import PodInfo
from graceful_drain.kube.client import RawApi, RawListPage
from graceful_drain.kube.informer import Change, Informer, LightkubeListWatch
from kubesim.apiserver.faults import FaultRule
from kubesim.sim import KubeSim

from .conftest import DEADLINE, quick_backoff

pytestmark = pytest.mark.e2e

PAGE_SIZE = 2
PODS = [("alpha", f"web-{index}") for index in range(4)] + [("beta", f"api-{i}") for i in range(3)]


class WatchedApi(RawApi):
    """RawApi that runs `after_page(n)` once the n-th list page is in, before it is handed out
    (so before the next page is requested)."""

    def __init__(self, client: AsyncClient, after_page: Callable[[int], None]) -> None:
        super().__init__(client)
        self.after_page = after_page
        self.pages = 0

    async def list_page(self, *args: Any, **kwargs: Any) -> RawListPage:
        page = await super().list_page(*args, **kwargs)
        self.pages += 1
        self.after_page(self.pages)
        return page


@pytest.fixture
async def sim() -> AsyncIterator[KubeSim]:
    """This module's kubesim, seeded with PODS (conftest's `lk` connects to it)."""
    async with KubeSim() as sim:
        for namespace in sorted({namespace for namespace, _ in PODS}):
            sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        for namespace, name in PODS:
            sim.create({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": name, "namespace": namespace},
                        "spec": {"containers": [{"name": "app", "image": "app:1"}]}})  # fmt: skip
        yield sim


def informer_over(api: RawApi) -> Informer[PodInfo]:
    return Informer("pods", LightkubeListWatch(api, Pod, None, page_size=PAGE_SIZE),
                    PodInfo.from_object, backoff=quick_backoff(),
                    fast_decode=PodInfo.from_listed)  # fmt: skip


def pod_lists(sim: KubeSim) -> list[tuple[int, bool]]:
    """(status, whether it carried a continue token) of every finished list of pods."""
    out = []
    for record in sim.audit.records():
        if record.verb == "list" and record.resource == "pods":
            query = parse_qs(urlsplit(record.uri).query)
            out.append((record.code, "continue" in query))
    return out


async def synced(informer: Informer[PodInfo]) -> asyncio.Task[None]:
    task = asyncio.create_task(informer.run())
    async with asyncio.timeout(DEADLINE):
        await informer.synced.wait()
    return task


async def stopped(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_pages_are_applied_in_storage_order(sim: KubeSim, lk: AsyncClient) -> None:
    informer = informer_over(RawApi(lk))
    added: list[tuple[str, str]] = []

    def keep(change: Change[PodInfo]) -> None:
        added.append(change.key)

    informer.add_handler(keep)
    task = await synced(informer)
    await stopped(task)
    assert added == sorted(PODS)  # the order of the pages and of the items in each
    pages = -(-len(PODS) // PAGE_SIZE)
    assert pod_lists(sim) == [(200, False)] + [(200, True)] * (pages - 1)
    assert informer.stats.lists == 1 and informer.stats.errors == 0


async def test_a_continue_token_refused_mid_list_starts_a_fresh_list(
    sim: KubeSim, lk: AsyncClient
) -> None:
    def refuse_the_next(page: int) -> None:
        if page == 1:  # the second page's request (the prefetch) is answered 410
            sim.faults.add(FaultRule(verb="list", resource="pods", error_code=410, remaining=1))

    informer = informer_over(WatchedApi(lk, refuse_the_next))
    task = await synced(informer)
    await stopped(task)
    assert sorted((p.namespace, p.name) for p in informer.items()) == sorted(PODS)
    assert informer.stats.errors == 1 and informer.stats.lists == 1
    pages = -(-len(PODS) // PAGE_SIZE)
    # Page 1, the refused page 2, then the whole list again from its first page.
    assert pod_lists(sim) == [(200, False), (410, True), (200, False)] + [(200, True)] * (pages - 1)


def prefetches() -> list[asyncio.Task[Any]]:
    page = "LightkubeListWatch._page"
    return [t for t in asyncio.all_tasks() if getattr(t.get_coro(), "__qualname__", "") == page]


async def test_stopping_the_informer_cancels_its_prefetch(
    sim: KubeSim, lk: AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    hang = FaultRule(verb="list", resource="pods", hang=True, remaining=1)
    held = asyncio.Event()  # kubesim holds the prefetched page's request
    action_for = sim.faults.action_for

    def noting_the_hang(*args: Any) -> Any:
        action = action_for(*args)
        if action is not None and action.hang:
            held.set()
        return action

    monkeypatch.setattr(sim.faults, "action_for", noting_the_hang)

    def hang_the_next(page: int) -> None:
        if page == 1:
            sim.faults.add(hang)

    informer = informer_over(WatchedApi(lk, hang_the_next))
    task = asyncio.create_task(informer.run())
    async with asyncio.timeout(DEADLINE):
        await held.wait()
    [prefetch] = prefetches()
    async with asyncio.timeout(DEADLINE):
        await stopped(task)
    assert task.cancelled()
    assert prefetch.cancelled()
    assert not informer.synced.is_set()
    assert [t for t in prefetches() if not t.done()] == []
