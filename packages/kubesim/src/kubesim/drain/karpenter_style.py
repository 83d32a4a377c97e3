"""A drain client that behaves like Karpenter's node termination.

After kubernetes-sigs/karpenter pkg/controllers/node/termination/controller.go
and terminator/{terminator,eviction,events}.go:

- taint the node `karpenter.sh/disrupted:NoSchedule` (replacing any other
  taint with that key) and label it
  `node.kubernetes.io/exclude-from-external-load-balancers=karpenter`, with a
  strategic merge patch (Terminator.Taint);
- every `requeue_interval` (the controller's 1 s requeue on a drain error),
  list the node's pods; with a `termination_grace_period`, DELETE each pod
  whose own grace period no longer fits before the node's expiry, with the
  remaining seconds as grace period — a DELETE, so neither PDBs nor an
  eviction webhook are consulted (DeleteExpiringPods, Normal `Disrupted`);
- queue the first non-empty priority group of evictable pods; each queued pod
  is evicted with a UID precondition and retried on failure with client-go's
  exponential back-off from `eviction_base_delay` (100 ms) to
  `eviction_max_delay` (10 s) (eviction.go's evictionQueueBaseDelay/MaxDelay);
  404 and 409 end it quietly, a 429 records Warning `FailedDraining`,
  success Normal `Evicted`;
- done when no pod is waiting for eviction; until then Warning
  `FailedDraining` "N pods are waiting to be evicted" on the node;
- every event goes through Karpenter's recorder (pkg/events/recorder.go), which
  drops one whose reason and dedupe values (the node's or the pod's name)
  it published within `dedupe_timeout` (2 minutes): a pod refused a hundred
  times gets one `FailedDraining`, not a hundred.

Without a `termination_grace_period` a blocked pod stalls the drain forever,
as it does in Karpenter: callers bound `drain()` themselves. The node object
and its instance are left in place (no finalizer, no cloud provider).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable

from kubesim.backoff import Backoff
from kubesim.cluster.event_recorder import EventRecorder
from kubesim.lifecycle import cancel_and_wait
from kubesim.types import Obj

from ..apiserver.meta import rfc3339
from ..client import ApiStatusError, KubeClient
from . import api
from .api import pod_key, status_message, typed
from .karpenter_rules import (
    DISRUPTED_TAINT,
    EXCLUDE_BALANCERS_LABEL,
    first_eviction_group,
    is_evictable,
    is_terminating,
    pod_delete_time,
    pods_waiting,
)
from .result import Clock, DrainLog, DrainResult
from .taints import with_taint_replacing_key

COMPONENT = "karpenter"


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class KarpenterDrain:
    name = "karpenter"

    def __init__(
        self,
        client: KubeClient,
        *,
        termination_grace_period: float | None = None,
        eviction_base_delay: float = 0.1,
        eviction_max_delay: float = 10.0,
        requeue_interval: float = 1.0,
        dedupe_timeout: float = 120.0,
        clock: Clock = time.monotonic,
        wall_clock: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        self.client = client
        self.termination_grace_period = termination_grace_period
        self.eviction_base_delay = eviction_base_delay
        self.eviction_max_delay = eviction_max_delay
        self.requeue_interval = requeue_interval
        self.dedupe_timeout = dedupe_timeout
        self.clock = clock
        self.wall_clock = wall_clock
        self.events = EventRecorder(client, COMPONENT)
        self._published: dict[str, float] = {}  # dedupe key -> when it may be published again

    async def publish(self, obj: Obj, type_: str, reason: str, message: str, dedupe: str) -> None:
        """recorder.publishEvent: the event, unless its reason with `dedupe` (the value its
        DedupeValues hold) was published less than `dedupe_timeout` ago."""
        key = f"{reason.lower()}-{dedupe}"
        now = self.clock()
        if self._published.get(key, now) > now:
            return
        self._published[key] = now + self.dedupe_timeout
        await self.events.emit(obj, type_, reason, message)

    async def drain(self, node: str) -> DrainResult:
        run = _Run(self, node)
        try:
            return await run.run()
        finally:
            await run.stop_workers()


class _Run:
    def __init__(self, config: KarpenterDrain, node: str) -> None:
        self.c = config
        self.client = config.client
        self.node_name = node
        self.log = DrainLog(config.clock)
        self.started = config.clock()
        tgp = config.termination_grace_period
        self.expiration = None if tgp is None else self.started + tgp
        self.evicted: list[str] = []
        self.deleted: list[str] = []
        self.attempts: dict[str, int] = {}
        self.rejections: dict[str, int] = {}
        self.queued: set[tuple[str, str]] = set()  # (pod key, uid), as the eviction queue's set
        self.workers: list[asyncio.Task[None]] = []

    def _result(self, error: str | None, remaining: list[str]) -> DrainResult:
        return DrainResult(
            client=self.c.name, node=self.node_name, drained=error is None, error=error,
            started=self.started, finished=self.c.clock(), evicted=tuple(self.evicted),
            deleted=tuple(self.deleted), remaining=tuple(remaining),
            attempts=dict(self.attempts), rejections=dict(self.rejections),
            log=tuple(self.log.lines),
        )  # fmt: skip

    async def stop_workers(self) -> None:
        await cancel_and_wait(*self.workers)

    async def run(self) -> DrainResult:
        try:
            node = await self._taint()
        except ApiStatusError as err:
            message = f"tainting node, {status_message(err)}"
            self.log.log(f"ERROR {message}")
            return self._result(message, [])
        if self.expiration is not None:
            by = self.c.wall_clock() + dt.timedelta(seconds=self.expiration - self.started)
            await self.c.publish(
                node, "Warning", "TerminationGracePeriodExpiring",
                f"All pods will be deleted by {rfc3339(by)}", self.node_name,
            )  # fmt: skip
        while True:
            try:
                pods = await api.list_pods_on_node(self.client, self.node_name)
                await self._delete_expiring(pods)
            except ApiStatusError as err:
                self.log.log(f"ERROR draining node, {status_message(err)}")
                await asyncio.sleep(self.c.requeue_interval)
                continue
            for pod in first_eviction_group(p for p in pods if is_evictable(p)):
                self._queue(pod)
            waiting = pods_waiting(pods, self.c.wall_clock())
            if not waiting:
                self.log.log(f"drained node {self.node_name}")
                return self._result(None, [])
            # Upstream counts every pod listed on the node in this message, not only the waiting.
            await self.c.publish(
                node, "Warning", "FailedDraining",
                f"Failed to drain node, {len(pods)} pods are waiting to be evicted",
                self.node_name,
            )  # fmt: skip
            await asyncio.sleep(self.c.requeue_interval)

    async def _taint(self) -> Obj:
        node = typed(await api.get_node(self.client, self.node_name), "Node", "v1")
        spec = node.get("spec") or {}
        labels = node["metadata"].get("labels") or {}
        taints = with_taint_replacing_key(spec.get("taints") or [], dict(DISRUPTED_TAINT))
        patch: Obj = {}
        if taints != (spec.get("taints") or []):
            patch["spec"] = {"taints": taints}
        if labels.get(EXCLUDE_BALANCERS_LABEL) != "karpenter":
            patch["metadata"] = {"labels": {EXCLUDE_BALANCERS_LABEL: "karpenter"}}
        if patch:
            node = typed(await api.patch_node(self.client, self.node_name, patch), "Node", "v1")
            self.log.log(
                f"tainted node taint.Key={DISRUPTED_TAINT['key']} "
                f"taint.Effect={DISRUPTED_TAINT['effect']} taint.Value="
            )
        return node

    async def _delete_expiring(self, pods: list[Obj]) -> None:
        if self.expiration is None:
            return
        now_wall = self.c.wall_clock()
        for pod in pods_waiting(pods, now_wall):
            if is_terminating(pod):
                continue
            delete_at = pod_delete_time(self.expiration, pod)
            now = self.c.clock()
            if delete_at is None or now <= delete_at:
                continue
            # int64(time.Until(expiry).Seconds()) truncates; an expired node gives 0, not less.
            grace = max(int(self.expiration - now), 0)
            own = pod["spec"].get("terminationGracePeriodSeconds")
            expiry = now_wall + dt.timedelta(seconds=self.expiration - now)
            await self.c.publish(
                typed(pod, "Pod", "v1"), "Normal", "Disrupted",
                f"Deleting the pod to accommodate the terminationTime {rfc3339(expiry)} of the "
                f"node. The pod was granted {grace} seconds of grace-period of its {own} "
                "terminationGracePeriodSeconds. This bypasses the PDB of the pod and the "
                "do-not-disrupt annotation.", pod["metadata"]["name"],
            )  # fmt: skip
            try:
                await api.delete_pod(self.client, pod, grace)
            except ApiStatusError as err:
                if err.code != 404:
                    raise
                continue
            self.deleted.append(pod_key(pod))
            self.log.log(
                f"deleting pod namespace={pod['metadata']['namespace']} "
                f"name={pod['metadata']['name']} pod.terminationGracePeriodSeconds={own} "
                f"delete.gracePeriodSeconds={grace}"
            )

    # the eviction queue

    def _queue(self, pod: Obj) -> None:
        entry = (pod_key(pod), str(pod["metadata"].get("uid", "")))
        if entry in self.queued:
            return
        self.queued.add(entry)
        task = asyncio.get_running_loop().create_task(self._evict_until_done(pod, entry))
        self.workers.append(task)

    async def _evict_until_done(self, pod: Obj, entry: tuple[str, str]) -> None:
        # client-go's ItemExponentialFailureRateLimiter: base * 2^(failures-1), at most max.
        backoff = Backoff(self.c.eviction_base_delay, self.c.eviction_max_delay)
        while not await self._evict(pod):  # noqa: ASYNC110 - a back-off between tries, not a poll
            await asyncio.sleep(backoff.next_delay())
        self.queued.discard(entry)

    async def _evict(self, pod: Obj) -> bool:
        """Queue.Evict: True when the pod is done with (evicted, gone or replaced)."""
        key = pod_key(pod)
        meta = pod["metadata"]
        self.attempts[key] = self.attempts.get(key, 0) + 1
        try:
            await api.evict(self.client, pod, uid_precondition=meta.get("uid"))
        except ApiStatusError as err:
            if err.code in (404, 409):
                return True
            if err.code == 429:
                self.rejections[key] = self.rejections.get(key, 0) + 1
                # Upstream publishes this on a Node object named after the pod.
                fake_node = {
                    "kind": "Node",
                    "apiVersion": "v1",
                    "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
                }
                await self.c.publish(
                    fake_node, "Warning", "FailedDraining",
                    f"Failed to drain node, evicting pod {key} violates a PDB", meta["name"],
                )  # fmt: skip
                return False
            self.log.log(f"ERROR failed evicting pod Pod={key} error={status_message(err)}")
            return False
        self.evicted.append(key)
        self.log.log(f"evicted pod Pod={key}")
        await self.c.publish(typed(pod, "Pod", "v1"), "Normal", "Evicted", "Evicted pod",
                             meta["name"])  # fmt: skip
        return True
