"""Versioned in-memory object storage with watch fan-out, like etcd behind the API server.

One global resourceVersion counter (etcd's revision) orders every write. Each
resource keeps a bounded history of changes so a watch can resume from a
resourceVersion; resuming from before the history answers 410 Gone, as the
real watch cache does. Stored objects are never mutated after commit: readers
may share them.

The history keeps each change's objects encoded (JSON bytes): a resumed watch
decodes the few it replays, and the thousands of superseded versions a busy
cluster leaves behind are a few blobs each instead of trees of dicts and lists
that every full garbage collection would walk. The encoding a write makes for
the history also travels with the change to its watch events, so a watch
stream writes it as it is instead of encoding the object again.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from kubesim import jsoncodec
from kubesim.types import Key, Obj

from .errors import gone

StorageKey = tuple[str, str]  # (group, plural)
EventType = Literal["ADDED", "MODIFIED", "DELETED"]
Predicate = Callable[[Obj], bool]


@dataclass(frozen=True, slots=True)
class Change:
    type: EventType
    object: Obj
    previous: Obj | None
    resource_version: int
    encoded: bytes  # jsoncodec.dumps(object)


@dataclass(frozen=True, slots=True)
class _Kept:
    """A change as the history keeps it: its objects encoded."""

    type: EventType
    object: bytes
    previous: bytes | None
    resource_version: int

    def change(self) -> Change:
        previous = None if self.previous is None else jsoncodec.loads(self.previous)
        return Change(self.type, jsoncodec.loads(self.object), previous, self.resource_version,
                      self.object)  # fmt: skip


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]
    object: Obj
    encoded: bytes | None = None  # jsoncodec.dumps(object), where the store already has it

    def line(self) -> bytes:
        """This event as one line of a watch stream."""
        if self.encoded is None:
            return jsoncodec.watch_event(self.type, self.object)
        return jsoncodec.watch_line(self.type, self.encoded)


def object_key(obj: Obj) -> Key:
    meta = obj.get("metadata", {})
    return (meta.get("namespace", "") or "", meta["name"])


class Watcher:
    """One watch stream: a queue of events that match its predicate."""

    def __init__(self, predicate: Predicate, max_queue: int) -> None:
        self.predicate = predicate
        self.queue: asyncio.Queue[WatchEvent | None] = asyncio.Queue()
        self._max_queue = max_queue
        self.closed = False

    def offer(self, change: Change) -> None:
        if self.closed:
            return
        now_matches = self.predicate(change.object)
        if change.type == "MODIFIED" and change.previous is not None:
            was_matching = self.predicate(change.previous)
            if was_matching and now_matches:
                self._put(WatchEvent("MODIFIED", change.object, change.encoded))
            elif now_matches:
                self._put(WatchEvent("ADDED", change.object, change.encoded))
            elif was_matching:
                # The cacher's convertToWatchEvent: the previous object, at the new revision.
                gone = {
                    **change.previous,
                    "metadata": {
                        **change.previous["metadata"],
                        "resourceVersion": change.object["metadata"]["resourceVersion"],
                    },
                }
                self._put(WatchEvent("DELETED", gone))
        elif now_matches:
            self._put(WatchEvent(change.type, change.object, change.encoded))

    def _put(self, event: WatchEvent) -> None:
        if self.queue.qsize() >= self._max_queue:
            # A watcher that cannot keep up is closed, as the real watch cache does;
            # its client re-watches from the last resourceVersion it saw.
            self.close()
            return
        self.queue.put_nowait(event)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(None)


def storage_order_key(obj: Obj) -> str:
    """ "namespace/name": the order of etcd's keys (/registry/<resource>/<namespace>/<name>),
    in which lists are served and continue tokens resume."""
    meta = obj["metadata"]
    return f"{meta.get('namespace', '') or ''}/{meta['name']}"


@dataclass(frozen=True, slots=True)
class Ordered:
    """Every object of one resource in storage order, with the keys to bisect on."""

    keys: list[str]
    objects: list[Obj]


class _Bucket:
    __slots__ = ("compacted_through", "encoded", "history", "objects", "ordered", "watchers")

    def __init__(self, history_limit: int) -> None:
        self.objects: dict[Key, Obj] = {}
        self.encoded: dict[Key, bytes] = {}  # each object's encoding, for the next change
        self.history: deque[_Kept] = deque(maxlen=history_limit)
        self.compacted_through = 0
        self.watchers: set[Watcher] = set()
        self.ordered: Ordered | None = None  # built on demand, dropped by the next write


class ObjectStore:
    def __init__(self, history_limit: int = 10_000, watcher_queue_limit: int = 100_000) -> None:
        self._revision = 0
        self._buckets: dict[StorageKey, _Bucket] = {}
        self._history_limit = history_limit
        self._watcher_queue_limit = watcher_queue_limit
        self._listeners: list[Callable[[StorageKey, Change], None]] = []

    @property
    def revision(self) -> int:
        return self._revision

    def next_revision(self) -> int:
        self._revision += 1
        return self._revision

    def _bucket(self, key: StorageKey) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(self._history_limit)
        return bucket

    # reads

    def get(self, key: StorageKey, namespace: str, name: str) -> Obj | None:
        return self._bucket(key).objects.get((namespace, name))

    def list(self, key: StorageKey, namespace: str | None = None) -> list[Obj]:
        objects = self._bucket(key).objects
        items = (o for (ns, _), o in objects.items() if namespace is None or ns == namespace)
        return sorted(items, key=object_key)

    def iter_all(self, key: StorageKey) -> Iterator[Obj]:
        return iter(list(self._bucket(key).objects.values()))

    def ordered(self, key: StorageKey) -> Ordered:
        """All objects in storage order; kept until the resource's next write, so the pages of
        one paginated list cost one sort, not one each."""
        bucket = self._bucket(key)
        if bucket.ordered is None:
            # From the keys the bucket holds (the storage_order_key of each object), without
            # reading the objects; keys are unique, so no two pairs ever compare their objects.
            pairs = sorted((f"{ns}/{name}", o) for (ns, name), o in bucket.objects.items())
            bucket.ordered = Ordered([k for k, _ in pairs], [o for _, o in pairs])
        return bucket.ordered

    # writes: the caller has stamped metadata.resourceVersion with next_revision()

    def put(self, key: StorageKey, obj: Obj) -> Change:
        bucket = self._bucket(key)
        okey = object_key(obj)
        previous = bucket.objects.get(okey)
        bucket.objects[okey] = obj
        bucket.ordered = None
        encoded_previous = self._encoded_previous(bucket, okey, previous)
        encoded = bucket.encoded[okey] = jsoncodec.dumps(obj)
        change = Change(
            "ADDED" if previous is None else "MODIFIED",
            obj,
            previous,
            int(obj["metadata"]["resourceVersion"]),
            encoded,
        )
        self._publish(key, bucket, change, encoded_previous)
        return change

    def remove(self, key: StorageKey, obj: Obj) -> Change:
        """Delete; `obj` is the final state, stamped with a fresh resourceVersion."""
        bucket = self._bucket(key)
        okey = object_key(obj)
        previous = bucket.objects.pop(okey, None)
        bucket.ordered = None
        encoded_previous = self._encoded_previous(bucket, okey, previous)
        bucket.encoded.pop(okey, None)
        change = Change("DELETED", obj, previous, int(obj["metadata"]["resourceVersion"]),
                        jsoncodec.dumps(obj))  # fmt: skip
        self._publish(key, bucket, change, encoded_previous)
        return change

    @staticmethod
    def _encoded_previous(bucket: _Bucket, okey: Key, previous: Obj | None) -> bytes | None:
        """The replaced object's encoding, kept from when it was written."""
        if previous is None:
            return None
        encoded = bucket.encoded.get(okey)
        return jsoncodec.dumps(previous) if encoded is None else encoded

    def _publish(self, key: StorageKey, bucket: _Bucket, change: Change,
                 encoded_previous: bytes | None) -> None:  # fmt: skip
        if len(bucket.history) == bucket.history.maxlen:
            bucket.compacted_through = bucket.history[0].resource_version
        bucket.history.append(
            _Kept(change.type, change.encoded, encoded_previous, change.resource_version)
        )
        for watcher in list(bucket.watchers):
            watcher.offer(change)
            if watcher.closed:
                bucket.watchers.discard(watcher)
        for listener in self._listeners:
            listener(key, change)

    def add_listener(self, listener: Callable[[StorageKey, Change], None]) -> None:
        """Synchronous in-process subscribers (garbage collector, audit of webhooks...)."""
        self._listeners.append(listener)

    # watch

    def watch(self, key: StorageKey, since: int | None, predicate: Predicate) -> Watcher:
        """Start a watch. `since=None` sends the current state as ADDED events first."""
        bucket = self._bucket(key)
        watcher = Watcher(predicate, self._watcher_queue_limit)
        if since is None:
            for okey, obj in sorted(bucket.objects.items()):
                if predicate(obj):
                    watcher.queue.put_nowait(WatchEvent("ADDED", obj, bucket.encoded.get(okey)))
        else:
            if since < bucket.compacted_through:
                raise gone(f"too old resource version: {since} ({bucket.compacted_through + 1})")
            for kept in bucket.history:
                if kept.resource_version > since:
                    watcher.offer(kept.change())
        bucket.watchers.add(watcher)
        return watcher

    def stop_watch(self, key: StorageKey, watcher: Watcher) -> None:
        self._bucket(key).watchers.discard(watcher)
        watcher.close()

    def compact(self, key: StorageKey | None = None) -> None:
        """Forget all history (fault injection: the next resumed watch gets 410 Gone)."""
        keys = [key] if key is not None else list(self._buckets)
        for k in keys:
            bucket = self._bucket(k)
            bucket.history.clear()
            bucket.compacted_through = self._revision
        for k in keys:
            for watcher in list(self._bucket(k).watchers):
                watcher.close()
            self._bucket(k).watchers.clear()

    def close_watchers(self, key: StorageKey | None = None) -> None:
        """Drop every open watch connection (fault injection)."""
        for k in [key] if key is not None else list(self._buckets):
            for watcher in list(self._bucket(k).watchers):
                watcher.close()
            self._bucket(k).watchers.clear()
