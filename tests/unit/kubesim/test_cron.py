"""kubesim's cron schedules (robfig/cron v3 ParseStandard, as kube-controller-manager reads
a CronJob's) and the CronJob controller's pure arithmetic: the next activation, in a time
zone; robfig's refusals; the most recent missed time and the requeue delay
(mostRecentScheduleTime, nextScheduleTimeDuration); a Job made from the template."""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim import cron
from kubesim.cluster.cronjob import job_from_template, most_recent, next_delay

UTC = dt.UTC
T = dt.datetime(2026, 3, 14, 15, 9, 26, tzinfo=UTC)  # a Saturday


@pytest.mark.parametrize(
    ("spec", "after", "expected"),
    [
        ("* * * * *", T, dt.datetime(2026, 3, 14, 15, 10, tzinfo=UTC)),
        ("*/15 * * * *", T, dt.datetime(2026, 3, 14, 15, 15, tzinfo=UTC)),
        ("5 * * * *", T, dt.datetime(2026, 3, 14, 16, 5, tzinfo=UTC)),
        ("@hourly", T, dt.datetime(2026, 3, 14, 16, 0, tzinfo=UTC)),
        ("@daily", T, dt.datetime(2026, 3, 15, 0, 0, tzinfo=UTC)),
        ("@midnight", T, dt.datetime(2026, 3, 15, 0, 0, tzinfo=UTC)),
        ("@weekly", T, dt.datetime(2026, 3, 15, 0, 0, tzinfo=UTC)),  # Sunday
        ("@monthly", T, dt.datetime(2026, 4, 1, 0, 0, tzinfo=UTC)),
        ("@yearly", T, dt.datetime(2027, 1, 1, 0, 0, tzinfo=UTC)),
        ("@annually", T, dt.datetime(2027, 1, 1, 0, 0, tzinfo=UTC)),
        ("0 9 * * MON-FRI", T, dt.datetime(2026, 3, 16, 9, 0, tzinfo=UTC)),
        ("0 9 * * 1-5", T, dt.datetime(2026, 3, 16, 9, 0, tzinfo=UTC)),
        ("30 6-16/4 * * *", T, dt.datetime(2026, 3, 15, 6, 30, tzinfo=UTC)),  # 6, 10, 14
        ("0 0 1 JAN,jul ?", T, dt.datetime(2026, 7, 1, 0, 0, tzinfo=UTC)),
        # day of month and day of week, neither *: either matches
        ("0 0 13 * 5", T, dt.datetime(2026, 3, 20, 0, 0, tzinfo=UTC)),
        ("0 0 29 2 *", T, dt.datetime(2028, 2, 29, 0, 0, tzinfo=UTC)),
        ("0 0 30 2 *", T, None),
        ("@every 90s", T, T.replace(microsecond=0) + dt.timedelta(seconds=90)),
        ("@every 1m30s", T, T.replace(microsecond=0) + dt.timedelta(seconds=90)),
    ],
)  # fmt: skip
def test_next(spec: str, after: dt.datetime, expected: dt.datetime | None) -> None:
    assert cron.parse(spec).next(after) == expected


def test_next_in_a_time_zone() -> None:
    tokyo = ZoneInfo("Asia/Tokyo")  # UTC+9, no daylight saving
    assert cron.parse("0 9 * * *").next(T, tokyo) == dt.datetime(2026, 3, 15, 0, 0, tzinfo=UTC)
    berlin = ZoneInfo("Europe/Berlin")  # 2026-03-29: 02:00 CET -> 03:00 CEST
    before = dt.datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    assert cron.parse("0 12 * * *").next(before, berlin) == dt.datetime(
        2026, 3, 29, 10, 0, tzinfo=UTC
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty spec string"),
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("61 * * * *", "end of range (61) above maximum (59): 61"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("5-2 * * * *", "beginning of range (5) beyond end of range (2): 5-2"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
        ("* * * * 7", "end of range (7) above maximum (6): 7"),
        ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        ("@every soon", 'failed to parse duration @every soon: time: invalid duration "soon"'),
    ],
)
def test_refused(spec: str, message: str) -> None:
    with pytest.raises(cron.CronError) as err:
        cron.parse(spec)
    assert str(err.value) == message


@pytest.mark.parametrize("name", ["", "Local", "Mars/Olympus", "../etc/passwd"])
def test_unknown_time_zones(name: str) -> None:
    with pytest.raises(cron.CronError, match="unknown time zone"):
        cron.zone(name)


FIELD = st.one_of(
    st.just("*"),
    st.integers(0, 5).map(str),
    st.tuples(st.integers(0, 3), st.integers(4, 6)).map(lambda r: f"{r[0]}-{r[1]}"),
    st.integers(1, 4).map(lambda s: f"*/{s}"),
)


@given(
    minute=FIELD, hour=FIELD, weekday=FIELD,
    after=st.datetimes(dt.datetime(2020, 1, 1), dt.datetime(2030, 1, 1), timezones=st.just(UTC)),
)  # fmt: skip
def test_next_is_the_first_matching_minute(
    minute: str, hour: str, weekday: str, after: dt.datetime
) -> None:
    schedule = cron.parse(f"{minute} {hour} * * {weekday}")
    nxt = schedule.next(after)
    assert nxt is not None and nxt > after and nxt.second == 0
    assert nxt.minute in schedule.minutes and nxt.hour in schedule.hours
    assert nxt.isoweekday() % 7 in schedule.weekdays
    # no matching minute in between (checked over at most a day of minutes)
    probe = after.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    for _ in range(min(int((nxt - probe).total_seconds() // 60), 1440)):
        assert not (probe.minute in schedule.minutes and probe.hour in schedule.hours
                    and probe.isoweekday() % 7 in schedule.weekdays)  # fmt: skip
        probe += dt.timedelta(minutes=1)


def cronjob(created: dt.datetime, last: dt.datetime | None = None, **spec: Any) -> dict[str, Any]:
    status = {"lastScheduleTime": last.strftime("%Y-%m-%dT%H:%M:%SZ")} if last else {}
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "tick", "namespace": "ns", "uid": "u-1",
                         "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ")},
            "spec": {"schedule": "*/5 * * * *", **spec}, "status": status}  # fmt: skip


def test_most_recent_missed_time_and_the_requeue() -> None:
    every5 = cron.parse("*/5 * * * *")
    created = dt.datetime(2026, 1, 1, 10, 2, tzinfo=UTC)
    now = dt.datetime(2026, 1, 1, 10, 3, tzinfo=UTC)
    assert most_recent(cronjob(created), now, every5, UTC, True)[1:] == (None, 0)
    assert next_delay(cronjob(created), now, every5, UTC) == pytest.approx(120.1)
    now = dt.datetime(2026, 1, 1, 10, 27, tzinfo=UTC)  # 10:05 ... 10:25 missed
    _, recent, missed = most_recent(cronjob(created), now, every5, UTC, True)
    assert recent == dt.datetime(2026, 1, 1, 10, 25, tzinfo=UTC) and missed == 5
    last = dt.datetime(2026, 1, 1, 10, 25, tzinfo=UTC)
    assert most_recent(cronjob(created, last), now, every5, UTC, True)[1] is None
    # startingDeadlineSeconds: nothing earlier than now - deadline is considered
    late = cronjob(created, startingDeadlineSeconds=60)
    assert most_recent(late, now, every5, UTC, True)[1] is None
    assert most_recent(late, now, every5, UTC, False)[1] == recent


def test_job_from_template() -> None:
    cj = cronjob(T)
    cj["spec"]["jobTemplate"] = {"metadata": {"labels": {"a": "b"}, "annotations": {"x": "y"}},
                                 "spec": {"template": {"spec": {"containers": []}}}}  # fmt: skip
    scheduled = dt.datetime(2026, 3, 14, 15, 10, tzinfo=UTC)
    job = job_from_template(cj, scheduled, ZoneInfo("Asia/Tokyo"))
    assert job["metadata"]["name"] == f"tick-{int(scheduled.timestamp()) // 60}"
    assert job["metadata"]["labels"] == {"a": "b"}
    assert job["metadata"]["annotations"] == {
        "x": "y", "batch.kubernetes.io/cronjob-scheduled-timestamp": "2026-03-15T00:10:00+09:00"
    }  # fmt: skip
    assert job["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "CronJob", "name": "tick", "uid": "u-1",
         "controller": True, "blockOwnerDeletion": True}
    ]  # fmt: skip
    utc_job = job_from_template(cj, scheduled, UTC)
    assert (
        utc_job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
        == "2026-03-14T15:10:00Z"
    )
