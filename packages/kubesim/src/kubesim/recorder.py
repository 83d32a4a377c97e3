"""An availability recorder: per-Deployment Ready-pod timelines from watch events.

    async with AvailabilityRecorder(client) as recorder:
        recorder.mark_drain_started("node-a", "kubectl")
        result = await KubectlDrain(client).drain("node-a")
        recorder.mark_drain_finished(result)
        web = recorder.timeline("web")
        web.zero_ready_seconds(*recorder.drain_window("node-a"))

It follows pods, ReplicaSets and Deployments with a `WatchLog` (kubesim's one
watch-to-timeline helper: informers, events stamped with an injected monotonic
clock) and feeds an `AvailabilityLedger` from it. `wait_until` lets tests wait
for what the recorder has seen without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kubesim.lifecycle import Lifecycle

from .availability import AvailabilityLedger, DeploymentTimeline, Mark
from .client import KubeClient, resource_path
from .drain.result import Clock, DrainResult
from .types import Obj
from .watchlog import WatchLog

DRAIN_STARTED = "drain-started"
DRAIN_FINISHED = "drain-finished"


class AvailabilityRecorder(Lifecycle):
    def __init__(
        self, client: KubeClient, *, namespace: str | None = None, clock: Clock = time.monotonic
    ) -> None:
        self.client = client
        self.clock = clock
        self.ledger = AvailabilityLedger()
        feeds: dict[str, Callable[[float, str, Obj], None]] = {
            resource_path("v1", "pods", namespace): self.ledger.pod_event,
            resource_path("apps/v1", "replicasets", namespace): self.ledger.replicaset_event,
            resource_path("apps/v1", "deployments", namespace): self.ledger.deployment_event,
        }
        # The ledger keeps what it needs; the log keeping every event too would make a long
        # recording hold every version of every pod (and the garbage collector walk them).
        self.log = WatchLog(client, list(feeds), clock=clock, keep=False)
        self.log.add_listener(lambda path, type_, obj, at: feeds[path](at, type_, obj))

    # lifecycle

    async def start(self) -> AvailabilityRecorder:
        await self.log.start()
        return self

    async def stop(self) -> None:
        await self.log.stop()

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
        await self.log.wait_until(predicate)

    # marks

    def mark(self, label: str, **detail: str) -> Mark:
        mark = self.ledger.mark(self.clock(), label, **detail)
        self.log.notify()
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
