"""duration.HumanDuration and translateTimestampSince (pure), cases from upstream's
duration_test.go plus each boundary of the port."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kubesim.apiserver.humanduration import human_duration, translate_timestamp_since


@pytest.mark.parametrize(
    ("elapsed", "shown"),
    [
        (timedelta(seconds=-2), "<invalid>"),
        (timedelta(seconds=-1, milliseconds=-500), "0s"),
        (timedelta(milliseconds=-500), "0s"),
        (timedelta(seconds=0), "0s"),
        (timedelta(seconds=1), "1s"),
        (timedelta(seconds=59), "59s"),
        (timedelta(seconds=119), "119s"),
        (timedelta(minutes=2), "2m"),
        (timedelta(minutes=2, seconds=1), "2m1s"),
        (timedelta(minutes=9, seconds=59), "9m59s"),
        (timedelta(minutes=10), "10m"),
        (timedelta(minutes=10, seconds=59), "10m"),
        (timedelta(minutes=179), "179m"),
        (timedelta(hours=3), "3h"),
        (timedelta(hours=3, minutes=1), "3h1m"),
        (timedelta(hours=7, minutes=59), "7h59m"),
        (timedelta(hours=8), "8h"),
        (timedelta(hours=47, minutes=59), "47h"),
        (timedelta(hours=48), "2d"),
        (timedelta(hours=49), "2d1h"),
        (timedelta(days=7, hours=23), "7d23h"),
        (timedelta(days=8), "8d"),
        (timedelta(days=729), "729d"),
        (timedelta(days=730), "2y"),
        (timedelta(days=731), "2y1d"),
        (timedelta(days=365 * 8 - 1), "7y364d"),
        (timedelta(days=365 * 8), "8y"),
        (timedelta(days=365 * 10 + 100), "10y"),
    ],
)
def test_human_duration(elapsed: timedelta, shown: str) -> None:
    assert human_duration(elapsed) == shown


def test_translate_timestamp_since() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert translate_timestamp_since("2026-01-01T11:55:30Z", now) == "4m30s"
    assert translate_timestamp_since(None, now) == "<unknown>"
    assert translate_timestamp_since("", now) == "<unknown>"
