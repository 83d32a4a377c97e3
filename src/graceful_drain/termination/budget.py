"""How long the detector may spend reading the cluster: one hard deadline per detection.

The deadline comes from the grace period: deciding must leave most of the grace period
to the drain (or the shed) it decides on, so detection gets at most
``DETECTION_SHARE`` of it, and never more than the requested deadline
(``DEFAULT_DEADLINE_SECONDS`` unless the caller asks otherwise)::

    budget = max(0, min(requested deadline, grace period * DETECTION_SHARE))

The grace period is the minimum of every bound known, counted from the detection's
start (the SIGTERM, the process start):

* the configured one (``--grace-period``, ``TERMINATION_GRACE_PERIOD_SECONDS``, set next to
  the pod's ``terminationGracePeriodSeconds`` in its manifest), else
  ``ASSUMED_GRACE_PERIOD_SECONDS``, well under Kubernetes' 30 s default, because the pod
  read that would tell may be the very call that hangs;
* once the pod is read (:func:`pod_grace_bound_seconds`), the pod's own grace period
  (``deletionGracePeriodSeconds``: a drain, Cluster Autoscaler or Karpenter may delete
  with less than the spec's; else ``terminationGracePeriodSeconds``), and the time left
  until ``deletionTimestamp`` (the API server sets it to the deletion's request time
  plus its grace period: when the kubelet's SIGKILL comes) plus the time already spent.

The deadline is re-derived as soon as the pod has been read, and only ever brought
forward, never extended.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime

from graceful_drain.kube.rawjson import as_int, get_path
from graceful_drain.kube.timefmt import as_utc, parse_timestamp

DEFAULT_GRACE_PERIOD_SECONDS = 30  # the API server's default terminationGracePeriodSeconds
# The deadline's grace period while none is known: a 2 s budget, in time for a pod whose
# grace period is as short as 4 s even when the pod read hangs.
ASSUMED_GRACE_PERIOD_SECONDS = 4
GRACE_PERIOD_VARIABLE = "TERMINATION_GRACE_PERIOD_SECONDS"
DEFAULT_DEADLINE_SECONDS = 5.0
DETECTION_SHARE = 0.5  # at most half the grace period is spent deciding what to do with it


def collection_budget(
    grace_period_seconds: float, requested_deadline_seconds: float | None = None
) -> float:
    """Seconds the detector may spend, from the grace period and the requested deadline."""
    requested = (
        DEFAULT_DEADLINE_SECONDS
        if requested_deadline_seconds is None
        else requested_deadline_seconds
    )
    return max(0.0, min(requested, max(grace_period_seconds, 0.0) * DETECTION_SHARE))


def pod_grace_period_seconds(raw_pod: object) -> int | None:
    """This pod's grace period as its object states it, or None.

    ``metadata.deletionGracePeriodSeconds`` (the grace period of the deletion in progress:
    an eviction or delete may shorten it) wins over ``spec.terminationGracePeriodSeconds``.
    A kubelet-initiated termination sets neither; the kubelet may then use less
    (``evictionMaxPodGracePeriod``, or 1 s for hard-threshold evictions).
    """
    for value in (
        get_path(raw_pod, "metadata", "deletionGracePeriodSeconds"),
        get_path(raw_pod, "spec", "terminationGracePeriodSeconds"),
    ):
        seconds = as_int(value)
        if seconds is not None and seconds >= 0:
            return seconds
    return None


def pod_grace_bound_seconds(raw_pod: object, now: datetime, elapsed_seconds: float) -> float | None:
    """The grace period the pod object allows, in seconds from the detection's start
    (``elapsed_seconds`` before ``now``), or None when it says nothing.

    The minimum of :func:`pod_grace_period_seconds` and, when ``deletionTimestamp`` is set,
    ``elapsed_seconds`` plus what is left until it (negative once it has passed: then the
    deadline is already behind us and the detector answers with what it has).  metav1.Time
    has whole seconds, truncated: the time left reads up to 1 s short, the safe direction.
    """
    bounds: list[float] = []
    grace = pod_grace_period_seconds(raw_pod)
    if grace is not None:
        bounds.append(float(grace))
    deletion = parse_timestamp(get_path(raw_pod, "metadata", "deletionTimestamp"))
    if deletion is not None:
        left = (deletion - as_utc(now)).total_seconds()
        bounds.append(max(elapsed_seconds, 0.0) + left)
    return min(bounds) if bounds else None


class GracePeriodError(ValueError):
    """The grace period in the environment is not a whole number of seconds >= 0."""


def grace_period_from_environment(env: Mapping[str, str]) -> int | None:
    """``TERMINATION_GRACE_PERIOD_SECONDS`` from ``env``; None when unset or blank."""
    text = env.get(GRACE_PERIOD_VARIABLE, "").strip()
    if not text:
        return None
    try:
        seconds = int(text)
    except ValueError:
        seconds = -1
    if seconds < 0:
        raise GracePeriodError(
            f"{GRACE_PERIOD_VARIABLE}={text!r} is not a whole number of seconds >= 0 (set it "
            "to the pod's terminationGracePeriodSeconds)"
        )
    return seconds


Clock = Callable[[], float]


class Deadline:
    """A point on a monotonic clock, fixed at creation and only ever brought forward."""

    def __init__(
        self,
        budget_seconds: float,
        *,
        started_at: float | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self._clock = clock
        self.started_at = clock() if started_at is None else started_at
        # Kept as given: recomputing it as (started_at + budget) - started_at loses the last
        # bits on a clock far from zero (60 s read back as 59.99999999999909).
        self._budget = max(budget_seconds, 0.0)

    def elapsed(self) -> float:
        """Seconds since ``started_at``."""
        return self._clock() - self.started_at

    @property
    def budget_seconds(self) -> float:
        """The whole budget, from ``started_at`` to the deadline."""
        return self._budget

    def remaining(self) -> float:
        return max(0.0, self.started_at + self._budget - self._clock())

    def tighten(self, budget_seconds: float) -> None:
        """Bring the deadline forward to ``started_at + budget_seconds`` if that is sooner."""
        self._budget = min(self._budget, max(budget_seconds, 0.0))
