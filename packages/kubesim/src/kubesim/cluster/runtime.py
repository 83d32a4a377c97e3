"""The controller runtime kubesim's built-in controllers share: informers and work queues.

Like client-go: an `Informer` lists, then watches from the list's
resourceVersion with bookmarks, resumes from the last version it saw, re-lists
on 410 Gone and backs off on errors. A `WorkQueue` deduplicates keys and
delays retries. Controllers never poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import aiohttp

from ..client import ApiStatusError, KubeClient, resource_path

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name)
Handler = Callable[[str, Obj, Obj | None], None]

log = logging.getLogger(__name__)


def key_of(obj: Obj) -> Key:
    meta = obj["metadata"]
    return (meta.get("namespace", "") or "", meta["name"])


class Informer:
    def __init__(
        self,
        client: KubeClient,
        api_version: str,
        plural: str,
        kind: str,
        namespace: str | None = None,
        field_selector: str | None = None,
        watch_timeout: int = 300,
    ) -> None:
        self.client = client
        self.api_version = api_version
        self.kind = kind
        self.path = resource_path(api_version, plural, namespace)
        self.field_selector = field_selector
        self.cache: dict[Key, Obj] = {}
        self.handlers: list[Handler] = []
        self.synced = asyncio.Event()
        self.resource_version = ""
        self._watch_timeout = watch_timeout
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Run in a task of its own, returning once the first list is in the cache."""
        self._task = asyncio.get_running_loop().create_task(
            self.run(), name=f"informer-{self.kind}"
        )
        await self.synced.wait()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def add_handler(self, handler: Handler) -> None:
        self.handlers.append(handler)

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.cache.get((namespace, name))

    def items(self) -> list[Obj]:
        return list(self.cache.values())

    def _emit(self, type_: str, obj: Obj, old: Obj | None) -> None:
        for handler in self.handlers:
            handler(type_, obj, old)

    async def _list(self) -> None:
        params = {"fieldSelector": self.field_selector} if self.field_selector else None
        listed = await self.client.get(self.path, params)
        fresh = {}
        for item in listed.get("items", []):
            item.setdefault("kind", self.kind)
            item.setdefault("apiVersion", self.api_version)
            fresh[key_of(item)] = item
        for key, gone in list(self.cache.items()):
            if key not in fresh:
                del self.cache[key]
                self._emit("DELETED", gone, gone)
        for key, obj in fresh.items():
            old = self.cache.get(key)
            self.cache[key] = obj
            if old is None:
                self._emit("ADDED", obj, None)
            elif old["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                self._emit("MODIFIED", obj, old)
        self.resource_version = listed.get("metadata", {}).get("resourceVersion", "")
        self.synced.set()

    async def run(self) -> None:
        backoff = 0.1
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                params = {"fieldSelector": self.field_selector} if self.field_selector else None
                async for event in self.client.watch(
                    self.path, self.resource_version, self._watch_timeout, params
                ):
                    if not self._apply(event):
                        need_list = True
                        break
                backoff = 0.1
            except ApiStatusError as err:
                if err.code == 410:
                    need_list = True
                    continue
                log.debug("informer %s: %s", self.path, err)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
            except (aiohttp.ClientError, TimeoutError, ValueError) as err:
                log.debug("informer %s: %s", self.path, err)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    def _apply(self, event: Obj) -> bool:
        """Apply one watch event; False means the watch must re-list (410 Gone)."""
        type_, obj = event.get("type"), event.get("object") or {}
        if type_ == "ERROR":
            return obj.get("code") != 410
        rv = obj.get("metadata", {}).get("resourceVersion", "")
        if type_ == "BOOKMARK":
            self.resource_version = rv
            return True
        key = key_of(obj)
        old = self.cache.get(key)
        if type_ == "DELETED":
            self.cache.pop(key, None)
        else:
            self.cache[key] = obj
        self.resource_version = rv
        self._emit(str(type_), obj, old)
        return True


class WorkQueue:
    """Deduplicating queue of keys with delayed re-adds, like client-go's workqueue."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._pending: set[Key] = set()
        self._timers: dict[Key, asyncio.TimerHandle] = {}

    def add(self, key: Key) -> None:
        if key not in self._pending:
            self._pending.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: Key, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        existing = self._timers.get(key)
        when = loop.time() + delay
        if existing is not None and existing.when() <= when:
            return
        if existing is not None:
            existing.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key)

    def _fire(self, key: Key) -> None:
        self._timers.pop(key, None)
        self.add(key)

    async def get(self) -> Key:
        key = await self._queue.get()
        self._pending.discard(key)
        return key

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()


class Controller:
    """A reconcile loop over a work queue. Subclasses set up informers and `reconcile`."""

    name = "controller"

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.queue = WorkQueue()
        self.informers: list[Informer] = []
        self._tasks: list[asyncio.Task[None]] = []

    def informer(
        self, api_version: str, plural: str, kind: str, field_selector: str | None = None
    ) -> Informer:
        inf = Informer(self.client, api_version, plural, kind, field_selector=field_selector)
        self.informers.append(inf)
        return inf

    async def reconcile(self, key: Key) -> float | None:
        """Bring one object to its desired state. Return a delay to requeue, or None."""
        raise NotImplementedError

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for inf in self.informers:
            self._tasks.append(loop.create_task(inf.run(), name=f"{self.name}-informer"))
        await asyncio.gather(*(inf.synced.wait() for inf in self.informers))
        self._tasks.append(loop.create_task(self._work(), name=f"{self.name}-worker"))

    async def stop(self) -> None:
        self.queue.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    async def _work(self) -> None:
        retries: dict[Key, int] = {}
        while True:
            key = await self.queue.get()
            try:
                delay = await self.reconcile(key)
                retries.pop(key, None)
                if delay is not None:
                    self.queue.add_after(key, delay)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                count = retries[key] = retries.get(key, 0) + 1
                if not isinstance(err, ApiStatusError) or err.code != 409:
                    log.warning("%s: reconcile %s failed: %s", self.name, key, err)
                self.queue.add_after(key, min(0.005 * 2**count, 5.0))
