"""The statistics every benchmark reports, pure: percentiles, rates, ratios and targets.

Percentiles use the nearest-rank definition: the q-th percentile of n samples is the
ceil(q/100 * n)-th smallest. It is always an observed value, and with fewer than 1000 samples
p99.9 is simply the maximum, which is what a reader should expect from so few.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted samples; q in (0, 100]."""
    if not ordered:
        raise ValueError("percentile of no samples")
    if not 0 < q <= 100:
        raise ValueError(f"percentile rank must be in (0, 100], not {q}")
    # Rounded first: 99.9 / 100 * 1000 is 999.0000000000001 in floating point.
    rank = math.ceil(round(q / 100 * len(ordered), 9))
    return ordered[max(rank, 1) - 1]


@dataclass(frozen=True, slots=True)
class Summary:
    """A latency (or duration) distribution, in the unit of its samples."""

    count: int
    p50: float
    p99: float
    p999: float
    max: float
    mean: float


def summarize(samples: Iterable[float]) -> Summary | None:
    """None when there are no samples."""
    ordered = sorted(samples)
    if not ordered:
        return None
    return Summary(
        count=len(ordered),
        p50=percentile(ordered, 50),
        p99=percentile(ordered, 99),
        p999=percentile(ordered, 99.9),
        max=ordered[-1],
        mean=math.fsum(ordered) / len(ordered),
    )


def rate(count: int, seconds: float) -> float:
    """Events per second; 0 for an empty or zero-length window."""
    return count / seconds if seconds > 0 else 0.0


def ratio(value: float, reference: float) -> float | None:
    """value / reference, or None when the reference is not a positive number."""
    if not reference > 0 or math.isnan(value):
        return None
    return value / reference


def slope(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of y over x; None with fewer than two distinct x."""
    if len({x for x, _ in points}) < 2:
        return None
    n = len(points)
    mean_x = math.fsum(x for x, _ in points) / n
    mean_y = math.fsum(y for _, y in points) / n
    covariance = math.fsum((x - mean_x) * (y - mean_y) for x, y in points)
    variance = math.fsum((x - mean_x) ** 2 for x, _ in points)
    return covariance / variance


class Bound(StrEnum):
    AT_LEAST = ">="
    AT_MOST = "<="
    BELOW = "<"


@dataclass(frozen=True, slots=True)
class Target:
    """A claim the issue makes, e.g. Target("throughput vs reference", Bound.AT_LEAST, 0.5)."""

    what: str
    bound: Bound
    limit: float
    unit: str = ""

    def met_by(self, value: float | None) -> bool:
        """A missing or NaN measurement never meets a target."""
        if value is None or math.isnan(value):
            return False
        if self.bound is Bound.AT_LEAST:
            return value >= self.limit
        if self.bound is Bound.AT_MOST:
            return value <= self.limit
        return value < self.limit

    def describe(self) -> str:
        return f"{self.what} {self.bound.value} {_number(self.limit)}{self.unit}"


@dataclass(frozen=True, slots=True)
class Verdict:
    target: Target
    value: float | None
    met: bool
    where: str = ""  # which row of the table, e.g. "concurrency 32"

    @property
    def text(self) -> str:
        return "met" if self.met else "MISSED"


def evaluate(target: Target, value: float | None, where: str = "") -> Verdict:
    return Verdict(target, value, target.met_by(value), where)


def _number(value: float) -> str:
    return f"{value:g}"
