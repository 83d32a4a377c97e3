"""The fault suite's harness: one protected pod drained while a fault is injected.

Each row installs the shipped manifests on kubesim (tests/e2e/controller/drain_cluster.py),
runs the controller replicas in process under the shipped RBAC, creates `web` (one replica,
surge-able, Ready one second after start), cordons its node and evicts its pod through the
API server every RETRY_SECONDS, as `kubectl drain` does, while the row injects its fault.
kubesim calls the webhook over TLS with the published caBundle, so an eviction the webhook
cannot answer is admitted (failurePolicy: Ignore) exactly as on a real cluster.

What a row measures:
- wrongly allowed: evictions the API server admitted while `web` had no other Ready pod
  (counted from the answers), split into those during the fault or its recovery window,
  and those after recovery (always 0: asserted by every row);
- recovery: seconds from the end of the fault until its own recovery condition (the
  controller caught up), reported, and bounded by the row's bound (a bounded wait: the test
  fails when it is exceeded; nothing asserts on time otherwise);
- survived: every running replica answers /readyz 200 at the end.
The drain must end (the pod evicted once the surge pod is Ready) within DRAIN_BOUND, far below
the 10 min rolloutTimeout: no drain is held beyond it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from kubesim.client import ApiStatusError, KubeClient, resource_path
from tests.e2e.controller.drain_cluster import DrainCluster
from tests.e2e.controller.installed import WORKLOADS
from tests.e2e.controller.replica import Replica

RETRY_SECONDS = 0.2  # kubectl drain retries every 5 s; faster here finds more windows
DRAIN_BOUND = 60.0
READY_DELAY = "1s"
DONE_OR_HELD = (201, 404, 429)  # the surge pod's readiness: long enough for a fault to matter


@dataclass
class FaultRow:
    fault: str
    survived: bool
    wrongly_allowed_during: int
    wrongly_allowed_after: int
    recovery_seconds: float | None
    bound_seconds: float | None
    note: str = ""

    def cells(self) -> list[str]:
        recovery = "—" if self.recovery_seconds is None else f"{self.recovery_seconds:.2f}"
        bound = "—" if self.bound_seconds is None else f"≤ {self.bound_seconds:g}"
        wrong = f"{self.wrongly_allowed_during} during / {self.wrongly_allowed_after} after"
        return [self.fault, "yes" if self.survived else "NO", wrong, recovery, bound, self.note]


ROWS: list[FaultRow] = []
HEADER = ["fault", "survived", "evictions wrongly allowed", "recovery s", "bound s", "note"]


def table(rows: list[FaultRow]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return "\n".join(lines)


@dataclass
class Answer:
    at: float
    code: int
    ready_before: int
    fault_on: bool
    webhook_allowed_rightly: bool  # a replica answered "allow" for a reason that is right


# Reasons an eviction of the protected pod is rightly allowed: the surge pod is Ready, or the
# pod is already gone or terminating (the rollout replaced it).
RIGHT_ALLOWS = ("surge-ready", "pod-gone", "pod-terminating")


@dataclass
class ProtectedDrain:
    """Evicts one pod until the API server admits it, recording every answer."""

    admin: KubeClient
    pod: str
    replicas: list[Replica]
    # Right allows counted elsewhere (controller processes: their /metrics).
    more_right_allows: Callable[[], Awaitable[float]] | None = None
    fault_on: bool = False
    done: bool = False
    answers: list[Answer] = field(default_factory=list)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def run(self) -> None:
        while True:
            deployment = await self.admin.get(resource_path("apps/v1", "deployments",
                                                            WORKLOADS, "web"))  # fmt: skip
            ready = int((deployment.get("status") or {}).get("readyReplicas") or 0)
            rightly = await self._right_allows()
            code = await evict(self.admin, self.pod)
            answer = Answer(time.monotonic(), code, ready, self.fault_on,
                            await self._right_allows() > rightly)  # fmt: skip
            async with self._changed:
                self.answers.append(answer)
                self._changed.notify_all()
            if code in (201, 404):  # evicted, or already replaced by the rollout
                async with self._changed:
                    self.done = True
                    self._changed.notify_all()
                return
            await asyncio.sleep(RETRY_SECONDS)  # the drain client's retry interval

    async def _right_allows(self) -> float:
        more = 0.0 if self.more_right_allows is None else await self.more_right_allows()
        return more + sum(
            r.decisions(reason, True) for r in self.replicas for reason in RIGHT_ALLOWS
        )

    def wrongly_allowed(self, *, during: bool) -> int:
        """Admitted while `web` had no other Ready pod, and not by a replica's right answer
        (the surge pod may turn Ready between the status read and the eviction)."""
        return sum(
            1
            for a in self.answers
            if a.code == 201
            and a.ready_before < 2
            and not a.webhook_allowed_rightly
            and a.fault_on == during
        )

    async def until(self, predicate: Callable[[list[Answer]], bool]) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: predicate(self.answers))

    async def until_held_after(self, moment: float) -> float:
        """Until the webhook refuses an eviction sent after `moment` (or the drain ended)."""
        await self.until(lambda answers: self.done or any(
            a.at >= moment and a.code in DONE_OR_HELD for a in answers
        ))  # fmt: skip
        later = [a.at for a in self.answers if a.at >= moment and a.code in DONE_OR_HELD]
        return later[0] if later else moment


async def evict(admin: KubeClient, name: str) -> int:
    body = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name, "namespace": WORKLOADS}}  # fmt: skip
    try:
        await admin.create(resource_path("v1", "pods", WORKLOADS, name, "eviction"), body)
    except ApiStatusError as error:
        return error.code
    return 201


async def readyz(replica: Replica) -> int:
    url = f"http://127.0.0.1:{replica.app.health_site.port}/readyz"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status


@dataclass
class Context:
    cluster: DrainCluster
    replicas: list[Replica]
    drain: ProtectedDrain
    state: dict[str, Any] = field(default_factory=dict)


Step = Callable[[Context], Awaitable[None]]


@dataclass
class Fault:
    name: str
    inject: Step  # the fault begins (and, for an instantaneous fault, ends)
    lift: Step | None = None  # the fault ends; None: it ended with inject
    recovered: Step | None = None  # waits until the controller caught up
    bound: float | None = None  # the docs' recovery bound, in seconds
    before_drain: bool = False  # inject before the first eviction (else once it is held)
    replicas: int = 1
    app_options: dict[str, Any] = field(default_factory=dict)
    note: str = ""


async def run_fault(cluster: DrainCluster, fault: Fault) -> FaultRow:
    replicas = [
        await cluster.start_replica(
            f"graceful-drain-{i}", route=i == 0, app_options=fault.app_options
        )
        for i in range(fault.replicas)
    ]
    await cluster.create_web(ready_delay=READY_DELAY)
    [pod] = await cluster.pods("web")
    node = pod["spec"]["nodeName"]
    await cluster.admin.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}})
    drain = ProtectedDrain(cluster.admin, pod["metadata"]["name"], cluster.replicas)
    context = Context(cluster, replicas, drain)
    task: asyncio.Task[None] | None = None
    try:
        if fault.before_drain:
            drain.fault_on = True
            await fault.inject(context)
            task = asyncio.create_task(drain.run())
        else:
            task = asyncio.create_task(drain.run())
            async with asyncio.timeout(DRAIN_BOUND):
                await drain.until(lambda answers: bool(answers))
            drain.fault_on = True
            await fault.inject(context)
        if fault.lift is not None:
            await fault.lift(context)
        ended = time.monotonic()
        recovery = None
        if fault.recovered is not None:
            async with asyncio.timeout(fault.bound):
                await fault.recovered(context)
            recovery = time.monotonic() - ended
        drain.fault_on = False  # "during" covers the fault and its recovery window
        async with asyncio.timeout(DRAIN_BOUND):
            await task
        survived = all([await readyz(r) == 200 for r in context.replicas if r.running])
    finally:
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    row = FaultRow(
        fault.name,
        survived,
        drain.wrongly_allowed(during=True),
        drain.wrongly_allowed(during=False),
        recovery,
        fault.bound,
        fault.note,
    )
    ROWS.append(row)
    return row
