"""How long the detector may spend reading the cluster: one hard deadline per detection.

The deadline comes from the grace period: deciding must leave most of the grace period
to the drain (or the shed) it decides on, so detection gets at most
``DETECTION_SHARE`` of it, and never more than the requested deadline
(``DEFAULT_DEADLINE_SECONDS`` unless the caller asks otherwise)::

    budget = max(0, min(requested deadline, grace period * DETECTION_SHARE))

The grace period is known up front when the caller gives it, or the environment does
(``TERMINATION_GRACE_PERIOD_SECONDS``, set next to the pod's
``terminationGracePeriodSeconds`` in its manifest).  Otherwise the detector starts from
``ASSUMED_GRACE_PERIOD_SECONDS``, well under Kubernetes' 30 s default, because the pod
read that would tell may be the very call that hangs; it then *tightens* the deadline
once the pod object says what this pod's grace period is
(:func:`pod_grace_period_seconds`).  A deadline is only ever brought forward, never
extended.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from graceful_drain.kube.rawjson import as_int, get_path

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

    @property
    def budget_seconds(self) -> float:
        """The whole budget, from ``started_at`` to the deadline."""
        return self._budget

    def remaining(self) -> float:
        return max(0.0, self.started_at + self._budget - self._clock())

    def tighten(self, budget_seconds: float) -> None:
        """Bring the deadline forward to ``started_at + budget_seconds`` if that is sooner."""
        self._budget = min(self._budget, max(budget_seconds, 0.0))
