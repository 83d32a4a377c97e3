"""The library entry point: ``await Detector.from_environment().detect()`` → a Verdict.

One detection = one client, the four reads under one deadline
(:mod:`graceful_drain.termination.signals`), then :func:`classify`.  ``detect`` never
raises and never outlives its deadline: no configuration, no identity, no answer — all
become evidence, and the classifier's conservative fallback answers.  The CLI
(``graceful-drain termination-cause``) and the SIGTERM handlers all call this class,
so they give the same verdict on the same cluster state.

The deadline's grace period is the minimum of every bound known
(:mod:`graceful_drain.termination.budget`): the configured one (``--grace-period``, or
``TERMINATION_GRACE_PERIOD_SECONDS`` in the environment), else an assumed 4 s; and, as
soon as the pod is read, its ``deletionGracePeriodSeconds`` and the time left until its
``deletionTimestamp``, whatever was configured.  The grace period of the classifier's
retention rule is the configured one, else the pod's own (``deletionGracePeriodSeconds``,
else ``terminationGracePeriodSeconds``), else 30 s.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import NamedTuple

from graceful_drain.annotations import DEFAULT_ROLLOUT_TIMEOUT
from graceful_drain.kube.meta import utc_now
from graceful_drain.termination.budget import (
    ASSUMED_GRACE_PERIOD_SECONDS,
    DEFAULT_GRACE_PERIOD_SECONDS,
    Clock,
    Deadline,
    collection_budget,
    grace_period_from_environment,
    pod_grace_bound_seconds,
)
from graceful_drain.termination.classify import DEFAULT_EVENT_RETENTION_SECONDS, classify
from graceful_drain.termination.evidence import Evidence, Trigger, Unavailable, UnavailableReason
from graceful_drain.termination.identity import PodIdentity, resolve_identity
from graceful_drain.termination.reader import (
    ClusterReader,
    RestReader,
    failure_of,
)
from graceful_drain.termination.signals import CANCEL_WAIT_SECONDS, collect_evidence
from graceful_drain.termination.verdict import Verdict

# Part of the budget kept back from the reads for closing the client and answering.
FINISH_RESERVE_SECONDS = 0.2
FINISH_RESERVE_SHARE = 0.2
CLOSE_WAIT_SECONDS = 0.1
# The client's own per-request timeout sits past the deadline, so the deadline is what cuts.
CLIENT_TIMEOUT_MARGIN_SECONDS = 1.0
DEFAULT_RECORD_TIMEOUT_SECONDS = 2.0

ReaderFactory = Callable[[float], ClusterReader]  # client timeout (s) -> reader; may raise


class DetectorConfig(NamedTuple):
    """How to detect.  ``None`` grace period: an assumed 4 s for the deadline, the pod's
    own (else 30 s) for the retention rule.  ``None`` deadline: 5 s.  The deadline is
    always capped at half the grace period, the shortest one known.  ``rollout_timeout``:
    the controller's ``--rollout-timeout`` (its default unless it was changed), the window
    in which a restarted-at stamp is a marker."""

    grace_period_seconds: int | None = None
    deadline_seconds: float | None = None
    event_retention_seconds: int = DEFAULT_EVENT_RETENTION_SECONDS
    rollout_timeout: timedelta = DEFAULT_ROLLOUT_TIMEOUT
    kubeconfig: Path | None = None
    context: str | None = None


def reads_budget(budget_seconds: float) -> float:
    """The part of a detection budget the API reads may use."""
    return max(
        0.0, budget_seconds - min(FINISH_RESERVE_SECONDS, budget_seconds * FINISH_RESERVE_SHARE)
    )


class Detector:
    def __init__(
        self,
        identity: PodIdentity,
        config: DetectorConfig | None = None,
        *,
        reader_factory: ReaderFactory | None = None,
        now: Callable[[], datetime] = utc_now,
        clock: Clock = time.monotonic,
    ) -> None:
        self.identity = identity
        self.config = config or DetectorConfig()
        self._reader_factory = reader_factory or self._rest_reader
        self._now = now
        self._clock = clock
        # The pod object's bound on the grace period (seconds from the last detection's
        # start), once read: budget_seconds() then answers for that detection.
        self._pod_bound: float | None = None

    @classmethod
    def from_environment(
        cls, config: DetectorConfig | None = None, env: Mapping[str, str] | None = None
    ) -> Detector:
        """Identity from the Downward API, the grace period from
        ``TERMINATION_GRACE_PERIOD_SECONDS`` unless ``config`` gives one; raises
        IdentityError when name or namespace is missing, GracePeriodError for a bad grace
        period (at start-up, where a misconfiguration is visible, not at SIGTERM)."""
        environment = os.environ if env is None else env
        config = config or DetectorConfig()
        if config.grace_period_seconds is None:
            grace = grace_period_from_environment(environment)
            config = config._replace(grace_period_seconds=grace)
        return cls(resolve_identity(environment), config)

    def _rest_reader(self, timeout_seconds: float) -> ClusterReader:
        return RestReader.open(
            self.config.kubeconfig, self.config.context, timeout_seconds=timeout_seconds
        )

    def budget_seconds(self, grace_period_seconds: float | None = None) -> float:
        """The whole detection budget for a grace period (default: the shortest known: the
        configured one, else the assumed one, and what the last detection's pod read
        said)."""
        grace = grace_period_seconds
        if grace is None:
            configured = self.config.grace_period_seconds
            grace = ASSUMED_GRACE_PERIOD_SECONDS if configured is None else configured
            if self._pod_bound is not None:
                grace = min(grace, self._pod_bound)
        return collection_budget(grace, self.config.deadline_seconds)

    async def detect(
        self, trigger: Trigger = Trigger.SIGTERM, *, started_at: float | None = None
    ) -> Verdict:
        """Why is this pod terminating?  ``started_at`` (on ``clock``, default
        time.monotonic) is when the budget started: the signal's arrival, the process
        start.  Never raises."""
        self._pod_bound = None
        deadline = Deadline(
            reads_budget(self.budget_seconds()), started_at=started_at, clock=self._clock
        )

        def budget_for_pod(raw_pod: object) -> float | None:
            bound = pod_grace_bound_seconds(raw_pod, self._now(), deadline.elapsed())
            if bound is None:
                return None
            self._pod_bound = bound
            return reads_budget(self.budget_seconds())

        pod_grace: int | None = None
        try:
            reader = self._reader_factory(deadline.remaining() + CLIENT_TIMEOUT_MARGIN_SECONDS)
        except Exception as error:
            evidence = Evidence.nothing_readable(
                self.identity.uid, failure_of(error).unavailable, trigger
            )
        else:
            try:
                collection = await collect_evidence(
                    reader, self.identity, deadline, trigger=trigger, budget_for_pod=budget_for_pod
                )
                evidence, pod_grace = collection.evidence, collection.pod_grace_period_seconds
            finally:
                await _close(reader)
        grace = self.config.grace_period_seconds
        if grace is None:
            grace = pod_grace if pod_grace is not None else DEFAULT_GRACE_PERIOD_SECONDS
        return classify(
            evidence,
            self._now(),
            grace,
            self.config.event_retention_seconds,
            self.config.rollout_timeout,
        )

    async def record(
        self, verdict: Verdict, *, timeout_seconds: float = DEFAULT_RECORD_TIMEOUT_SECONDS
    ) -> Unavailable | None:
        """Post the verdict as an Event on this pod; None on success, else why not.

        Best effort and bounded by ``timeout_seconds``; never raises.
        """
        from graceful_drain.termination.recording import verdict_event  # only when recording

        event = verdict_event(self.identity, verdict, self._now())
        try:
            reader = self._reader_factory(timeout_seconds + CLIENT_TIMEOUT_MARGIN_SECONDS)
        except Exception as error:
            return failure_of(error).unavailable
        try:
            async with asyncio.timeout(max(timeout_seconds, 0.0)):
                await reader.create_event(self.identity.namespace, event)
        except TimeoutError:
            return Unavailable(
                UnavailableReason.TIMEOUT, f"no answer within {timeout_seconds:.2f}s"
            )
        except Exception as error:
            return failure_of(error).unavailable
        finally:
            await _close(reader)
        return None


async def _close(reader: ClusterReader) -> None:
    try:
        await asyncio.wait_for(reader.close(), CLOSE_WAIT_SECONDS + CANCEL_WAIT_SECONDS)
    except Exception:  # closing is best effort: the verdict does not depend on it
        return
