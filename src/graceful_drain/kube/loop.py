"""A controller's reconcile loop: keys in, N workers, requeue timers, rate-limited retries.

In the spirit of controller-runtime's pkg/internal/controller (`reconcileHandler`):

    async def reconcile(key: Key) -> float | None:   # the seconds to wait, or None: done
        ...
    loop = ReconcileLoop(reconcile, name="reconciler", workers=2,
                         backoff=lambda: Backoff(0.5, 60.0))
    await loop.start()
    loop.add(key)            # from an informer handler (synchronous, cheap)
    await loop.stop()        # in-flight reconciles finish (within `stop_grace`), nothing after

What one reconcile of `key` comes to:

- it returns a number of seconds: the key is reconciled again after that long (a timer; the
  earliest timer of a key wins, as `WorkQueue.add_after`), and its failures are forgotten
  (controller-runtime: `Forget` + `AddAfter`);
- it returns None: nothing left to wait for: the key's timer is cancelled and its failures
  forgotten (`Forget`);
- it raises: the key is retried after its own back-off (`kube/backoff.Backoff`, exponential
  with jitter, one per failing key; `AddRateLimited`), and `on_error` hears of it.

Whatever happened, a change to the key (`add`) while a worker holds it is reconciled once
more after that worker is done, never by a second worker at the same time (`WorkQueue`).

It knows nothing of what a key names or what reconciling one does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from graceful_drain.kube.backoff import Backoff
from graceful_drain.kube.client import error_detail
from graceful_drain.kube.workqueue import WorkQueue
from graceful_drain.logs import get_logger

K = TypeVar("K", bound=Hashable)

DEFAULT_WORKERS = 2
DEFAULT_STOP_GRACE_SECONDS = 5.0

Reconcile = Callable[[K], Awaitable[float | None]]
ErrorHook = Callable[[K, Exception, float], None]  # key, error, the retry's delay in seconds

_log = get_logger("loop")


@dataclass(slots=True)
class _Failing:
    """A key whose last reconcile failed: its own back-off, and how often in a row."""

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
        on_error: ErrorHook[K] | None = None,
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
        self._on_error = on_error
        self._stop_grace = stop_grace
        self._new_queue = queue
        self._describe = describe
        self._queue: WorkQueue[K] | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._busy: set[asyncio.Task[None]] = set()  # workers inside a reconcile
        self._failing: dict[K, _Failing] = {}

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
        try:
            requeue_after = await self._reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            failing = self._failing.get(key)
            if failing is None:
                failing = self._failing[key] = _Failing(self._new_backoff())
            failing.count += 1
            delay = failing.backoff.next_delay()
            _log.warning("reconcile failed, retrying", loop=self.name, key=self._describe(key),
                         error=error_detail(error), failures=failing.count,
                         retry_in_seconds=round(delay, 3))  # fmt: skip
            if self._on_error is not None:
                self._on_error(key, error, delay)
            queue.add_after(key, delay)
            return
        self._failing.pop(key, None)
        if requeue_after is None:
            queue.cancel_timer(key)
        else:
            queue.add_after(key, requeue_after)
