"""`IdentityCache`: what was computed from an object, kept by the object's identity.

kubesim never mutates an object once it is stored or cached by an informer (a change is a
new object), so a value derived from one (its managedFields decoded, a template without its
hash label, a pod's resource requests) holds for as long as that object lives. Each entry
keeps its object, so no other object can take its id while it is cached; the newest `size`
entries are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")


class IdentityCache(Generic[V]):
    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._entries: dict[int, tuple[object, V]] = {}

    def get(self, obj: object) -> V | None:
        entry = self._entries.get(id(obj))
        return entry[1] if entry is not None and entry[0] is obj else None

    def take(self, obj: object) -> V | None:
        """`get`, and the entry is dropped: for a value only the object's successor needs."""
        entry = self._entries.get(id(obj))
        if entry is None or entry[0] is not obj:
            return None
        del self._entries[id(obj)]
        return entry[1]

    def put(self, obj: object, value: V) -> V:
        if len(self._entries) >= self._size:
            del self._entries[next(iter(self._entries))]  # the oldest
        self._entries[id(obj)] = (obj, value)
        return value

    def get_or_compute(self, obj: object, compute: Callable[[object], V]) -> V:
        found = self.get(obj)
        return found if found is not None else self.put(obj, compute(obj))
