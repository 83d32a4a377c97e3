"""Owner-reference garbage collection and namespace deletion, after the real controllers.

Reacts to store changes (never polls): background deletion of dependents whose
owners are all gone, the `orphan` and `foregroundDeletion` finalizers, and the
namespace lifecycle (delete content, then drop the `kubernetes` finalizer).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging

from kubesim.lifecycle import cancel_and_wait
from kubesim.types import Obj

from .errors import ApiError
from .registry import Registry
from .resources import ResourceType
from .store import Change, StorageKey

log = logging.getLogger(__name__)


class GarbageCollector:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._queue: asyncio.Queue[tuple[StorageKey, Change]] = asyncio.Queue()
        self._uids: dict[str, tuple[StorageKey, str, str]] = {}
        self._types = {t.storage_key: t for t in registry.resources.stored()}
        # owner uid -> its dependents' (storage key, namespace, name), kept on every change
        # so a deletion finds them without walking every stored object
        self._dependents_of: dict[str, dict[tuple[StorageKey, str, str], None]] = {}
        self._task: asyncio.Task[None] | None = None
        for key in self._types:
            for obj in registry.store.iter_all(key):
                self._index(key, None, obj)
        registry.store.add_listener(self._on_change)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="kubesim-gc")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    def _index(self, key: StorageKey, before: Obj | None, after: Obj | None) -> None:
        meta = (after or before or {}).get("metadata") or {}
        where = (key, meta.get("namespace", "") or "", meta.get("name", ""))
        old, new = _owner_uids(before), _owner_uids(after)
        for uid in old - new:
            dependents = self._dependents_of.get(uid)
            if dependents is not None:
                dependents.pop(where, None)
                if not dependents:
                    del self._dependents_of[uid]
        for uid in new - old:
            self._dependents_of.setdefault(uid, {})[where] = None

    def _on_change(self, key: StorageKey, change: Change) -> None:
        self._index(key, change.previous, None if change.type == "DELETED" else change.object)
        meta = change.object["metadata"]
        uid = meta.get("uid", "")
        if change.type == "DELETED":
            self._uids.pop(uid, None)
        else:
            self._uids[uid] = (key, meta.get("namespace", ""), meta["name"])
        self._queue.put_nowait((key, change))

    async def _run(self) -> None:
        while True:
            key, change = await self._queue.get()
            try:
                self._process(key, change)
            except ApiError as err:  # a concurrent write won; the next change retries
                log.debug("gc: %s", err.message)
            except Exception:
                log.exception("gc: unexpected error")

    @property
    def backlog(self) -> int:
        """Changes queued and not yet looked at."""
        return self._queue.qsize()

    def owner_exists(self, uid: str) -> bool:
        return uid in self._uids

    def _dependents(self, uid: str) -> list[tuple[ResourceType, Obj]]:
        out = []
        for key, namespace, name in list(self._dependents_of.get(uid, ())):
            rt = self._types.get(key)
            obj = None if rt is None else self.registry.store.get(key, namespace, name)
            if rt is not None and obj is not None and uid in _owner_uids(obj):
                out.append((rt, obj))
        order = {key: i for i, key in enumerate(self._types)}
        out.sort(key=lambda found: order[found[0].storage_key])  # stable: by type, as stored
        return out

    def _process(self, key: StorageKey, change: Change) -> None:
        obj = change.object
        meta = obj["metadata"]
        rt = self._types.get(key)
        if rt is None:
            return
        if change.type == "DELETED":
            self._collect_dependents_of(meta.get("uid", ""))
            self._recheck_owners_waiting_on(obj)
            if rt.kind != "Namespace" and meta.get("namespace"):
                self._maybe_finish_namespace(meta["namespace"])
            return
        if change.type == "ADDED" and meta.get("ownerReferences"):
            refs = meta["ownerReferences"]
            if not any(self.owner_exists(r.get("uid", "")) for r in refs):
                self._delete(rt, obj)
                return
        if meta.get("deletionTimestamp"):
            finalizers = meta.get("finalizers") or []
            if "orphan" in finalizers:
                self._orphan_dependents(rt, obj)
            elif "foregroundDeletion" in finalizers:
                self._foreground(rt, obj)
            if rt.kind == "Namespace":
                self._drain_namespace(meta["name"])

    def _collect_dependents_of(self, uid: str) -> None:
        for dep_rt, dep in self._dependents(uid):
            refs = dep["metadata"].get("ownerReferences") or []
            if not any(self.owner_exists(r.get("uid", "")) for r in refs):
                self._delete(dep_rt, dep)

    def _recheck_owners_waiting_on(self, dependent: Obj) -> None:
        for ref in dependent["metadata"].get("ownerReferences") or []:
            located = self._uids.get(ref.get("uid", ""))
            if located is None:
                continue
            key, ns, name = located
            owner = self.registry.store.get(key, ns, name)
            rt = self._types.get(key)
            if (
                owner is not None
                and rt is not None
                and "foregroundDeletion" in (owner["metadata"].get("finalizers") or [])
            ):
                self._foreground(rt, owner)

    def _orphan_dependents(self, rt: ResourceType, owner: Obj) -> None:
        uid = owner["metadata"]["uid"]
        for dep_rt, dep in self._dependents(uid):
            new = copy.deepcopy(dep)
            new["metadata"]["ownerReferences"] = [
                r for r in dep["metadata"]["ownerReferences"] if r.get("uid") != uid
            ] or None
            if new["metadata"]["ownerReferences"] is None:
                del new["metadata"]["ownerReferences"]
            self.registry.commit_update(dep_rt, dep, new)
        self._drop_finalizer(rt, owner, "orphan")

    def _foreground(self, rt: ResourceType, owner: Obj) -> None:
        dependents = self._dependents(owner["metadata"]["uid"])
        for dep_rt, dep in dependents:
            if not dep["metadata"].get("deletionTimestamp"):
                self._delete(dep_rt, dep, {"propagationPolicy": "Foreground"})
        blocking = [d for _, d in self._dependents(owner["metadata"]["uid"])]
        if not blocking:
            self._drop_finalizer(rt, owner, "foregroundDeletion")

    def _drop_finalizer(self, rt: ResourceType, obj: Obj, finalizer: str) -> None:
        current = self.registry.store.get(
            rt.storage_key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
        )
        if current is None:
            return
        new = copy.deepcopy(current)
        new["metadata"]["finalizers"] = [
            f for f in current["metadata"].get("finalizers") or [] if f != finalizer
        ]
        if not new["metadata"]["finalizers"]:
            del new["metadata"]["finalizers"]
        self.registry.commit_update(rt, current, new)

    def _delete(self, rt: ResourceType, obj: Obj, options: Obj | None = None) -> None:
        meta = obj["metadata"]
        with contextlib.suppress(ApiError):
            self.registry.delete(rt, meta.get("namespace", ""), meta["name"], options or {})

    def _drain_namespace(self, namespace: str) -> None:
        empty = True
        for rt in self._types.values():
            if not rt.namespaced:
                continue
            for obj in self.registry.store.list(rt.storage_key, namespace):
                empty = False
                if not obj["metadata"].get("deletionTimestamp"):
                    self._delete(rt, obj)
        if empty:
            self._maybe_finish_namespace(namespace)

    def _maybe_finish_namespace(self, namespace: str) -> None:
        ns_rt = self._types[("", "namespaces")]
        ns = self.registry.store.get(("", "namespaces"), "", namespace)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        for rt in self._types.values():
            if rt.namespaced and self.registry.store.list(rt.storage_key, namespace):
                return
        new = copy.deepcopy(ns)
        new["spec"]["finalizers"] = []
        self.registry.commit_update(ns_rt, ns, new)


def _owner_uids(obj: Obj | None) -> set[str]:
    if obj is None:
        return set()
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return {str(r.get("uid")) for r in refs if isinstance(r, dict) and r.get("uid")}
