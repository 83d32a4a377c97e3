"""A generic informer: list, then watch, into a keyed store of slim objects with indexes.

    informer = Informer("pods", LightkubeListWatch(raw, Pod, None), PodInfo.from_object,
                        indexers={"replicaset": lambda pod: pod.owner_replicaset})
    task = asyncio.create_task(informer.run())
    await informer.synced.wait()
    informer.get("default", "web-1"); informer.by_index("replicaset", "default", "web-5d9")

The loop follows client-go's reflector (tools/cache/reflector.go): list (paged), remember the
list's resourceVersion, watch from it with allowWatchBookmarks, resume from the last
resourceVersion seen (event or bookmark) whenever a watch ends, re-list from scratch on
410 Gone, and back off exponentially with jitter after errors.

A watch that carries nothing, not even a bookmark, for `silence_limit` seconds is taken for a
half-open connection (a dead peer, a NAT or load balancer that dropped the flow): it is
abandoned and the informer re-lists at once. kube-apiserver sends every watcher a bookmark
about once a minute, so the default limit is two bookmark intervals plus a margin, and the
server-side `timeoutSeconds` is kept below it, so a healthy watch ends (and is resumed) before
it could look silent even from a server that sends no bookmarks. `staleness()` is how long
ago the informer last heard from the API server (a list, an event, a bookmark, a watch ended
by the server); /readyz and `graceful_drain_cache_staleness_seconds` report it.

Raw JSON never outlives the event it came in: the store keeps only what `transform` returns.
Objects the transform rejects (MalformedObject, or any exception) are skipped, counted and
logged, never fatal. A list page's items may come still encoded (msgspec.Raw, as
LightkubeListWatch hands them out): `fast_decode`, when given, turns one into its key and view
directly (typed decoding that skips the fields the view does not keep), and whatever it
declines (None) is decoded to dicts and goes through `_key_of` and `transform` as before.

Handlers (`add_handler`) see every change, including the ones a re-list implies, after the
store has applied it; they run synchronously on the loop and must not block.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

import msgspec
from lightkube.core.resource import NamespacedResource, Resource

from graceful_drain.kube.backoff import Backoff
from graceful_drain.kube.client import (
    RawApi,
    RawListPage,
    RawWatchEvent,
    WatchGone,
    decode,
    error_detail,
)
from graceful_drain.logs import get_logger

T = TypeVar("T")
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
ChangeType = Literal["ADDED", "MODIFIED", "DELETED"]
Indexer = Callable[[T], str | None]  # a value within the object's namespace, or None
# A listed object's raw JSON to its key and view, or None to take the tolerant path.
FastDecode = Callable[[msgspec.Raw], tuple[Key, T] | None]

LIST_PAGE_SIZE = 500
BOOKMARK_INTERVAL_SECONDS = 60.0  # kube-apiserver's watch cache: one bookmark a minute
DEFAULT_SILENCE_LIMIT_SECONDS = 2 * BOOKMARK_INTERVAL_SECONDS + 5.0
# Server-side watch timeouts spread over [limit/2, limit) like client-go's reflector spreads
# them over [minWatchTimeout, 2*minWatchTimeout), but short enough to end before the limit.
READ_TIMEOUT_MARGIN_SECONDS = 5.0

_log = get_logger("informer")


@dataclass(frozen=True, slots=True)
class ListChunk:
    resource_version: str
    items: Iterable[Any]  # raw JSON objects: decoded (mappings) or not yet (msgspec.Raw)


class ListWatch(Protocol):
    """Where an informer reads from. `watch` raises WatchGone on 410."""

    def list(self) -> AsyncIterator[ListChunk]: ...

    def watch(
        self, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[RawWatchEvent]: ...


class LightkubeListWatch:
    """A ListWatch over lightkube for one resource type, in one namespace or all (None)."""

    def __init__(
        self,
        api: RawApi,
        resource: type[Resource],
        namespace: str | None,
        page_size: int = 500,
        *,
        field_selector: str | None = None,
    ) -> None:
        self._api = api
        self._resource = resource
        namespaced = issubclass(resource, NamespacedResource)
        # lightkube: ALL_NS ("*") for every namespace, None for a cluster-scoped resource.
        self._namespace = ("*" if namespace is None else namespace) if namespaced else None
        self._page_size = page_size
        self._field_selector = field_selector  # e.g. metadata.name=x: RBAC resourceNames apply

    async def list(self) -> AsyncIterator[ListChunk]:
        """The pages in order, their items still encoded (msgspec.Raw: the informer decodes
        them); each next page is requested before the current one is handed out, so the
        server prepares and sends it while this process decodes and stores the current."""
        pending = asyncio.ensure_future(self._page(None))
        try:
            while True:
                page = await pending
                if page.continue_token:
                    pending = asyncio.ensure_future(self._page(page.continue_token))
                    await asyncio.sleep(0)  # the request goes out before our consumer's work
                yield ListChunk(page.resource_version, page.items)
                if not page.continue_token:
                    return
        finally:
            pending.cancel()  # the consumer stopped early; nothing when already done
            if pending.done() and not pending.cancelled():
                pending.exception()  # a prefetch nobody will read failing is not an error

    async def _page(self, continue_token: str | None) -> RawListPage:
        return await self._api.list_page(
            self._resource,
            self._namespace,
            limit=self._page_size,
            continue_token=continue_token,
            field_selector=self._field_selector,
        )

    def watch(self, resource_version: str, timeout_seconds: int) -> AsyncIterator[RawWatchEvent]:
        return self._api.watch(
            self._resource,
            self._namespace,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            read_timeout=timeout_seconds + READ_TIMEOUT_MARGIN_SECONDS,
            field_selector=self._field_selector,
        )


class WatchSilent(Exception):
    """A watch carried nothing, not even a bookmark, for the informer's silence limit."""


@dataclass(frozen=True, slots=True)
class Change(Generic[T]):
    type: ChangeType
    key: Key
    old: T | None
    new: T | None


@dataclass(slots=True)
class InformerStats:
    lists: int = 0  # completed full lists
    watches: int = 0  # watch requests started
    resumed: int = 0  # watches started from a resourceVersion after a previous watch ended
    gone: int = 0  # 410 Gone answers (each forces a re-list)
    errors: int = 0  # failed list or watch attempts (each followed by a back-off delay)
    skipped: int = 0  # objects the transform rejected
    events: int = 0  # watch events applied (bookmarks excluded)
    silent: int = 0  # watches abandoned as silent (half-open), each followed by a re-list


def _key_of(raw: Any) -> Key | None:
    metadata = raw.get("metadata") if isinstance(raw, Mapping) else None
    if not isinstance(metadata, Mapping):
        return None
    name, namespace = metadata.get("name"), metadata.get("namespace") or ""
    if not isinstance(name, str) or not name or not isinstance(namespace, str):
        return None
    return namespace, name


def _resource_version_of(raw: Any) -> str | None:
    metadata = raw.get("metadata") if isinstance(raw, Mapping) else None
    if not isinstance(metadata, Mapping):
        return None
    version = metadata.get("resourceVersion")
    return version if isinstance(version, str) and version else None


class Store(Generic[T]):
    """Objects by key, plus indexes: name -> (namespace, value) -> keys."""

    def __init__(self, indexers: Mapping[str, Indexer[T]]) -> None:
        self._indexers = dict(indexers)
        self._objects: dict[Key, T] = {}  # never replaced, only changed
        self._indexes: dict[str, dict[Key, set[str]]] = {name: {} for name in self._indexers}
        # The object at `key`, or None: the dict's own get (the webhook reads two or three
        # objects per admission; a method around it was one Python call more each).
        self.get: Callable[[Key], T | None] = self._objects.get

    def __len__(self) -> int:
        return len(self._objects)

    def items(self) -> Iterator[tuple[Key, T]]:
        return iter(list(self._objects.items()))

    def keys(self) -> set[Key]:
        return set(self._objects)

    def by_index(self, index: str, namespace: str, value: str) -> list[T]:
        """The objects under `value` in `index`, by name. The webhook asks for a Deployment's
        ReplicaSets and their pods, usually one each: one name needs no sorting."""
        names = self._indexes[index].get((namespace, value))
        if not names:
            return []
        get = self._objects.get
        if len(names) == 1:
            for name in names:
                obj = get((namespace, name))
                return [] if obj is None else [obj]
        found = [get((namespace, name)) for name in sorted(names)]
        return [obj for obj in found if obj is not None]

    def put(self, key: Key, obj: T) -> T | None:
        old = self._objects.get(key)
        if old is not None:
            self._unindex(key, old)
        self._objects[key] = obj
        self._index(key, obj)
        return old

    def remove(self, key: Key) -> T | None:
        old = self._objects.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def _index(self, key: Key, obj: T) -> None:
        namespace, name = key
        for index, function in self._indexers.items():
            value = function(obj)
            if value is not None:
                self._indexes[index].setdefault((namespace, value), set()).add(name)

    def _unindex(self, key: Key, obj: T) -> None:
        namespace, name = key
        for index, function in self._indexers.items():
            value = function(obj)
            if value is None:
                continue
            names = self._indexes[index].get((namespace, value))
            if names is not None:
                names.discard(name)
                if not names:
                    del self._indexes[index][(namespace, value)]


class Informer(Generic[T]):
    def __init__(
        self,
        name: str,
        source: ListWatch,
        transform: Callable[[Mapping[str, Any]], T],
        *,
        indexers: Mapping[str, Indexer[T]] | None = None,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
        silence_limit: float = DEFAULT_SILENCE_LIMIT_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
        fast_decode: FastDecode[T] | None = None,
    ) -> None:
        if silence_limit <= 0:
            raise ValueError("silence_limit must be positive")
        self.name = name
        self.silence_limit = silence_limit
        self._monotonic = monotonic
        self._last_heard: float | None = None  # never synced yet
        self._source = source
        self._transform = transform
        self._fast_decode = fast_decode
        self._indexers: Mapping[str, Indexer[T]] = dict(indexers or {})
        self._store: Store[T] = Store(self._indexers)
        self._backoff = backoff or Backoff()
        self._rng = rng or random.Random()
        self._handlers: list[Callable[[Change[T]], None]] = []
        self._resource_version: str | None = None
        self._changed: asyncio.Condition | None = None
        self.synced = asyncio.Event()
        self.stats = InformerStats()
        self._log = _log.bind(informer=name)

    # --- reads ---------------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> T | None:
        return self._store.get((namespace, name))

    def by_index(self, index: str, namespace: str, value: str) -> list[T]:
        return self._store.by_index(index, namespace, value)

    def items(self) -> list[T]:
        return [obj for _, obj in self._store.items()]

    def __len__(self) -> int:
        return len(self._store)

    @property
    def resource_version(self) -> str | None:
        return self._resource_version

    def add_handler(self, handler: Callable[[Change[T]], None]) -> None:
        self._handlers.append(handler)

    def staleness(self) -> float:
        """Seconds since the API server was last heard from (inf before the first list)."""
        if self._last_heard is None:
            return math.inf
        return max(0.0, self._monotonic() - self._last_heard)

    def _heard(self) -> None:
        self._last_heard = self._monotonic()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Until `predicate()` holds, re-checked after every state change (bound it with
        asyncio.timeout)."""
        if self._changed is None:
            self._changed = asyncio.Condition()
        async with self._changed:
            await self._changed.wait_for(predicate)

    # --- the loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled. Never returns otherwise; errors are retried."""
        resuming = False
        while True:
            try:
                if self._resource_version is None:
                    await self._list()
                    resuming = False
                received = await self._watch(resuming)
                resuming = True
                if received:
                    self._backoff.reset()
                else:  # closed at once with nothing in it: do not hammer the server
                    await asyncio.sleep(self._backoff.next_delay())
            except asyncio.CancelledError:
                raise
            except WatchGone as gone:
                self.stats.gone += 1
                self._log.info("watch expired, re-listing", detail=str(gone))
                self._resource_version = None
                await self._notify()
            except WatchSilent as silent:
                self.stats.silent += 1
                self._log.warning("watch silent, re-listing", detail=str(silent))
                self._resource_version = None
                await self._notify()
            except Exception as error:
                self.stats.errors += 1
                delay = self._backoff.next_delay()
                self._log.warning(
                    "list/watch failed",
                    error=error_detail(error),
                    retry_in_seconds=round(delay, 3),
                    resource_version=self._resource_version,
                )
                await self._notify()
                await asyncio.sleep(delay)
                resuming = self._resource_version is not None

    async def _list(self) -> None:
        fresh: Store[T] = Store(self._indexers)
        resource_version = ""
        async for chunk in self._source.list():
            resource_version = chunk.resource_version or resource_version
            for raw in chunk.items:
                if isinstance(raw, msgspec.Raw):
                    found = None if self._fast_decode is None else self._fast_decode(raw)
                    if found is not None:
                        fresh.put(*found)
                        continue
                    raw = decode(raw)
                key = _key_of(raw)
                if key is None:
                    self._skip(raw, "no metadata.name")
                    continue
                obj = self._converted(raw)
                if obj is not None:
                    fresh.put(key, obj)
        old_store, self._store = self._store, fresh
        self._resource_version = resource_version or "0"
        self.stats.lists += 1
        self._log.debug("listed", objects=len(fresh), resource_version=resource_version)
        self._emit_replace(old_store, fresh)
        self._backoff.reset()
        self._heard()
        self.synced.set()
        await self._notify()

    async def _watch(self, resuming: bool) -> int:
        """One watch request until the server ends it; the number of events it carried."""
        assert self._resource_version is not None
        longest = max(1, math.floor(self.silence_limit - READ_TIMEOUT_MARGIN_SECONDS))
        timeout = max(1, longest // 2 + self._rng.randrange(max(1, longest - longest // 2)))
        self.stats.watches += 1
        if resuming:
            self.stats.resumed += 1
        await self._notify()
        received = 0
        events = aiter(self._source.watch(self._resource_version, timeout))
        try:
            while True:
                try:
                    async with asyncio.timeout(self.silence_limit):
                        event = await anext(events)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    raise WatchSilent(
                        f"nothing for {self.silence_limit:g}s, not even a bookmark"
                    ) from None
                received += 1
                self._heard()
                self._apply(event)
                await self._notify()
        finally:
            await _close(events)
        self._heard()  # the server ended the watch: it is alive
        return received

    # --- applying changes ----------------------------------------------------------------------

    def _converted(self, raw: Mapping[str, Any]) -> T | None:
        try:
            return self._transform(raw)
        except Exception as error:  # MalformedObject, or a bug: skip this object, keep going
            self._skip(raw, error_detail(error))
            return None

    def _skip(self, raw: Any, why: str) -> None:
        self.stats.skipped += 1
        self._log.warning("skipped object", key=_key_of(raw), why=why)

    def _apply(self, event: RawWatchEvent) -> None:
        version = _resource_version_of(event.object)
        if event.type == "BOOKMARK":
            if version is not None:
                self._resource_version = version
            return
        key = _key_of(event.object)
        if key is None:
            self._skip(event.object, f"{event.type} event without metadata.name")
        elif event.type == "DELETED":
            old = self._store.remove(key)
            if old is not None:
                self._emit(Change("DELETED", key, old, None))
        elif event.type in ("ADDED", "MODIFIED"):
            obj = self._converted(event.object)
            if obj is not None:
                old = self._store.put(key, obj)
                self._emit(Change("ADDED" if old is None else "MODIFIED", key, old, obj))
        else:
            self._log.warning("unknown watch event type", type=event.type)
        self.stats.events += 1
        if version is not None:
            self._resource_version = version

    def _emit_replace(self, old_store: Store[T], fresh: Store[T]) -> None:
        if not self._handlers:
            return
        for key, obj in fresh.items():
            previous = old_store.get(key)
            if previous is None:
                self._emit(Change("ADDED", key, None, obj))
            elif previous != obj:
                self._emit(Change("MODIFIED", key, previous, obj))
        for key in old_store.keys() - fresh.keys():
            self._emit(Change("DELETED", key, old_store.get(key), None))

    def _emit(self, change: Change[T]) -> None:
        for handler in self._handlers:
            try:
                handler(change)
            except Exception as error:  # a handler bug must not stop the informer
                self._log.error("handler failed", key=change.key, error=error_detail(error))

    async def _notify(self) -> None:
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()


async def _close(events: AsyncIterator[RawWatchEvent]) -> None:
    close = getattr(events, "aclose", None)
    if close is not None:
        await close()
