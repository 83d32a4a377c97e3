"""A controller's reconcile loop: keys in, N workers, requeue timers, rate-limited retries.

In the spirit of controller-runtime's pkg/internal/controller (`reconcileHandler`):

    async def reconcile(key: Key) -> float | Requeue | None:  # seconds, REQUEUE, or done
        ...
    loop = ReconcileLoop(reconcile, name="reconciler", workers=2,
                         backoff=lambda: Backoff(0.5, 60.0))
    await loop.start()
    loop.add(key)            # from an informer handler (synchronous, cheap)
    await loop.stop()        # in-flight reconciles finish (within `stop_grace`), nothing after

What one reconcile of `key` comes to (its `Outcome`, counted in `loop.counts` as
controller-runtime's `controller_runtime_reconcile_total{controller,result}`):

- it returns None (`success`): nothing left to wait for: the key's timer is cancelled and its
  failures forgotten (controller-runtime: `Forget`);
- it returns a number of seconds (`requeue_after`): the key is reconciled again after that
  long (a timer; the earliest timer of a key wins, as `WorkQueue.add_after`), and its failures
  are forgotten (`Forget` + `AddAfter`);
- it returns `REQUEUE` (`requeue`): again after the key's own back-off, not a failure
  (`Result{Requeue: true}`, `AddRateLimited`);
- it raises (`error`): the key is retried after its own back-off (`kube/backoff.Backoff`,
  exponential with jitter, one per failing key; `AddRateLimited`), logged as a warning;
- it raises `TerminalError` (`error`, and counted in `counts.terminal_errors` as
  controller-runtime's `terminal_reconcile_errors_total`): retrying cannot help, so it is
  not retried: logged as an error, its timer cancelled and its failures forgotten; the key is
  reconciled again when it is added (its object changed), or at the error's `requeue_after`
  when it names one (time alone changes what the reconcile does: a deadline).

Every line logged during one reconcile, by the reconcile itself, the loop, or a library it
calls, carries that reconcile's `reconcile_id`, a fresh short id (controller-runtime's
`reconcileID` in the logger of the reconcile's context; here `logs.log_context`).

Whatever happened, a change to the key (`add`) while a worker holds it is reconciled once
more after that worker is done, never by a second worker at the same time (`WorkQueue`).

It knows nothing of what a key names or what reconciling one does.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Final, Generic, TypeVar

from graceful_drain.kube.backoff import Backoff
from graceful_drain.kube.client import error_detail
from graceful_drain.kube.workqueue import WorkQueue
from graceful_drain.logs import get_logger, log_context

K = TypeVar("K", bound=Hashable)

DEFAULT_WORKERS = 2
DEFAULT_STOP_GRACE_SECONDS = 5.0
RECONCILE_ID_BYTES = 6  # 12 hex digits: distinct enough to follow one reconcile in a log


class Requeue(Enum):
    """What a reconcile returns to be reconciled again after its key's back-off without having
    failed (controller-runtime's `Result{Requeue: true}`)."""

    REQUEUE = "requeue"


REQUEUE: Final = Requeue.REQUEUE

Reconcile = Callable[[K], Awaitable[float | Requeue | None]]


class Outcome(StrEnum):
    """What one reconcile came to: controller-runtime's `result` label values."""

    SUCCESS = "success"
    ERROR = "error"
    REQUEUE = "requeue"
    REQUEUE_AFTER = "requeue_after"


class TerminalError(Exception):
    """Raised by a reconcile when retrying cannot help (controller-runtime's
    `reconcile.TerminalError`): the key is not retried with back-off, only reconciled again
    when it is added, or after `requeue_after` seconds when given (a deadline that changes
    what the reconcile does). Raise it `from` the error it stands for."""

    def __init__(self, message: str, *, requeue_after: float | None = None) -> None:
        super().__init__(message)
        self.requeue_after = requeue_after


@dataclass(slots=True)
class ReconcileCounts:
    """What a loop's reconciles came to since it was made, kept across stop and start; every
    outcome is there from the start, at zero."""

    outcomes: dict[Outcome, int] = field(default_factory=lambda: dict.fromkeys(Outcome, 0))
    terminal_errors: int = 0  # of outcomes[ERROR]

    @property
    def errors(self) -> int:
        """Reconciles that raised, terminal or retried (`reconcile_errors_total`)."""
        return self.outcomes[Outcome.ERROR]


def _new_reconcile_id() -> str:
    return secrets.token_hex(RECONCILE_ID_BYTES)


_log = get_logger("loop")


@dataclass(slots=True)
class _Failing:
    """A key requeued with back-off (it failed, or asked for it): its own back-off, and how
    many of its reconciles failed in a row."""

    backoff: Backoff
    count: int = 0


class ReconcileLoop(Generic[K]):
    """Reconciles keys with `workers` concurrent workers while started; a component."""

    def __init__(
        self,
        reconcile: Reconcile[K],
        *,
        name: str,
        workers: int = DEFAULT_WORKERS,
        backoff: Callable[[], Backoff] = Backoff,
        stop_grace: float = DEFAULT_STOP_GRACE_SECONDS,
        queue: Callable[[], WorkQueue[K]] = WorkQueue,
        describe: Callable[[K], str] = str,
    ) -> None:
        """`describe` names a key in log lines (e.g. namespace/name)."""
        if workers < 1:
            raise ValueError("need at least one worker")
        self.name = name
        self._reconcile = reconcile
        self._worker_count = workers
        self._new_backoff = backoff
        self._stop_grace = stop_grace
        self._new_queue = queue
        self._describe = describe
        self._queue: WorkQueue[K] | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._busy: set[asyncio.Task[None]] = set()  # workers inside a reconcile
        self._failing: dict[K, _Failing] = {}
        self.counts = ReconcileCounts()

    @property
    def running(self) -> bool:
        return self._queue is not None

    # --- input -------------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Reconcile `key` soon (ignored while stopped: `start` is where work is listed)."""
        if self._queue is not None:
            self._queue.add(key)

    def forget(self, key: K) -> None:
        """The key needs nothing more: cancel its timer and forget its failures."""
        self._failing.pop(key, None)
        if self._queue is not None:
            self._queue.cancel_timer(key)

    def failures(self, key: K) -> int:
        """Failed reconciles of `key` since its last success (for logs and tests)."""
        failing = self._failing.get(key)
        return 0 if failing is None else failing.count

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        if self._queue is not None:
            return
        queue = self._queue = self._new_queue()
        self._workers = [
            asyncio.create_task(self._work(queue), name=f"{self.name}-{index}")
            for index in range(self._worker_count)
        ]

    async def stop(self) -> None:
        """Stop taking keys, cancel every timer, let the reconciles in flight finish (those
        still running after `stop_grace` seconds are cancelled); queued keys are dropped."""
        queue, self._queue = self._queue, None
        if queue is None:
            return
        queue.close()
        workers, self._workers = self._workers, []
        for task in workers:
            if task not in self._busy:
                task.cancel()  # waiting for a key: nothing to finish
        _, late = await asyncio.wait(workers, timeout=self._stop_grace)
        for task in late:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        self._busy.difference_update(workers)
        self._failing.clear()

    # --- work --------------------------------------------------------------------------------

    async def _work(self, queue: WorkQueue[K]) -> None:
        task = asyncio.current_task()
        assert task is not None
        while self._queue is queue:
            key = await queue.get()
            if self._queue is not queue:  # stopped while this worker was being handed `key`
                return
            self._busy.add(task)
            try:
                await self._handle(queue, key)
            finally:
                self._busy.discard(task)
                queue.done(key)

    async def _handle(self, queue: WorkQueue[K], key: K) -> None:
        with log_context(reconcile_id=_new_reconcile_id()):
            try:
                result = await self._reconcile(key)
            except asyncio.CancelledError:
                raise
            except TerminalError as error:
                self._count(Outcome.ERROR)
                self.counts.terminal_errors += 1
                self._terminal(queue, key, error)
                return
            except Exception as error:
                self._count(Outcome.ERROR)
                self._retry(queue, key, error)
                return
            if result is None:
                self._count(Outcome.SUCCESS)
                self._failing.pop(key, None)
                queue.cancel_timer(key)
            elif isinstance(result, Requeue):
                self._count(Outcome.REQUEUE)
                queue.add_after(key, self._failing_entry(key).backoff.next_delay())
            else:
                self._count(Outcome.REQUEUE_AFTER)
                self._failing.pop(key, None)
                queue.add_after(key, result)

    def _count(self, outcome: Outcome) -> None:
        self.counts.outcomes[outcome] += 1

    def _failing_entry(self, key: K) -> _Failing:
        failing = self._failing.get(key)
        if failing is None:
            failing = self._failing[key] = _Failing(self._new_backoff())
        return failing

    def _retry(self, queue: WorkQueue[K], key: K, error: Exception) -> None:
        failing = self._failing_entry(key)
        failing.count += 1
        delay = failing.backoff.next_delay()
        _log.warning("reconcile failed, retrying", loop=self.name, key=self._describe(key),
                     error=error_detail(error), failures=failing.count,
                     retry_in_seconds=round(delay, 3))  # fmt: skip
        queue.add_after(key, delay)

    def _terminal(self, queue: WorkQueue[K], key: K, error: TerminalError) -> None:
        self._failing.pop(key, None)
        queue.cancel_timer(key)
        if error.requeue_after is not None:
            queue.add_after(key, error.requeue_after)
        cause = error.__cause__
        _log.error("reconcile failed for good, not retried", loop=self.name,
                   key=self._describe(key), error=str(error),
                   cause=None if cause is None else error_detail(cause),
                   again_in_seconds=error.requeue_after)  # fmt: skip
