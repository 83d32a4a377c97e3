"""WatchLog: everything a collection went through, in order, from the moment you start looking.

It lists, then watches from the list's resourceVersion, and keeps each event
(the initial items as ADDED). `until` awaits the first event matching a
predicate, so callers wait for what happened instead of sleeping; the log
keeps the sequence for asserting on order afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from .client import KubeClient

Obj = dict[str, Any]
Predicate = Callable[[str, Obj], bool]


class WatchLog:
    def __init__(self, client: KubeClient, path: str) -> None:
        self.client = client
        self.path = path
        self.events: list[tuple[str, Obj]] = []
        self._changed = asyncio.Event()
        self._listed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> WatchLog:
        self._task = asyncio.get_running_loop().create_task(self._run())
        listed = asyncio.get_running_loop().create_task(self._listed.wait())
        await asyncio.wait({self._task, listed}, return_when=asyncio.FIRST_COMPLETED)
        listed.cancel()
        if self._task.done():
            self._task.result()  # the list failed: raise its error
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        listed = await self.client.get(self.path)
        for item in listed.get("items", []):
            self._add("ADDED", item)
        self._listed.set()
        version = listed["metadata"]["resourceVersion"]
        async for event in self.client.watch(self.path, version):
            if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                self._add(event["type"], event["object"])

    def _add(self, type_: str, obj: Obj) -> None:
        self.events.append((type_, obj))
        self._changed.set()

    async def until(self, predicate: Predicate, since: int = 0, within: float = 15.0) -> int:
        """The index of the first event from `since` on that satisfies `predicate`.

        `within` bounds the wait (seconds) so a broken expectation fails instead of hanging.
        """
        async with asyncio.timeout(within):
            index = since
            while True:
                while index < len(self.events):
                    if predicate(*self.events[index]):
                        return index
                    index += 1
                self._changed.clear()
                await self._changed.wait()

    async def until_obj(self, predicate: Predicate, since: int = 0, within: float = 15.0) -> Obj:
        return self.events[await self.until(predicate, since, within)][1]

    def of(self, name: str) -> list[tuple[int, str, Obj]]:
        """(index, type, object) of every event about the object called `name`."""
        return [(i, t, o) for i, (t, o) in enumerate(self.events) if o["metadata"]["name"] == name]
