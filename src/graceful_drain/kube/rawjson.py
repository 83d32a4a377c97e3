"""Tolerant reads from raw Kubernetes JSON: whatever the API server (or a proxy, or a fault)
returned, decoded as is. JSON null counts as absent, as it does for the API server; a value of
the wrong type never raises.

Two ways to read, for two needs:
- `FieldReader` (the controller's slim views): typed reads with defaults that record the path
  of every value of the wrong type in `malformed`, so a caller keeps the object and still logs
  what was wrong;
- `as_mapping`, `as_list`, `as_str`, `as_int`, `get_path` (the detector's evidence): a value
  of the wrong shape simply reads as absent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

JsonObject = Mapping[str, Any]
_EMPTY: Mapping[str, object] = {}


def as_mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else _EMPTY


def as_list(value: object) -> Sequence[object]:
    return value if isinstance(value, list | tuple) else ()


def as_str(value: object) -> str | None:
    """A non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def as_int(value: object) -> int | None:
    """An int64 (booleans, numbers with a fraction, strings and out-of-range numbers: None)."""
    if isinstance(value, int) and not isinstance(value, bool) and _INT64_MIN <= value <= _INT64_MAX:
        return value
    return None


def get_path(value: object, *keys: str) -> object:
    """Walk nested mappings; any missing or non-mapping step yields None."""
    current = value
    for key in keys:
        mapping = as_mapping(current)
        if key not in mapping:
            return None
        current = mapping[key]
    return current


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
        integer = as_int(value)
        if integer is None:
            self._wrong(path)
        return integer

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
