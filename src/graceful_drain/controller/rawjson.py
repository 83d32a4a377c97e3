"""Tolerant, typed reads from raw Kubernetes JSON.

Every read takes a parent mapping (or None) and a key. JSON null counts as absent, as it does
for the API server. A value of the wrong type is replaced by the default and its path is
recorded in `malformed`, so a caller can keep the object and still log what was wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

JsonObject = Mapping[str, Any]


class FieldReader:
    def __init__(self) -> None:
        self.malformed: list[str] = []

    def _wrong(self, path: str) -> None:
        self.malformed.append(path)

    @staticmethod
    def is_set(parent: JsonObject | None, key: str) -> bool:
        return parent is not None and parent.get(key) is not None

    def mapping(self, parent: JsonObject | None, key: str, path: str) -> JsonObject | None:
        value = None if parent is None else parent.get(key)
        if value is None:
            return None
        if isinstance(value, Mapping):
            return value
        self._wrong(path)
        return None

    def sequence(self, parent: JsonObject | None, key: str, path: str) -> Sequence[Any]:
        value = None if parent is None else parent.get(key)
        if value is None:
            return ()
        if isinstance(value, list | tuple):
            return value
        self._wrong(path)
        return ()

    def optional_string(self, parent: JsonObject | None, key: str, path: str) -> str | None:
        value = None if parent is None else parent.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            return value
        self._wrong(path)
        return None

    def string(self, parent: JsonObject | None, key: str, path: str, default: str = "") -> str:
        value = self.optional_string(parent, key, path)
        return default if value is None else value

    def optional_integer(self, parent: JsonObject | None, key: str, path: str) -> int | None:
        """An int64 (JSON numbers with a fraction, booleans and strings are wrong types)."""
        value = None if parent is None else parent.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self._wrong(path)
            return None
        if _INT64_MIN <= value <= _INT64_MAX:
            return value
        self._wrong(path)
        return None

    def integer(self, parent: JsonObject | None, key: str, path: str, default: int = 0) -> int:
        value = self.optional_integer(parent, key, path)
        return default if value is None else value

    def boolean(self, parent: JsonObject | None, key: str, path: str) -> bool:
        value = None if parent is None else parent.get(key)
        if value is None:
            return False
        if isinstance(value, bool):
            return value
        self._wrong(path)
        return False

    def raw(self, parent: JsonObject | None, key: str) -> object:
        """The value as is, None when absent: for fields parsed elsewhere (int-or-string)."""
        return None if parent is None else parent.get(key)
