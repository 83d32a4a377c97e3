"""The Deployment reconciler: turns restarted-at into a rollout, and clears it when done;
cleans the evictions ledger (decision/ledger.py) of the entries that expired.

The rows it follows are in docs/decisions.md ("Reconciler").

    reconciler = Reconciler(cache.deployments, LightkubeDeploymentPatcher(client), events,
                            rollout_timeout=timedelta(minutes=10), metrics=metrics)
    await reconciler.start()   # a component; the leader elector may start and stop it often

Driven by the Deployment informer (a change to a Deployment carrying restarted-at or a
ledger queues it) and by one timer per Deployment at its rolloutTimeout deadline or its
ledger's next expiry; never by polling. What to do
is decided by `rollout.next_step` on the cached view; every write is a `test`-guarded JSON
patch, so any number of reconcilers (replicas without leader election, a restarted one, one
with a stale cache) trigger one rollout and one removal, and a guarded write that no longer
applies (422) only means another reconciler got there first. The loop around `reconcile` is
kube/loop.py's `ReconcileLoop`: its workers, the per-Deployment timer
(`Result.requeue_after`), the retry of a failed reconcile after that Deployment's own
back-off (kube/backoff.py, with jitter), each reconcile's `reconcile_id` in the log lines,
and the outcome counts (`counts`). A write
the API server refuses for good (400, a 422 saying the patched Deployment is invalid:
`_refused_for_good`) raises the loop's `TerminalError`: sending the same patch again cannot
help, so the Deployment is reconciled again only when it changes, or at the rollout's
deadline, whose step (the stamp's removal) is another patch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Protocol

from lightkube.core.exceptions import ApiError

from graceful_drain.controller.decision.ledger import PodUid, kept, ledger_patch, next_expiry
from graceful_drain.controller.decision.model import DeploymentInfo
from graceful_drain.controller.decision.stamp import WriteFailure, classify_write_failure
from graceful_drain.controller.reconcile.rollout import (
    Abandoned,
    Completed,
    CopyToTemplate,
    DiscardMalformed,
    Expired,
    Idle,
    JsonPatch,
    Removal,
    Retain,
    Retire,
    Step,
    TimedOut,
    WaitForRollout,
    completion_patch,
    copy_patch,
    next_step,
    removal_patch,
)
from graceful_drain.controller.writes.events import DrainEvents
from graceful_drain.controller.writes.patcher import DeploymentPatcher
from graceful_drain.kube.backoff import Backoff
from graceful_drain.kube.client import error_detail, http_status, status_message
from graceful_drain.kube.loop import (
    DEFAULT_WORKERS,
    ReconcileCounts,
    ReconcileLoop,
    TerminalError,
)
from graceful_drain.kube.meta import (
    HTTP_CONFLICT,
    HTTP_NOT_ALLOWED,
    HTTP_NOT_FOUND,
    HTTP_UNPROCESSABLE,
    utc_now,
)
from graceful_drain.kube.timefmt import format_rfc3339_micro
from graceful_drain.logs import get_logger

Key = tuple[str, str]  # (namespace, name)

RETRY_BASE_SECONDS = 0.5
RETRY_MAX_SECONDS = 60.0
MIN_TIMER_SECONDS = 0.01
# How long `stop` (a lost Lease, shutdown) lets a reconcile in flight finish its write before
# cancelling it: one or two guarded patches, milliseconds unless the API server hangs.
STOP_GRACE_SECONDS = 1.0

_log = get_logger("reconciler")


# --- what the reconciler needs from the rest of the process -----------------------------------


class DeploymentChange(Protocol):
    @property
    def key(self) -> Key: ...

    @property
    def new(self) -> DeploymentInfo | None: ...


class DeploymentSource(Protocol):
    """The informer cache of Deployments (kube/cache.py's ResourceCache[DeploymentInfo])."""

    def get(self, namespace: str, name: str) -> DeploymentInfo | None: ...

    def items(self) -> list[DeploymentInfo]: ...

    def add_handler(self, handler: Callable[[DeploymentChange], None]) -> None: ...


class RolloutMetrics(Protocol):
    """What the reconciler reports (controller/serving/metrics.py's Metrics)."""

    def record_rollout_completed(self, seconds: float) -> None: ...

    def record_rollout_timed_out(self, seconds: float) -> None: ...

    def set_drains_in_progress(self, count: int) -> None: ...


class NoMetrics:
    def record_rollout_completed(self, seconds: float) -> None:
        pass

    def record_rollout_timed_out(self, seconds: float) -> None:
        pass

    def set_drains_in_progress(self, count: int) -> None:
        pass


# --- the reconciler ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Result:
    """What one reconcile of one Deployment came to (for logs and tests)."""

    step: Step | None  # None: the Deployment is not in the cache
    applied: bool = False  # the step's write went through
    already_done: bool = False  # the guarded write failed its `test`: someone else did it
    # Seconds until this Deployment is reconciled again (a deadline), or None: nothing to
    # wait for but the informer.
    requeue_after: float | None = None
    ledger_cleaned: bool = False  # entries were removed from the evictions ledger


class Reconciler:
    name = "reconciler"

    def __init__(
        self,
        deployments: DeploymentSource,
        patcher: DeploymentPatcher,
        events: DrainEvents | None = None,
        *,
        rollout_timeout: timedelta,
        metrics: RolloutMetrics | None = None,
        clock: Callable[[], datetime] = utc_now,
        workers: int = DEFAULT_WORKERS,
        ledger_pod_uid: Callable[[], PodUid | None] = lambda: None,
    ) -> None:
        self._deployments = deployments
        # The pod cache's uid lookup once it has synced (cache/cluster.py `ledger_pod_uid`), for
        # removing ledger entries whose pod's deletion was observed; None: only expiry.
        self._ledger_pod_uid = ledger_pod_uid
        self._patcher = patcher
        self._events = events
        self._timeout = rollout_timeout
        self._metrics: RolloutMetrics = metrics or NoMetrics()
        self._clock = clock
        self._loop: ReconcileLoop[Key] = ReconcileLoop(
            self._reconcile_key, name=self.name, workers=workers,
            backoff=lambda: Backoff(RETRY_BASE_SECONDS, RETRY_MAX_SECONDS),
            stop_grace=STOP_GRACE_SECONDS, describe=lambda key: f"{key[0]}/{key[1]}",
        )  # fmt: skip
        # Not state that matters for correctness: after a restart a timeout is reported again.
        self._expired_reported: set[tuple[str, str, str]] = set()
        self._in_progress: set[Key] = set()
        # The copies this reconciler wrote whose effect its cache has not shown yet: key ->
        # (value, the generation the copy was made on). A copy changes the template, so the
        # API server bumps the generation: a view of that generation or older is from before
        # it and must not copy again (one template write per stamp). Not state that matters
        # for correctness: a restarted reconciler at worst writes the same value once more.
        self._copied: dict[Key, tuple[str, int]] = {}
        # Handlers cannot be removed from an informer: register once, act only while running.
        deployments.add_handler(self._on_change)

    @property
    def running(self) -> bool:
        return self._loop.running

    @property
    def counts(self) -> ReconcileCounts:
        """What its reconciles came to (kube/loop.py; app.py publishes them as metrics)."""
        return self._loop.counts

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        if self._loop.running:
            return
        await self._loop.start()
        for deployment in self._deployments.items():
            self._track(deployment.namespace, deployment.name, deployment)
        _log.info("reconciler started", in_progress=len(self._in_progress))

    async def stop(self) -> None:
        if not self._loop.running:
            return
        await self._loop.stop()
        _log.info("reconciler stopped")

    # --- input -------------------------------------------------------------------------------

    def _on_change(self, change: DeploymentChange) -> None:
        namespace, name = change.key
        self._track(namespace, name, change.new)

    def _track(self, namespace: str, name: str, deployment: DeploymentInfo | None) -> None:
        key = (namespace, name)
        stamped = deployment is not None and deployment.restarted_at_raw is not None
        # A completed drain's stamp is only kept as evidence: not a drain in progress.
        draining = stamped and deployment is not None and deployment.completed_at_raw is None
        carrying = stamped or (deployment is not None and bool(deployment.evictions))
        if draining:
            self._in_progress.add(key)
        else:
            self._in_progress.discard(key)
        self._metrics.set_drains_in_progress(len(self._in_progress))
        if not self._loop.running:
            return
        if carrying:
            self._loop.add(key)
        else:
            self._loop.forget(key)
            self._copied.pop(key, None)

    # --- work --------------------------------------------------------------------------------

    async def _reconcile_key(self, key: Key) -> float | None:
        return (await self.reconcile(key)).requeue_after

    async def reconcile(self, key: Key) -> Result:
        """Decide and act once for the Deployment `key` as the cache has it: its rollout step,
        then, unless that step wrote (the informer brings the change back), its ledger."""
        deployment = self._deployments.get(*key)
        if deployment is None:
            return Result(None)
        now = self._clock()
        result = await self._rollout(key, deployment, now)
        if result.applied or result.already_done or not deployment.evictions:
            return result
        cleaned, ledger_timer = await self._clean_ledger(deployment, now, result.requeue_after)
        timers = [t for t in (result.requeue_after, ledger_timer) if t is not None]
        return replace(result, ledger_cleaned=cleaned,
                       requeue_after=min(timers) if timers else None)  # fmt: skip

    async def _clean_ledger(self, deployment: DeploymentInfo, now: datetime,
                            deadline: float | None) -> tuple[bool, float | None]:  # fmt: skip
        """Remove the ledger's entries that expired, or whose pod's deletion was observed
        (ledger.py `keep`), with the webhook's guard: a conflict means someone wrote it since,
        and the informer brings it back; a refusal for good is a TerminalError that keeps the
        rollout step's `deadline`. (whether it wrote, seconds until the next look)"""
        entries = deployment.evictions
        keep = kept(entries, deployment.namespace, now, self._ledger_pod_uid())
        cleaned = False
        if len(keep) < len(entries):
            patch = ledger_patch(deployment.uid, deployment.resource_version,
                                 deployment.has_annotations, keep)  # fmt: skip
            try:
                await self._patcher.patch_json(deployment.namespace, deployment.name, patch)
                cleaned = True
                _log.info("evictions ledger cleaned", deployment=str(deployment.ref),
                          removed=len(entries) - len(keep), kept=len(keep))  # fmt: skip
            except ApiError as error:
                if _refused_for_good(error):
                    raise _refusal(deployment, "evictions ledger clean", error,
                                   deadline) from error  # fmt: skip
                if http_status(error) not in (HTTP_CONFLICT, HTTP_UNPROCESSABLE, HTTP_NOT_FOUND):
                    raise
                return False, None  # changed or gone since this view: the informer says
        expiry = next_expiry(keep, now)
        return cleaned, None if expiry is None else _seconds_until(expiry, now)

    async def _rollout(self, key: Key, deployment: DeploymentInfo, now: datetime) -> Result:
        step = next_step(deployment, now, self._timeout)
        if isinstance(step, Idle):
            return Result(step)
        if isinstance(step, WaitForRollout):
            return Result(step, requeue_after=_seconds_until(step.deadline, now))
        if isinstance(step, Retain):
            return Result(step, requeue_after=_seconds_until(step.until, now))
        if isinstance(step, Completed):
            # The informer brings the Deployment back with completed-at: Retain sets the timer.
            return await self._complete(deployment, step, now)
        if isinstance(step, CopyToTemplate):
            deadline = _seconds_until(step.deadline, now)  # a rollout that never completes
            copied = self._copied.get(key)
            if (
                copied is not None
                and copied[0] == step.value
                and deployment.generation <= (copied[1])
            ):  # our copy went through; this view is older than it
                return Result(WaitForRollout(step.value, step.deadline), requeue_after=deadline)
            return replace(await self._copy(deployment, step, deadline), requeue_after=deadline)
        self._copied.pop(key, None)
        if isinstance(step, Expired):
            return self._expired(deployment, step)
        return await self._remove(deployment, step)

    def _expired(self, deployment: DeploymentInfo, step: Expired) -> Result:
        """Report a timed-out rollout once per stamp; restarted-at stays (see `Expired`)."""
        reported = (deployment.namespace, deployment.name, step.value)
        if reported in self._expired_reported:
            return Result(step)
        self._expired_reported.add(reported)
        self._report_timeout(deployment, step.value, step.waited, from_the_future=False,
                             kept="evictions are allowed until the rollout completes")  # fmt: skip
        return Result(step)

    def _report_timeout(
        self, deployment: DeploymentInfo, value: str, waited: timedelta, *,
        from_the_future: bool, kept: str,
    ) -> None:  # fmt: skip
        _log.warning("drain rollout timed out", deployment=str(deployment.ref), restarted_at=value,
                     waited_seconds=waited.total_seconds(), from_the_future=from_the_future,
                     annotation=kept)  # fmt: skip
        self._metrics.record_rollout_timed_out(waited.total_seconds())
        if self._events is not None:
            self._events.timed_out(
                deployment,
                restarted_at=value,
                waited=waited,
                timeout=self._timeout,
                from_the_future=from_the_future,
            )

    async def _guarded(self, deployment: DeploymentInfo, patch: JsonPatch, write: str,
                       deadline: float | None = None) -> bool:  # fmt: skip
        """True if applied; False if it no longer applies (a `test` failed: 422) or the
        Deployment is gone (404). Refused for good (`_refused_for_good`): a TerminalError,
        the Deployment reconciled again when it changes, or at `deadline`. Any other failure
        raises, for a retry with back-off."""
        try:
            await self._patcher.patch_json(deployment.namespace, deployment.name, patch)
        except ApiError as error:
            if _refused_for_good(error):
                raise _refusal(deployment, write, error, deadline) from error
            if http_status(error) in (HTTP_UNPROCESSABLE, HTTP_NOT_FOUND):
                return False
            raise
        return True

    async def _copy(self, deployment: DeploymentInfo, step: CopyToTemplate,
                    deadline: float) -> Result:  # fmt: skip
        # Refused for good, it is tried again at the deadline, where the step becomes TimedOut.
        applied = await self._guarded(deployment, copy_patch(deployment, step.value),
                                      "template copy", deadline)  # fmt: skip
        log = _log.bind(deployment=str(deployment.ref), restarted_at=step.value)
        if applied:
            self._copied[(deployment.namespace, deployment.name)] = (
                step.value, deployment.generation)  # fmt: skip
            log.info("rollout triggered: pod template restartedAt set")
        else:
            log.info("rollout not triggered: the Deployment changed since it was read")
        return Result(step, applied=applied, already_done=not applied)

    async def _complete(self, deployment: DeploymentInfo, step: Completed, now: datetime) -> Result:
        """Record completed-at (once, whoever wins the guarded write reports it); the stamp
        stays as evidence for the old pod's grace period, then a `Retire` removes both."""
        patch = completion_patch(deployment, step.value, format_rfc3339_micro(now))
        applied = await self._guarded(deployment, patch, "completed-at")
        log = _log.bind(deployment=str(deployment.ref), restarted_at=step.value)
        if not applied:
            log.info("completion already recorded or the Deployment changed")
            return Result(step, already_done=True)
        log.info("drain rollout completed", duration_seconds=step.duration.total_seconds(),
                 kept_seconds=deployment.template_grace_period_seconds)  # fmt: skip
        self._metrics.record_rollout_completed(step.duration.total_seconds())
        if self._events is not None:
            self._events.completed(deployment, restarted_at=step.value, duration=step.duration)
        return Result(step, applied=True)

    async def _remove(self, deployment: DeploymentInfo, step: Removal) -> Result:
        completed = deployment.completed_at_raw is not None
        patch = removal_patch(step.value, completed=completed)
        applied = await self._guarded(deployment, patch, "restarted-at removal")
        log = _log.bind(deployment=str(deployment.ref), restarted_at=step.value)
        if not applied:
            log.info("restarted-at already removed or replaced", step=type(step).__name__)
            return Result(step, already_done=True)
        if isinstance(step, Retire):
            log.info("restarted-at removed: the replaced pod's grace period is over")
        elif isinstance(step, Abandoned):
            log.info("restarted-at removed: the Deployment was paused before its rollout")
        elif isinstance(step, TimedOut):
            self._report_timeout(deployment, step.value, step.waited,
                                 from_the_future=step.from_the_future, kept="removed")  # fmt: skip
        elif isinstance(step, DiscardMalformed):
            log.warning("removed a malformed restarted-at annotation")
            if self._events is not None:
                self._events.invalid_annotation(deployment, value=step.value)
        return Result(step, applied=True)


def _refused_for_good(error: ApiError) -> bool:
    """The API server refused the patch for what it is, on this Deployment: malformed (400),
    the patched Deployment invalid (422 other than a patch that no longer applies), or another
    definite 4xx (decision/stamp.py `classify_write_failure`), but for 401/403, which
    credentials or RBAC fix from outside the object, and 404, a Deployment gone. The same view
    builds the same patch, so sending it again cannot help: only a change to the Deployment
    (the informer brings it) or a deadline's next step can."""
    status = http_status(error)
    if status in HTTP_NOT_ALLOWED or status == HTTP_NOT_FOUND:
        return False
    failure = classify_write_failure(status, status_message(error))
    return failure is WriteFailure.DEFINITE


def _refusal(deployment: DeploymentInfo, write: str, error: ApiError,
             deadline: float | None) -> TerminalError:  # fmt: skip
    return TerminalError(f"the {write} of {deployment.ref} was refused for good: "
                         f"{error_detail(error)}", requeue_after=deadline)  # fmt: skip


def _seconds_until(deadline: datetime, now: datetime) -> float:
    return max((deadline - now).total_seconds(), MIN_TIMER_SECONDS)
