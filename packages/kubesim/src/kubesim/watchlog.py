"""WatchLog: everything some collections went through, in order, from the moment you start looking.

kubesim's one watch-to-timeline helper. Each collection is followed by an `Informer` (list,
then watch with resume, re-list on 410, back-off), and every change it reports is kept in
`events` (the initial items as ADDED), stamped with the injected clock in `times`.
Listeners get each change as it is kept (the availability recorder feeds its ledger from
them). `wait_until` awaits a condition, re-checked after every change and every `notify`;
`until` awaits the first event matching a predicate, so callers wait for what happened
instead of sleeping, and the log keeps the sequence for asserting on order afterwards.

`watch_until` is the one-shot wait on what a collection holds now (no log kept): the objects
once a predicate over all of them holds, for the tests and the benchmarks alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence

from kubesim.client import KubeClient
from kubesim.cluster.runtime import Informer
from kubesim.lifecycle import Lifecycle
from kubesim.types import Obj

WATCH_BOUND = 90.0  # watch_until's default bound: a guard against hangs only

Predicate = Callable[[str, Obj], bool]
# (collection path, event type, object, clock reading)
Listener = Callable[[str, str, Obj, float], None]


class WatchLog(Lifecycle):
    def __init__(
        self,
        client: KubeClient,
        paths: str | Sequence[str],
        *,
        clock: Callable[[], float] = time.monotonic,
        keep: bool = True,
    ) -> None:
        """`keep=False`: hand each change to the listeners and waiters without keeping it in
        `events` (a long recording then holds no old objects; `until` is not available)."""
        self.client = client
        self.paths = [paths] if isinstance(paths, str) else list(paths)
        self.clock = clock
        self.keep = keep
        self.events: list[tuple[str, Obj]] = []
        self.times: list[float] = []
        self.listeners: list[Listener] = []
        self._changed = asyncio.Event()
        self._informers = [self._follow(path) for path in self.paths]

    def _follow(self, path: str) -> Informer:
        informer = Informer.at_path(self.client, path)

        def keep(type_: str, obj: Obj, _old: Obj | None) -> None:
            at = self.clock()
            if self.keep:
                self.events.append((type_, obj))
                self.times.append(at)
            for listener in self.listeners:
                listener(path, type_, obj, at)
            self.notify()

        informer.add_handler(keep)
        return informer

    @property
    def path(self) -> str:
        return self.paths[0]

    def add_listener(self, listener: Listener) -> None:
        self.listeners.append(listener)

    # lifecycle

    async def start(self, within: float = 30.0) -> WatchLog:
        """Return once every collection is listed; `within` bounds that (seconds)."""
        try:
            async with asyncio.timeout(within):
                await asyncio.gather(*(informer.start() for informer in self._informers))
        except BaseException:
            await self.stop()
            raise
        return self

    async def stop(self) -> None:
        await asyncio.gather(*(informer.stop() for informer in self._informers))

    # waiting

    def notify(self) -> None:
        """Wake the waiters to re-check their conditions (something they read changed)."""
        self._changed.set()

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Return once `condition()` holds. Bound it with `asyncio.timeout` if it may never."""
        while not condition():
            self._changed.clear()
            await self._changed.wait()

    async def until(self, predicate: Predicate, since: int = 0, within: float = 15.0) -> int:
        """The index of the first event from `since` on that satisfies `predicate`.

        `within` bounds the wait (seconds) so a broken expectation fails instead of hanging.
        """
        if not self.keep:
            raise RuntimeError("this WatchLog keeps no events (keep=False): wait_until instead")
        index = since

        def seen() -> bool:
            nonlocal index
            while index < len(self.events):
                if predicate(*self.events[index]):
                    return True
                index += 1
            return False

        async with asyncio.timeout(within):
            await self.wait_until(seen)
        return index

    async def until_obj(self, predicate: Predicate, since: int = 0, within: float = 15.0) -> Obj:
        return self.events[await self.until(predicate, since, within)][1]

    def of(self, name: str) -> list[tuple[int, str, Obj]]:
        """(index, type, object) of every event about the object called `name`."""
        return [(i, t, o) for i, (t, o) in enumerate(self.events) if o["metadata"]["name"] == name]


async def watch_until(
    client: KubeClient, api_version: str, plural: str, kind: str, namespace: str | None,
    predicate: Callable[[list[Obj]], bool], *, bound: float = WATCH_BOUND,
) -> list[Obj]:  # fmt: skip
    """Return the objects once `predicate(all objects)` holds, re-checked on every watch event
    (list, then watch, from the `Informer`: bookmarks, re-list on 410); `bound` (seconds)
    makes a condition that never comes fail instead of hanging."""
    informer = Informer(client, api_version, plural, kind, namespace=namespace)
    changed = asyncio.Event()
    informer.add_handler(lambda *_: changed.set())
    task = asyncio.get_running_loop().create_task(informer.run())
    try:
        async with asyncio.timeout(bound):
            await informer.synced.wait()
            while not predicate(informer.items()):
                changed.clear()
                await changed.wait()
        return informer.items()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
