"""An availability recorder: per-Deployment Ready-pod timelines from watch events.

    async with AvailabilityRecorder(client) as recorder:
        recorder.mark_drain_started("node-a", "kubectl")
        result = await KubectlDrain(client).drain("node-a")
        recorder.mark_drain_finished(result)
        web = recorder.timeline("web")
        web.zero_ready_seconds(*recorder.drain_window("node-a"))

It watches pods, ReplicaSets and Deployments through the API (list, then
watch, like any informer) and feeds an `AvailabilityLedger` stamped with an
injected monotonic clock. `wait_until` lets tests wait for what the recorder
has seen without sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from types import TracebackType

from .availability import AvailabilityLedger, DeploymentTimeline, Mark, Obj
from .client import KubeClient
from .cluster.runtime import Informer
from .drain.result import Clock, DrainResult

DRAIN_STARTED = "drain-started"
DRAIN_FINISHED = "drain-finished"


class AvailabilityRecorder:
    def __init__(
        self, client: KubeClient, *, namespace: str | None = None, clock: Clock = time.monotonic
    ) -> None:
        self.client = client
        self.clock = clock
        self.ledger = AvailabilityLedger()
        self._informers = [
            self._informer("v1", "pods", "Pod", namespace, self.ledger.pod_event),
            self._informer("apps/v1", "replicasets", "ReplicaSet", namespace,
                           self.ledger.replicaset_event),
            self._informer("apps/v1", "deployments", "Deployment", namespace,
                           self.ledger.deployment_event),
        ]  # fmt: skip
        self._tasks: list[asyncio.Task[None]] = []
        self._waiters: list[asyncio.Future[None]] = []

    def _informer(
        self, api_version: str, plural: str, kind: str, namespace: str | None,
        feed: Callable[[float, str, Obj], None],
    ) -> Informer:  # fmt: skip
        informer = Informer(self.client, api_version, plural, kind, namespace=namespace)

        def handle(type_: str, obj: Obj, _old: Obj | None) -> None:
            feed(self.clock(), type_, obj)
            self._notify()

        informer.add_handler(handle)
        return informer

    def _notify(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # lifecycle

    async def start(self) -> AvailabilityRecorder:
        loop = asyncio.get_running_loop()
        for informer in self._informers:
            self._tasks.append(loop.create_task(informer.run(), name=f"recorder-{informer.kind}"))
        await asyncio.gather(*(informer.synced.wait() for informer in self._informers))
        return self

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    async def __aenter__(self) -> AvailabilityRecorder:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # reading

    def timeline(self, name: str, namespace: str = "default") -> DeploymentTimeline:
        return self.ledger.timeline(namespace, name, self.clock())

    def ready(self, name: str, namespace: str = "default") -> int:
        return self.ledger.ready_counts().get((namespace, name), 0)

    def pod_departed(self, namespace: str, name: str) -> bool:
        return self.ledger.pod_departed(namespace, name)

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` holds, re-checking after every event the recorder sees.

        Bound it with `asyncio.timeout` where it might never hold.
        """
        while not predicate():
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    # marks

    def mark(self, label: str, **detail: str) -> Mark:
        mark = self.ledger.mark(self.clock(), label, **detail)
        self._notify()
        return mark

    def mark_drain_started(self, node: str, client: str) -> Mark:
        return self.mark(DRAIN_STARTED, node=node, client=client)

    def mark_drain_finished(self, result: DrainResult) -> Mark:
        return self.mark(
            DRAIN_FINISHED, node=result.node, client=result.client,
            outcome="drained" if result.drained else "failed", error=result.error or "",
        )  # fmt: skip

    def drain_window(self, node: str) -> tuple[float, float]:
        """From the last drain start on `node` to its finish (or now, while it runs)."""
        marks = [m for m in self.ledger.marks if m.detail.get("node") == node]
        starts = [m for m in marks if m.label == DRAIN_STARTED]
        if not starts:
            raise LookupError(f"no drain of {node} was marked")
        start = starts[-1].at
        ends = [m.at for m in marks if m.label == DRAIN_FINISHED and m.at >= start]
        return start, ends[0] if ends else self.clock()
