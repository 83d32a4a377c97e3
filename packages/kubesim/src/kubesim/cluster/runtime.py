"""The controller runtime kubesim's components share: one informer, one work queue, one retry loop.

Like client-go: an `Informer` lists, then watches from the list's resourceVersion with
bookmarks, resumes from the last version it saw, re-lists on 410 Gone and backs off on any
other failure (`Backoff`, reset by a list or watch that worked). An object it cannot key (no
metadata.name) is skipped and logged, and a handler that raises is logged: neither stops the
informer. A `WorkQueue` deduplicates keys, delays re-adds and rate-limits retries per key; a
`Controller` is the one retry loop over it. Components start and stop informers with
`Informer.start()`/`stop()`; nothing polls.

Controllers built while `SharedInformers.building(...)` is in effect share one informer per
collection, as kube-controller-manager's controllers share its SharedInformerFactory: one
list and one watch per resource for all of them, one cache whose objects they must not
mutate (they copy before changing anything), and a handler added to a running informer is
first handed every cached object as ADDED, as client-go's AddEventHandler does.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable, Iterator

from kubesim.lifecycle import cancel_and_wait

from ..backoff import Backoff
from ..client import ApiStatusError, KubeClient, resource_path
from ..types import Key, Obj

Handler = Callable[[str, Obj, Obj | None], None]

log = logging.getLogger(__name__)

# Informers: 0.1 s after the first failure, doubling to 5 s.
INFORMER_BACKOFF = (0.1, 5.0)
# Work-queue retries (client-go's ItemExponentialFailureRateLimiter, faster): 5 ms doubling to 5 s.
RETRY_BACKOFF = (0.005, 5.0)


class Unkeyable(ValueError):
    """An object without metadata.name: the informer cannot cache it."""


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(meta, dict) or not isinstance(name, str) or not name:
        raise Unkeyable(f"object without metadata.name: {str(obj)[:200]}")
    return (meta.get("namespace") or "", name)


def _controller_uid(obj: Obj) -> str:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return str(ref.get("uid", ""))
    return ""


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
        *,
        path: str | None = None,
    ) -> None:
        self.client = client
        self.api_version = api_version
        self.kind = kind
        self.path = path or resource_path(api_version, plural, namespace)
        self.field_selector = field_selector
        self.cache: dict[Key, Obj] = {}
        # The cache by controller UID ("" for objects without a controller), built on first
        # use, then kept with the cache (client-go's controllerUID indexers).
        self._by_controller: dict[str, dict[Key, Obj]] | None = None
        self.handlers: list[Handler] = []
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.backoff = Backoff(*INFORMER_BACKOFF)
        self._watch_timeout = watch_timeout
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def at_path(cls, client: KubeClient, path: str) -> Informer:
        """An informer over any collection path, its objects kept as served."""
        return cls(client, "", "", "", path=path)

    async def start(self) -> None:
        """Run in a task of its own, returning once the first list is in the cache."""
        if self._task is not None:
            await self.synced.wait()
            return
        task = self._task = asyncio.get_running_loop().create_task(
            self.run(), name=f"informer-{self.kind or self.path}"
        )
        synced = asyncio.get_running_loop().create_task(self.synced.wait())
        try:
            await asyncio.wait({task, synced}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            synced.cancel()
        if task.done():
            task.result()  # run() ended before the first list: raise why

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    def add_handler(self, handler: Handler) -> None:
        self.handlers.append(handler)
        for obj in list(self.cache.values()):  # a running (shared) informer: catch up
            try:
                handler("ADDED", obj, None)
            except Exception:
                log.exception("informer %s: handler failed on ADDED", self.path)

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.cache.get((namespace, name))

    def items(self) -> list[Obj]:
        return list(self.cache.values())

    def controlled_by(self, uid: str) -> list[Obj]:
        """The cached objects whose controller (ownerReference with controller: true) has
        this UID; with "", those without a controller. In no particular order (as an
        indexer's), though the same for the same events."""
        if self._by_controller is None:
            self._by_controller = {}
            for key, obj in self.cache.items():
                self._by_controller.setdefault(_controller_uid(obj), {})[key] = obj
        return list(self._by_controller.get(uid, {}).values())

    def _put(self, key: Key, obj: Obj) -> None:
        old = self.cache.get(key)
        self.cache[key] = obj
        if self._by_controller is not None:
            uid = _controller_uid(obj)
            if old is not None:
                was = _controller_uid(old)
                if was != uid:
                    self._unindex(was, key)
            self._by_controller.setdefault(uid, {})[key] = obj

    def _drop(self, key: Key) -> None:
        old = self.cache.pop(key, None)
        if old is not None and self._by_controller is not None:
            self._unindex(_controller_uid(old), key)

    def _unindex(self, uid: str, key: Key) -> None:
        assert self._by_controller is not None
        bucket = self._by_controller.get(uid)
        if bucket is not None:
            bucket.pop(key, None)
            if not bucket:
                del self._by_controller[uid]

    def _emit(self, type_: str, obj: Obj, old: Obj | None) -> None:
        for handler in self.handlers:
            try:
                handler(type_, obj, old)
            except Exception:
                log.exception("informer %s: handler failed on %s", self.path, type_)

    def _params(self) -> dict[str, str] | None:
        return {"fieldSelector": self.field_selector} if self.field_selector else None

    async def _list(self) -> None:
        listed = await self.client.get(self.path, self._params())
        fresh = {}
        for item in listed.get("items", []):
            try:
                key = key_of(item)
            except Unkeyable as err:
                log.warning("informer %s: skipped: %s", self.path, err)
                continue
            if self.kind:
                item.setdefault("kind", self.kind)
                item.setdefault("apiVersion", self.api_version)
            fresh[key] = item
        for key, gone in list(self.cache.items()):
            if key not in fresh:
                self._drop(key)
                self._emit("DELETED", gone, gone)
        for key, obj in fresh.items():
            old = self.cache.get(key)
            self._put(key, obj)
            if old is None:
                self._emit("ADDED", obj, None)
            elif old["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                self._emit("MODIFIED", obj, old)
        self.resource_version = listed.get("metadata", {}).get("resourceVersion", "")
        self.synced.set()

    async def run(self) -> None:
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    self.backoff.reset()
                async for event in self.client.watch(
                    self.path, self.resource_version, self._watch_timeout, self._params()
                ):
                    self.backoff.reset()
                    if not self._apply(event):
                        need_list = True
                        break
            except asyncio.CancelledError:
                raise
            except ApiStatusError as err:
                if err.code == 410:
                    need_list = True
                    continue
                await self._back_off(err)
            except Exception as err:
                await self._back_off(err)

    async def _back_off(self, err: Exception) -> None:
        delay = self.backoff.next_delay()
        log.debug("informer %s: %s; retrying in %.2fs", self.path, err, delay)
        await asyncio.sleep(delay)

    def _apply(self, event: Obj) -> bool:
        """Apply one watch event; False means the watch must re-list (410 Gone)."""
        type_, obj = event.get("type"), event.get("object") or {}
        if type_ == "ERROR":
            return obj.get("code") != 410
        rv = obj.get("metadata", {}).get("resourceVersion", "")
        if type_ == "BOOKMARK":
            self.resource_version = rv
            return True
        try:
            key = key_of(obj)
        except Unkeyable as err:
            log.warning("informer %s: skipped %s event: %s", self.path, type_, err)
            self.resource_version = rv or self.resource_version
            return True
        old = self.cache.get(key)
        if type_ == "DELETED":
            self._drop(key)
        else:
            self._put(key, obj)
        self.resource_version = rv
        self._emit(str(type_), obj, old)
        return True


class SharedInformers:
    """One informer per collection for every controller built while it is `building`."""

    _current: contextvars.ContextVar[SharedInformers | None] = contextvars.ContextVar(
        "shared_informers", default=None
    )

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._informers: dict[tuple[str, str, str, str | None], Informer] = {}

    @classmethod
    def current(cls) -> SharedInformers | None:
        return cls._current.get()

    @contextlib.contextmanager
    def building(self) -> Iterator[None]:
        """Controllers constructed inside take their informers from here."""
        token = self._current.set(self)
        try:
            yield
        finally:
            self._current.reset(token)

    def informer(
        self, api_version: str, plural: str, kind: str, field_selector: str | None = None
    ) -> Informer:
        key = (api_version, plural, kind, field_selector)
        inf = self._informers.get(key)
        if inf is None:
            inf = Informer(self.client, api_version, plural, kind, field_selector=field_selector)
            self._informers[key] = inf
        return inf

    def owns(self, inf: Informer) -> bool:
        return any(inf is mine for mine in self._informers.values())

    async def stop(self) -> None:
        await asyncio.gather(*(inf.stop() for inf in self._informers.values()))


class WorkQueue:
    """Deduplicating queue of keys with delayed and rate-limited re-adds, like client-go's:
    a key is handed to one worker at a time; added again while a worker has it, it is queued
    once that worker is `done` with it."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._pending: set[Key] = set()
        self._processing: set[Key] = set()
        self._dirty: set[Key] = set()  # added while being processed
        self._timers: dict[Key, asyncio.TimerHandle] = {}
        self._failures: dict[Key, Backoff] = {}

    def add(self, key: Key) -> None:
        if key in self._processing:
            self._dirty.add(key)
        elif key not in self._pending:
            self._pending.add(key)
            self._queue.put_nowait(key)

    def __len__(self) -> int:
        """Keys waiting for a worker."""
        return self._queue.qsize()

    def done(self, key: Key) -> None:
        """The worker that got `key` is finished with it."""
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

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

    def add_rate_limited(self, key: Key) -> None:
        """Re-add after this key's next back-off delay (it failed again)."""
        backoff = self._failures.setdefault(key, Backoff(*RETRY_BACKOFF))
        self.add_after(key, backoff.next_delay())

    def forget(self, key: Key) -> None:
        """The key was handled: its next failure starts the back-off afresh."""
        self._failures.pop(key, None)

    def _fire(self, key: Key) -> None:
        self._timers.pop(key, None)
        self.add(key)

    async def get(self) -> Key:
        """The next key; call `done(key)` when finished with it."""
        key = await self._queue.get()
        self._pending.discard(key)
        self._processing.add(key)
        return key

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()


Reconcile = Callable[[Key], Awaitable[float | None]]


# A reconcile that raced another writer (409) or a deletion (404): retried without a warning,
# which `kubesim serve` would print on its user's terminal for every `kubectl delete`.
QUIET_RETRIES = (404, 409)


class Controller:
    """Reconcile loops over work queues. Subclasses set up informers and `reconcile`.

    Each loop is the one retry loop: a key whose handler raises is re-added with its own
    back-off (quietly for a 409 Conflict, the next try reads the newer object, and a 404, an
    object deleted meanwhile: the next try finds it gone), a handled key's back-off is
    forgotten, and a returned delay requeues it after that delay.
    """

    name = "controller"
    # Workers per loop, each handling a different key (kube-controller-manager's
    # --concurrent-*-syncs, 5 for Deployments and ReplicaSets; a key is never handled by two
    # at once). kubesim's controllers keep one: on one event loop, more workers only raced
    # their own writes (more status writes, and conflicts: bench/README.md, "Drain, issue 14").
    workers = 1

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.queue = WorkQueue()
        self.informers: list[Informer] = []
        self._shared = SharedInformers.current()
        self._loops: list[tuple[str, WorkQueue, Reconcile]] = [
            ("reconcile", self.queue, self.reconcile)
        ]
        self._workers: list[asyncio.Task[None]] = []

    def informer(
        self, api_version: str, plural: str, kind: str, field_selector: str | None = None
    ) -> Informer:
        if self._shared is not None:
            inf = self._shared.informer(api_version, plural, kind, field_selector)
        else:
            inf = Informer(self.client, api_version, plural, kind, field_selector=field_selector)
        self.informers.append(inf)
        return inf

    def add_loop(self, what: str, queue: WorkQueue, handle: Reconcile) -> None:
        """Another loop of this controller over a queue of its own, started with the first."""
        self._loops.append((what, queue, handle))

    async def reconcile(self, key: Key) -> float | None:
        """Bring one object to its desired state. Return a delay to requeue, or None."""
        raise NotImplementedError

    async def start(self) -> None:
        await asyncio.gather(*(inf.start() for inf in self.informers))
        loop = asyncio.get_running_loop()
        self._workers = [
            loop.create_task(self._work(*spec), name=f"{self.name}-{spec[0]}-{n}")
            for spec in self._loops
            for n in range(self.workers)
        ]

    async def stop(self) -> None:
        for _what, queue, _handle in self._loops:
            queue.close()
        workers, self._workers = self._workers, []
        await cancel_and_wait(*workers)
        shared = self._shared
        # shared informers are stopped by whoever shares them, after every controller
        await asyncio.gather(
            *(inf.stop() for inf in self.informers if shared is None or not shared.owns(inf))
        )

    async def _work(self, what: str, queue: WorkQueue, handle: Reconcile) -> None:
        while True:
            key = await queue.get()
            try:
                delay = await handle(key)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                if not isinstance(err, ApiStatusError) or err.code not in QUIET_RETRIES:
                    log.warning("%s: %s %s failed: %s", self.name, what, key, err)
                queue.add_rate_limited(key)
                continue
            finally:
                queue.done(key)
            queue.forget(key)
            if delay is not None:
                queue.add_after(key, delay)
