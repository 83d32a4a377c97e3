"""Tolerant accessors over raw Kubernetes JSON.

The collectors hand us whatever the API server (or a proxy, or a fault) returned,
decoded by ``json.loads``: any field may be missing, ``null`` or of the wrong type.
These helpers never raise; a value of the wrong shape reads as absent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

_EMPTY: Mapping[str, object] = {}


def as_mapping(value: object) -> Mapping[str, object]:
    if isinstance(value, Mapping):
        return value
    return _EMPTY


def as_list(value: object) -> Sequence[object]:
    if isinstance(value, list | tuple):
        return value
    return ()


def as_str(value: object) -> str | None:
    """A non-empty string, else None."""
    if isinstance(value, str) and value:
        return value
    return None


def as_int(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
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


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 timestamp (metav1.Time or MicroTime) as an aware UTC datetime."""
    text = as_str(value)
    if text is None:
        return None
    try:
        parsed = datetime.fromisoformat(text)
        return as_aware(parsed).astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def as_aware(moment: datetime) -> datetime:
    """Naive datetimes are taken to be UTC, so that comparisons never raise."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        return moment.replace(tzinfo=UTC)
    return moment


def format_time(moment: datetime) -> str:
    """RFC 3339 with a ``Z`` suffix when the instant can be expressed in UTC."""
    aware = as_aware(moment)
    try:
        return aware.astimezone(UTC).isoformat().replace("+00:00", "Z")
    except OverflowError:
        return aware.isoformat()
