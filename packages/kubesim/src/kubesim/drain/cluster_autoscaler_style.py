"""A drain client that behaves like Cluster Autoscaler scaling a node down.

After kubernetes/autoscaler cluster-autoscaler/core/scaledown/actuation/
{actuator,drain,priority}.go and utils/taints/taints.go:

- taint the node `ToBeDeletedByClusterAutoscaler=<unix time>:NoSchedule`
  with a GET + PUT, retrying conflicts every 750 ms for up to 5 s (AddTaints),
  then Normal `ScaleDown` "marked the node as toBeDeleted/unschedulable";
- evict every pod but mirror pods concurrently (DaemonSet pods best effort),
  each with Normal `ScaleDown` "deleting pod for node scale down" and a grace
  period of min(its terminationGracePeriodSeconds, `max_graceful_termination_sec`);
  any failure is retried every `eviction_retry_time` (DefaultEvictionRetryTime,
  10 s) until `max_pod_eviction_time` (--max-pod-eviction-time, 2 min), then
  the pod fails with Warning `ScaleDownFailed`;
- wait (polling every 5 s) up to the grace period plus `pod_eviction_headroom`
  (30 s) for the pods to leave the node;
- on failure: Warning `ScaleDownFailed` "failed to drain the node: ..." and
  the taint removed again. On success the node would be deleted from the
  cloud provider; here it is left in place.

CA's own scale-down planning (which nodes, which pods block) is not modelled:
the node to drain is given.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kubesim.cluster.event_recorder import EventRecorder
from kubesim.types import Obj

from ..client import ApiStatusError, KubeClient
from . import api
from .api import pod_key, status_message, typed
from .autoscaler_rules import (
    TO_BE_DELETED_TAINT,
    eviction_grace_period,
    go_error_slice,
    pods_to_evict,
)
from .result import Clock, DrainLog, DrainResult
from .taints import has_taint_key

COMPONENT = "cluster-autoscaler"
CONFLICT_RETRY_INTERVAL = 0.75
CONFLICT_RETRY_DEADLINE = 5.0


class ClusterAutoscalerDrain:
    name = "cluster-autoscaler"

    def __init__(
        self,
        client: KubeClient,
        *,
        max_pod_eviction_time: float = 120.0,
        eviction_retry_time: float = 10.0,
        max_graceful_termination_sec: int = 600,
        pod_eviction_headroom: float = 30.0,
        wait_poll_interval: float = 5.0,
        daemonset_eviction_for_occupied_nodes: bool = True,
        cordon_node_before_terminating: bool = False,
        clock: Clock = time.monotonic,
        unix_time: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.max_pod_eviction_time = max_pod_eviction_time
        self.eviction_retry_time = eviction_retry_time
        self.max_graceful_termination_sec = max_graceful_termination_sec
        self.pod_eviction_headroom = pod_eviction_headroom
        self.wait_poll_interval = wait_poll_interval
        self.daemonset_eviction_for_occupied_nodes = daemonset_eviction_for_occupied_nodes
        self.cordon_node_before_terminating = cordon_node_before_terminating
        self.clock = clock
        self.unix_time = unix_time
        self.events = EventRecorder(client, COMPONENT)

    async def drain(self, node: str) -> DrainResult:
        return await _Run(self, node).run()


class _Run:
    def __init__(self, config: ClusterAutoscalerDrain, node: str) -> None:
        self.c = config
        self.client = config.client
        self.node_name = node
        self.log = DrainLog(config.clock)
        self.started = config.clock()
        self.evicted: list[str] = []
        self.attempts: dict[str, int] = {}
        self.rejections: dict[str, int] = {}
        self.remaining: list[str] = []

    def _result(self, error: str | None) -> DrainResult:
        return DrainResult(
            client=self.c.name, node=self.node_name, drained=error is None, error=error,
            started=self.started, finished=self.c.clock(), evicted=tuple(self.evicted),
            remaining=tuple(self.remaining), attempts=dict(self.attempts),
            rejections=dict(self.rejections), log=tuple(self.log.lines),
        )  # fmt: skip

    async def run(self) -> DrainResult:
        try:
            node = await self._mark_to_be_deleted()
        except ApiStatusError as err:
            message = status_message(err)
            self.log.log(f"Error while adding {TO_BE_DELETED_TAINT} taints on node: {message}")
            return self._result(message)
        await self.c.events.emit(
            node, "Normal", "ScaleDown", "marked the node as toBeDeleted/unschedulable"
        )
        try:
            error = await self._drain_node()
        except ApiStatusError as err:
            error = status_message(err)
        if error is None:
            self.log.log(f"All pods removed from {self.node_name}")
            return self._result(None)
        self.log.log(f"Scale-down: couldn't drain node {self.node_name}: {error}")
        await self.c.events.emit(
            node, "Warning", "ScaleDownFailed", f"failed to drain the node: {error}"
        )
        await self._clean_to_be_deleted()
        return self._result(error)

    # taints (GET + PUT with conflict retries, as AddTaints/CleanTaints)

    async def _update_node(self, change: Callable[[Obj], bool]) -> Obj:
        deadline = self.c.clock() + CONFLICT_RETRY_DEADLINE
        while True:
            node = typed(await api.get_node(self.client, self.node_name), "Node", "v1")
            if not change(node):
                return node
            try:
                return typed(await api.replace_node(self.client, node), "Node", "v1")
            except ApiStatusError as err:
                if err.code != 409 or self.c.clock() >= deadline:
                    raise
            await asyncio.sleep(CONFLICT_RETRY_INTERVAL)

    async def _mark_to_be_deleted(self) -> Obj:
        taint = {
            "key": TO_BE_DELETED_TAINT,
            "value": str(int(self.c.unix_time())),
            "effect": "NoSchedule",
        }

        def add(node: Obj) -> bool:
            if has_taint_key(node, TO_BE_DELETED_TAINT):
                return False
            spec = node.setdefault("spec", {})
            spec["taints"] = [*(spec.get("taints") or []), taint]
            if self.c.cordon_node_before_terminating:
                spec["unschedulable"] = True
            return True

        node = await self._update_node(add)
        self.log.log(f"Successfully added {TO_BE_DELETED_TAINT} on node {self.node_name}")
        return node

    async def _clean_to_be_deleted(self) -> None:
        def remove(node: Obj) -> bool:
            spec = node.setdefault("spec", {})
            taints = spec.get("taints") or []
            kept = [t for t in taints if t.get("key") != TO_BE_DELETED_TAINT]
            if len(kept) == len(taints):
                return False
            if kept:
                spec["taints"] = kept
            else:  # Go's omitempty drops an empty list from the PUT body
                spec.pop("taints", None)
            if self.c.cordon_node_before_terminating:
                spec["unschedulable"] = False
            return True

        try:
            await self._update_node(remove)
            self.log.log(f"Successfully released {TO_BE_DELETED_TAINT} on node {self.node_name}")
        except ApiStatusError as err:
            self.log.log(f"Error while releasing {TO_BE_DELETED_TAINT} taints: {err}")

    # drain (Evictor.DrainNode with the default single priority group)

    async def _drain_node(self) -> str | None:
        pods = await api.list_pods_on_node(self.client, self.node_name)
        daemon, full = pods_to_evict(pods, self.c.daemonset_eviction_for_occupied_nodes)
        max_termination = self.c.max_graceful_termination_sec
        retry_until = self.c.clock() + self.c.max_pod_eviction_time
        results = await asyncio.gather(
            *(self._evict_pod(pod, retry_until, max_termination, True) for pod in full),
            *(self._evict_pod(pod, retry_until, max_termination, False) for pod in daemon),
        )
        errors = [r for r in results[: len(full)] if r is not None]
        if errors:
            self.remaining = [pod_key(p) for p in full]
            return (
                f"Failed to drain node /{self.node_name}, due to following errors: "
                f"{go_error_slice(errors)}"
            )
        return await self._wait_pods_to_disappear(full, max_termination)

    async def _evict_pod(
        self, pod: Obj, retry_until: float, max_termination: int, full: bool
    ) -> str | None:
        key = pod_key(pod)
        await self.c.events.emit(
            typed(pod, "Pod", "v1"), "Normal", "ScaleDown", "deleting pod for node scale down"
        )
        grace = eviction_grace_period(pod, max_termination)
        last_error = ""
        while True:
            self.attempts[key] = self.attempts.get(key, 0) + 1
            try:
                await api.evict(self.client, pod, grace_period_seconds=grace)
                self.evicted.append(key)
                return None
            except ApiStatusError as err:
                if err.code == 404:
                    return None
                if err.code == 429:
                    self.rejections[key] = self.rejections.get(key, 0) + 1
                last_error = status_message(err)
            await asyncio.sleep(self.c.eviction_retry_time)
            if self.c.clock() >= retry_until:
                break
        if full:
            self.log.log(f"Failed to evict pod {pod['metadata']['name']}, error: {last_error}")
            await self.c.events.emit(
                typed(pod, "Pod", "v1"), "Warning", "ScaleDownFailed",
                "failed to delete pod for ScaleDown",
            )  # fmt: skip
        return f"failed to evict pod {key} within allowed timeout (last error: {last_error})"

    async def _wait_pods_to_disappear(self, pods: list[Obj], max_termination: int) -> str | None:
        limit = self.c.clock() + max_termination + self.c.pod_eviction_headroom
        while True:
            still = await self._still_on_node(pods)
            if not still:
                return None
            self.log.log(f"Not deleted yet {still[0]}")
            await asyncio.sleep(self.c.wait_poll_interval)
            if self.c.clock() >= limit:
                break
        self.remaining = await self._still_on_node(pods)
        return f"Failed to drain node /{self.node_name}: pods remaining after timeout"

    async def _still_on_node(self, pods: list[Obj]) -> list[str]:
        still = []
        for pod in pods:
            meta = pod["metadata"]
            current = await api.get_pod(self.client, meta["namespace"], meta["name"])
            if current is not None and current["spec"].get("nodeName") == self.node_name:
                still.append(pod_key(pod))
        return still
