"""``duration.HumanDuration`` (k8s.io/apimachinery/pkg/util/duration/duration.go): the AGE
kube-apiserver prints, ~2-3 significant figures of an elapsed time."""

from __future__ import annotations

from datetime import datetime, timedelta

_SECOND = 1_000_000_000
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE


def _nanoseconds(elapsed: timedelta) -> int:
    return (elapsed.days * 86_400 + elapsed.seconds) * _SECOND + elapsed.microseconds * 1_000


def _truncate(numerator: int, denominator: int) -> int:
    """Go's integer division: toward zero."""
    quotient = abs(numerator) // denominator
    return quotient if numerator >= 0 else -quotient


def human_duration(elapsed: timedelta) -> str:
    d = _nanoseconds(elapsed)
    seconds = _truncate(d, _SECOND)
    # Up to two seconds in the future counts as now: the clocks of two machines may differ.
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 60 * 2:
        return f"{seconds}s"
    minutes = d // _MINUTE
    if minutes < 10:
        s = (d // _SECOND) % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = d // _HOUR
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def parse_timestamp(value: str) -> datetime:
    """An RFC 3339 ``metav1.Time`` (``2026-01-02T03:04:05Z``)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def translate_timestamp_since(timestamp: str | None, now: datetime) -> str:
    """printers.go ``translateTimestampSince``: the age of ``timestamp`` at ``now``."""
    if not timestamp:
        return "<unknown>"
    return human_duration(now - parse_timestamp(timestamp))
