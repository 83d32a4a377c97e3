"""RFC 3339 timestamps (the restarted-at annotation, metav1 times, the detector's evidence) and
Go-style durations in messages: kube/timefmt.py, the product's one home for both."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.kube.timefmt import (
    as_utc,
    format_go_duration,
    format_rfc3339,
    format_rfc3339_exact,
    format_rfc3339_micro,
    parse_rfc3339,
    parse_timestamp,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-01T12:00:00Z", datetime(2024, 5, 1, 12, tzinfo=UTC)),
        ("2024-05-01T12:00:00.123456789Z", datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)),
        ("2024-05-01T13:30:00+01:30", datetime(2024, 5, 1, 12, tzinfo=UTC)),
        ("2024-05-01T00:00:00-02:00", datetime(2024, 5, 1, 2, tzinfo=UTC)),
        ("2024-02-30T00:00:00Z", None),
        ("2024-05-01T24:00:00Z", None),
        ("2024-05-01T12:00:60Z", None),
        ("2024-05-01t12:00:00z", None),  # Go's RFC 3339 parser is case-sensitive
        ("2024-05-01T12:00:00", None),
        ("2024-05-01", None),
        ("2024-05-01T12:00:00+24:00", None),
        ("0001-01-01T00:00:00+01:00", None),  # before datetime.min once in UTC
        (" 2024-05-01T12:00:00Z", None),
        ("\uff12\uff10\uff12\uff14-05-01T12:00:00Z", None),  # fullwidth digits
        ("", None),
    ],
)
def test_parse_rfc3339(text: str, expected: datetime | None) -> None:
    assert parse_rfc3339(text) == expected


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (datetime(2024, 5, 1, 12, 0, 0, 999999, tzinfo=UTC), "2024-05-01T12:00:00Z"),
        (datetime(2024, 5, 1, 14, tzinfo=timezone(timedelta(hours=2))), "2024-05-01T12:00:00Z"),
        (datetime(5, 1, 2, 3, 4, 5), "0005-01-02T03:04:05Z"),
    ],
)
def test_format_rfc3339(moment: datetime, text: str) -> None:
    assert format_rfc3339(moment) == text


@given(st.datetimes(timezones=st.just(UTC)))
def test_format_then_parse_is_the_second(moment: datetime) -> None:
    assert parse_rfc3339(format_rfc3339(moment)) == moment.replace(microsecond=0)


@given(st.text(max_size=40))
def test_parse_never_raises(text: str) -> None:
    parsed = parse_rfc3339(text)
    assert parsed is None or parsed.tzinfo is UTC


def test_as_utc() -> None:
    assert as_utc(datetime(2024, 1, 1)) == datetime(2024, 1, 1, tzinfo=UTC)
    east = datetime(2024, 1, 1, 1, tzinfo=timezone(timedelta(hours=1)))
    assert as_utc(east).tzinfo is UTC and as_utc(east).hour == 0


@pytest.mark.parametrize(
    ("duration", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(seconds=-5), "0s"),
        (timedelta(milliseconds=500), "500ms"),
        (timedelta(seconds=42), "42s"),
        (timedelta(seconds=42, milliseconds=900), "42s"),
        (timedelta(minutes=10), "10m0s"),
        (timedelta(minutes=1, seconds=5), "1m5s"),
        (timedelta(hours=1), "1h0m0s"),
        (timedelta(hours=26, minutes=3, seconds=4), "26h3m4s"),
    ],
)
def test_format_go_duration(duration: timedelta, text: str) -> None:
    assert format_go_duration(duration) == text


def test_restarted_at_keeps_sub_second_precision_and_old_stamps_still_parse() -> None:
    moment = datetime(2024, 5, 1, 12, 0, 0, 515_000, tzinfo=UTC)

    assert format_rfc3339_micro(moment) == "2024-05-01T12:00:00.515000Z"
    assert parse_rfc3339(format_rfc3339_micro(moment)) == moment
    assert parse_rfc3339("2024-05-01T12:00:00Z") == moment.replace(microsecond=0)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-11-11T11:59:50Z", datetime(2026, 11, 11, 11, 59, 50, tzinfo=UTC)),
        ("2026-11-11T12:59:50+01:00", datetime(2026, 11, 11, 11, 59, 50, tzinfo=UTC)),
        ("2026-11-11T11:59:50", datetime(2026, 11, 11, 11, 59, 50, tzinfo=UTC)),  # naive: UTC
        ("2026-11-11 11:59:50Z", datetime(2026, 11, 11, 11, 59, 50, tzinfo=UTC)),  # not strict
        ("11:59", None),
        ("", None),
        (None, None),
        (1_700_000_000, None),
    ],
)
def test_parse_timestamp_is_tolerant_where_parse_rfc3339_is_strict(
    value: object, expected: datetime | None
) -> None:
    assert parse_timestamp(value) == expected
    if parse_rfc3339(value) is not None:
        assert parse_rfc3339(value) == expected


@given(st.text(max_size=40) | st.none() | st.integers())
def test_parse_timestamp_never_raises(value: object) -> None:
    parsed = parse_timestamp(value)
    assert parsed is None or parsed.tzinfo is not None


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (datetime(2024, 5, 1, 12, tzinfo=UTC), "2024-05-01T12:00:00Z"),
        (datetime(2024, 5, 1, 12, 0, 0, 515000, tzinfo=UTC), "2024-05-01T12:00:00.515000Z"),
        (datetime(2024, 5, 1, 14, tzinfo=timezone(timedelta(hours=2))), "2024-05-01T12:00:00Z"),
    ],
)
def test_format_rfc3339_exact_shows_microseconds_only_when_there_are_any(
    moment: datetime, text: str
) -> None:
    assert format_rfc3339_exact(moment) == text


def test_as_utc_never_raises_on_an_instant_utc_cannot_hold() -> None:
    year_one_east = datetime(1, 1, 1, 0, 0, tzinfo=timezone(timedelta(hours=14)))
    assert as_utc(year_one_east) == year_one_east  # still comparable, offset kept
    assert format_rfc3339_exact(year_one_east) == "0001-01-01T00:00:00+14:00"
