"""Cron schedules as kube-controller-manager reads a CronJob's (github.com/robfig/cron/v3's
`ParseStandard`): five fields (minute, hour, day of month, month, day of week) of `*`, `?`,
values, names (JAN-DEC, SUN-SAT), ranges, steps and lists; the descriptors `@yearly`
(`@annually`), `@monthly`, `@weekly`, `@daily` (`@midnight`), `@hourly` and `@every
DURATION`; the day of month and day of week OR-ed unless one of them is `*` or `?`. Times
are computed in the CronJob's `timeZone` (zoneinfo), UTC without one (the zone of a
kube-controller-manager in a container). The API server validates with it, the CronJob
controller schedules with it; both import it from here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .goduration import parse_go_duration

_MONTH_NAMES = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
MONTHS = {name: i + 1 for i, name in enumerate(_MONTH_NAMES)}
DAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
# (minimum, maximum, names) of the five fields, robfig's `bounds`
FIELDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}), (0, 23, {}), (1, 31, {}), (1, 12, MONTHS), (0, 6, DAYS),
)  # fmt: skip
DESCRIPTORS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}  # fmt: skip
SEARCH_YEARS = 5  # robfig gives up on a schedule that matches nothing within five years


class CronError(ValueError):
    """A schedule robfig/cron refuses, with its message."""


@dataclass(frozen=True, slots=True)
class Schedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # the day of month or the day of week is * or ?: both must match
    every: float | None = None  # @every: a constant delay, in whole seconds

    def next(self, after: dt.datetime, zone: dt.tzinfo = dt.UTC) -> dt.datetime | None:
        """The first activation strictly after `after`, in `zone`; None if none within
        SEARCH_YEARS (a schedule such as the 30th of February)."""
        if self.every is not None:
            whole = after.replace(microsecond=0)
            return whole + dt.timedelta(seconds=self.every)
        local = after.astimezone(zone).replace(tzinfo=None, second=0, microsecond=0)
        t = local + dt.timedelta(minutes=1)
        limit = t.year + SEARCH_YEARS
        while t.year <= limit:
            if t.month not in self.months:
                t = _first_of_next_month(t)
                continue
            if not self._day_matches(t):
                t = (t + dt.timedelta(days=1)).replace(hour=0, minute=0)
                continue
            if t.hour not in self.hours:
                t = (t + dt.timedelta(hours=1)).replace(minute=0)
                continue
            if t.minute not in self.minutes:
                t += dt.timedelta(minutes=1)
                continue
            return t.replace(tzinfo=zone).astimezone(dt.UTC)
        return None

    def _day_matches(self, t: dt.datetime) -> bool:
        dom = t.day in self.days
        dow = (t.isoweekday() % 7) in self.weekdays
        return (dom and dow) if self.any_day else (dom or dow)


def _first_of_next_month(t: dt.datetime) -> dt.datetime:
    year, month = (t.year + 1, 1) if t.month == 12 else (t.year, t.month + 1)
    return dt.datetime(year, month, 1)


def _number(text: str, names: dict[str, int]) -> int:
    if text.lower() in names:
        return names[text.lower()]
    try:
        value = int(text)
    except ValueError:
        raise CronError(f"failed to parse int from {text}: strconv.Atoi: parsing "
                        f'"{text}": invalid syntax') from None  # fmt: skip
    if value < 0:
        raise CronError(f"negative number ({value}) not allowed: {text}")
    return value


def _field(expr: str, low: int, high: int, names: dict[str, int]) -> tuple[frozenset[int], bool]:
    """One field's values, and whether it was `*` or `?` (robfig's starBit)."""
    values: set[int] = set()
    star = False
    for part in expr.split(","):
        range_, _, step_text = part.partition("/")
        step = 1
        if step_text:
            step = _number(step_text, {})
            if step == 0:
                raise CronError(f"step of range should be a positive number: {part}")
        if range_ in ("*", "?"):
            start, end = low, high
            star = star or step == 1
        else:
            first, dash, last = range_.partition("-")
            start = _number(first, names)
            end = _number(last, names) if dash else (high if step_text else start)
        if start < low:
            raise CronError(f"beginning of range ({start}) below minimum ({low}): {part}")
        if end > high:
            raise CronError(f"end of range ({end}) above maximum ({high}): {part}")
        if start > end:
            raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {part}")
        values.update(range(start, end + 1, step))
    return frozenset(values), star


def _every(text: str) -> float:
    try:
        total = parse_go_duration(text)
    except ValueError:
        raise CronError(f"failed to parse duration @every {text}: time: invalid duration "
                        f'"{text}"') from None  # fmt: skip
    return max(float(int(total)), 1.0)  # rounded down to the second, at least one


def parse(spec: str) -> Schedule:
    """robfig/cron v3 ParseStandard; raises CronError with robfig's message."""
    spec = spec.strip()
    if not spec:
        raise CronError("empty spec string")
    if spec.startswith(("TZ=", "CRON_TZ=")):
        raise CronError("TZ= and CRON_TZ= are not accepted here: use spec.timeZone")
    if spec.startswith("@every "):
        every = _every(spec[len("@every ") :].strip())
        full = frozenset[int]()
        return Schedule(full, full, full, full, full, True, every)
    if spec.startswith("@"):
        if spec not in DESCRIPTORS:
            raise CronError(f"unrecognized descriptor: {spec}")
        spec = DESCRIPTORS[spec]
    fields = spec.split()
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    parsed = [_field(f, *bounds) for f, bounds in zip(fields, FIELDS, strict=True)]
    return Schedule(
        parsed[0][0], parsed[1][0], parsed[2][0], parsed[3][0], parsed[4][0],
        any_day=parsed[2][1] or parsed[4][1],
    )  # fmt: skip


def zone(name: str | None) -> dt.tzinfo:
    """A CronJob's `timeZone` (None: UTC); raises CronError as time.LoadLocation fails."""
    if name is None:
        return dt.UTC
    if not name or name.lower() == "local" or name.startswith(("/", ".")) or ".." in name:
        raise CronError(f"unknown time zone {name}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError(f"unknown time zone {name}") from None
