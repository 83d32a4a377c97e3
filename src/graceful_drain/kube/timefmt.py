"""Time as the API server writes it: RFC 3339 timestamps (metav1.Time, MicroTime, the
restarted-at annotation) and Go-style durations. The one home for both, in the product."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

# Go's time.RFC3339 layout ("2006-01-02T15:04:05Z07:00"), which also accepts a fractional second.
# Go is case-sensitive about "T" and "Z", and so are we.
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})",
    re.ASCII,
)


def as_utc(moment: datetime) -> datetime:
    """The same instant in UTC; a naive datetime is taken to already be UTC. Never raises: an
    instant UTC cannot hold (year 1 at +14:00) keeps its own offset, still comparable."""
    if moment.tzinfo is UTC:  # the clock's own (utc_now): already UTC, nothing to convert
        return moment
    if moment.tzinfo is None or moment.utcoffset() is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        return moment


def parse_rfc3339(text: object) -> datetime | None:
    """An aware UTC datetime, or None when `text` is not a strict RFC 3339 timestamp (nor a
    string at all: raw JSON may hold anything)."""
    if not isinstance(text, str):
        return None
    match = _RFC3339.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    micros = int((fraction or "0").ljust(6, "0")[:6])
    try:
        if zone == "Z":
            tz = UTC
        else:
            sign = -1 if zone[0] == "-" else 1
            offset = timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
            if offset >= timedelta(hours=24):
                return None
            tz = timezone(sign * offset)
        moment = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micros, tzinfo=tz
        )
        return moment.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def parse_timestamp(value: object) -> datetime | None:
    """Tolerant: a strict RFC 3339 timestamp, else any ISO 8601 form Python reads (a naive one
    is taken as UTC), as an aware UTC datetime; None for anything else. For evidence read from
    wherever it comes (the detector), where a readable time beats a strict refusal."""
    strict = parse_rfc3339(value)
    if strict is not None or not isinstance(value, str) or not value:
        return strict
    try:
        return as_utc(datetime.fromisoformat(value))
    except (ValueError, OverflowError):
        return None


# The date and time of both layouts below, %-formatted: half the cost of an f-string's six
# format specs (the webhook writes these).
_DATE_TIME = "%04d-%02d-%02dT%02d:%02d:%02d"
_SECONDS_LAYOUT = _DATE_TIME + "Z"
_MICROSECONDS_LAYOUT = _DATE_TIME + ".%06dZ"


def format_rfc3339(moment: datetime) -> str:
    """`moment` in UTC, to the second, e.g. 2024-05-01T12:00:00Z (what metav1.Time writes)."""
    utc = as_utc(moment)
    return _SECONDS_LAYOUT % (utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second)


def format_rfc3339_micro(moment: datetime) -> str:
    """`moment` in UTC with microseconds, e.g. 2024-05-01T12:00:00.515000Z (metav1.MicroTime's
    layout). `parse_rfc3339` reads it, and still reads whole-second stamps."""
    utc = as_utc(moment)
    return _MICROSECONDS_LAYOUT % (
        utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second, utc.microsecond
    )  # fmt: skip


def format_rfc3339_exact(moment: datetime) -> str:
    """`moment` in UTC, to the second, with microseconds only when it has any: as exact as
    the instant, as short as it can be (the detector's verdicts and readings)."""
    utc = as_utc(moment)
    if utc.utcoffset():  # beyond what UTC can hold: the instant as it was given
        return utc.isoformat()
    return format_rfc3339_micro(utc) if utc.microsecond else format_rfc3339(utc)


def format_go_duration(duration: timedelta) -> str:
    """Go's time.Duration.String() truncated to whole seconds: 42s, 10m0s, 1h2m3s.

    Negative durations print as 0s; below one second, whole milliseconds (500ms).
    """
    micros = (duration.days * 86_400 + duration.seconds) * 1_000_000 + duration.microseconds
    if micros <= 0:
        return "0s"
    if micros < 1_000_000:
        return f"{micros // 1000}ms"
    seconds = micros // 1_000_000
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


# Go's time.ParseDuration units (src/time/format.go unitMap), in nanoseconds.
_GO_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek small letter mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_GO_TERM = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]+)")
_GO_MAX_NS = 2**63 - 1


def parse_go_duration(text: str) -> timedelta:
    """Go's time.ParseDuration: "10m", "1h30m", "1.5s", "-2m", "0". Raises ValueError.

    A sign applies to the whole string; every term needs a unit except a lone "0"; the total
    must fit an int64 of nanoseconds. The result is rounded down to whole microseconds.
    """
    original = text
    negative = text.startswith("-")
    if text[:1] in ("-", "+"):
        text = text[1:]
    if text == "0":
        return timedelta(0)
    if text == "":
        raise ValueError(f"invalid duration {original!r}")
    total_ns = 0
    position = 0
    while position < len(text):
        match = _GO_TERM.match(text, position)
        if match is None:
            raise ValueError(f"invalid duration {original!r}")
        whole, fraction, unit = match.groups()
        if whole == "" and not fraction:
            raise ValueError(f"invalid duration {original!r}")
        scale = _GO_UNITS_NS.get(unit)
        if scale is None:
            raise ValueError(f"unknown unit {unit!r} in duration {original!r}")
        total_ns += int(whole or "0") * scale
        if fraction:
            total_ns += int(fraction) * scale // 10 ** len(fraction)
        if total_ns > _GO_MAX_NS:
            raise ValueError(f"invalid duration {original!r}: out of range")
        position = match.end()
    micros = total_ns // 1_000
    return timedelta(microseconds=-micros if negative else micros)
