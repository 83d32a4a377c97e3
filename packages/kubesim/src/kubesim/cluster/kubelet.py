"""A simulated kubelet: one per Node, acting only through the API.

- registers its Node if missing, keeps the MemoryPressure/DiskPressure/
  PIDPressure/Ready conditions (nodestatus setters, with their node events),
  renews its Lease in kube-node-lease every `heartbeat_interval`;
- runs a `PodWorker` per pod bound to it (status, conditions, container
  states, graceful termination, OOM and crash loops);
- an eviction manager (pkg/kubelet/eviction): `set_pressure` feeds it an
  observation; while a hard threshold is met it emits EvictionThresholdMet on
  the node, ranks the active pods as upstream, and evicts one pod per
  monitoring interval: a Warning `Evicted` event (annotated with the
  offending containers and starved resource), a kill with the immediate grace
  period, then phase Failed / reason Evicted / DisruptionTarget
  TerminationByKubelet once the containers are dead. The pod is not deleted.

The NoSchedule pressure taints are not the kubelet's: the node lifecycle
controller (`node_lifecycle.py`) derives them from the conditions, as upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from kubesim import jsoncodec
from kubesim.cluster.event_recorder import EventRecorder
from kubesim.cluster.pressure_eviction import (
    IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS,
    MEMORY,
    REASON,
    TERMINATION_BY_KUBELET,
    Signal,
    admission_rejection,
    eviction_message,
    is_critical,
    observed,
    rank_by_priority,
    rank_memory_pressure,
    signal_for,
    threshold_met,
)
from kubesim.lifecycle import cancel_and_wait
from kubesim.types import Obj

from ..apiserver.meta import rfc3339, rfc3339_micro
from ..client import ApiStatusError, KubeClient, resource_path
from .behaviour import memory_usage_by_container
from .containerruntime import IpPool
from .kubeletconfig import KubeletConfig
from .nodestatus import NodeShape, node_object, node_status_event, update_conditions
from .podworker import Eviction, PodWorker
from .quantity import Quantity, parse_or_zero
from .runtime import Informer

log = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-node-lease"
POD_CLEANUP_TIMEOUT = 30.0  # eviction_manager.go podCleanupTimeout

__all__ = ["Kubelet", "KubeletConfig", "NodeShape"]


@dataclass
class Pressure:
    """One eviction signal's threshold and what the node currently observes."""

    signal: Signal
    threshold: Quantity
    available: Quantity


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Kubelet:
    def __init__(
        self,
        client: KubeClient,
        node_name: str,
        config: KubeletConfig | None = None,
        shape: NodeShape | None = None,
        pods: Informer | None = None,
    ) -> None:
        self.client = client
        self.node_name = node_name
        self.config = config or KubeletConfig()
        self.shape = shape or NodeShape()
        self.recorder = EventRecorder(client, "kubelet", host=node_name)
        self._shared_pods = pods is not None
        selector = f"spec.nodeName={node_name}" if self.config.use_field_selector else None
        self.pods = pods or Informer(client, "v1", "pods", "Pod", field_selector=selector)
        self.pods.add_handler(self._on_pod)
        self.workers: dict[str, PodWorker] = {}
        self._ips = IpPool(self.config.pod_cidr)
        self._pressures: dict[str, Pressure] = {}  # by condition type
        self._condition_seen: dict[str, float] = {}  # condition -> last loop time it was met
        self._reported_pressure: set[str] = set()
        self._status_wake = asyncio.Event()
        self._eviction_wake = asyncio.Event()
        self._lease: Obj | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._event_tasks: set[asyncio.Task[None]] = set()
        self._running = False

    # lifecycle

    async def start(self) -> None:
        await self._register()
        await self.recorder.emit(self._node_ref(), "Normal", "Starting", "Starting kubelet.")
        await self._sync_node_status()
        await self._renew_lease()
        self._running = True
        if not self._shared_pods:
            await self.pods.start()
        loop = asyncio.get_running_loop()
        for name, coro in (
            ("lease", self._lease_loop()),
            ("status", self._status_loop()),
            ("eviction", self._eviction_loop()),
        ):
            self._tasks.append(loop.create_task(coro, name=f"kubelet-{self.node_name}-{name}"))
        await self.pods.synced.wait()
        for pod in self.pods.items():
            self._on_pod("ADDED", pod, None)

    async def stop(self) -> None:
        self._running = False
        await cancel_and_wait(*self._tasks, *self._event_tasks)
        self._tasks.clear()
        if not self._shared_pods:
            await self.pods.stop()
        for worker in list(self.workers.values()):
            await worker.cancel()
        self.workers.clear()

    # what pod workers use (WorkerHost)

    def allocate_ip(self, uid: str) -> str:
        return self._ips.allocate(uid)

    def release_ip(self, uid: str) -> None:
        self._ips.release(uid)

    def admission_rejection(self, pod: Obj) -> str | None:
        return admission_rejection(sorted(self._reported_pressure, key=_condition_order), pod)

    def emit_later(
        self, obj: Obj, type_: str, reason: str, message: str, field_path: str = ""
    ) -> None:
        """Record an event without holding up the caller (the real recorder is asynchronous)."""
        task = asyncio.get_running_loop().create_task(
            self.recorder.emit(obj, type_, reason, message, field_path=field_path)
        )
        self._event_tasks.add(task)
        task.add_done_callback(self._event_tasks.discard)

    # pods

    def _on_pod(self, type_: str, pod: Obj, old: Obj | None) -> None:
        if not self._running or (pod.get("spec") or {}).get("nodeName") != self.node_name:
            return
        uid = pod["metadata"].get("uid", "")
        if type_ == "DELETED":
            worker = self.workers.pop(uid, None)
            if worker is not None:
                self._spawn(worker.cancel())
            return
        # The worker only reads its pod (its writes send new bodies): the informer's object is
        # shared, not copied, on each of the pod's events.
        worker = self.workers.get(uid)
        if worker is None:
            worker = self.workers[uid] = PodWorker(self, pod)
            worker.start()
        else:
            worker.update(pod)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._event_tasks.add(task)
        task.add_done_callback(self._event_tasks.discard)

    # node registration and status

    def _node_ref(self) -> Obj:
        # The kubelet's nodeRef: kind Node, the node name as UID, no namespace.
        return {"kind": "Node", "metadata": {"name": self.node_name, "uid": self.node_name}}

    def _node_path(self, sub: str | None = None) -> str:
        return resource_path("v1", "nodes", None, self.node_name, sub)

    async def _register(self) -> None:
        try:
            await self.client.get(self._node_path())
            return
        except ApiStatusError as err:
            if err.code != 404:
                raise
        node = node_object(self.node_name, self.shape, self.config.host_ip, self.config.pod_cidr)
        try:
            await self.client.create(resource_path("v1", "nodes"), node)
        except ApiStatusError as err:
            if err.code != 409:
                raise

    async def _sync_node_status(self) -> None:
        """Run the condition setters and write nodes/status; record the setters' events."""
        for _ in range(10):
            node = await self.client.get(self._node_path())
            status = node.setdefault("status", {})
            conditions, events = update_conditions(
                status.get("conditions") or [], self._reported_pressure, rfc3339(_now())
            )
            status["conditions"] = conditions
            try:
                await self.client.replace(self._node_path("status"), node)
            except ApiStatusError as err:
                if err.code != 409:
                    raise
                continue
            for reason in events:
                await self.recorder.emit(
                    self._node_ref(), "Normal", reason, node_status_event(self.node_name, reason)
                )
            return

    async def _status_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._status_wake.wait(), self.config.node_status_report_interval
                )
            self._status_wake.clear()
            try:
                await self._sync_node_status()
            except Exception as err:  # a failed sync is retried at the next tick
                log.warning("kubelet %s: node status: %s", self.node_name, err)

    # lease

    async def _renew_lease(self) -> None:
        path = resource_path("coordination.k8s.io/v1", "leases", LEASE_NAMESPACE, self.node_name)
        renew = rfc3339_micro(_now())
        for _ in range(5):
            if self._lease is None:
                try:
                    self._lease = await self.client.get(path)
                except ApiStatusError as err:
                    if err.code != 404:
                        raise
                    self._lease = await self._create_lease(renew)
                    return
            lease = jsoncodec.copy(self._lease)
            lease.setdefault("spec", {}).update(
                holderIdentity=self.node_name,
                leaseDurationSeconds=self.config.lease_duration_seconds,
                renewTime=renew,
            )
            try:
                self._lease = await self.client.replace(path, lease)
                return
            except ApiStatusError as err:
                if err.code not in (404, 409):
                    raise
                self._lease = None

    async def _create_lease(self, renew: str) -> Obj:
        node = await self.client.get(self._node_path())
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.node_name,
                "namespace": LEASE_NAMESPACE,
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "name": self.node_name,
                        "uid": node["metadata"].get("uid", ""),
                    }
                ],
            },
            "spec": {
                "holderIdentity": self.node_name,
                "leaseDurationSeconds": self.config.lease_duration_seconds,
                "renewTime": renew,
            },
        }
        return await self.client.create(
            resource_path("coordination.k8s.io/v1", "leases", LEASE_NAMESPACE), lease
        )

    async def _lease_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_interval)
            try:
                await self._renew_lease()
            except Exception as err:  # a failed renewal is retried at the next tick
                log.warning("kubelet %s: lease: %s", self.node_name, err)

    # eviction manager

    async def set_pressure(
        self, resource: str = "memory", available: str = "87Mi", threshold: str = "100Mi"
    ) -> None:
        """Observe `available` of a resource against a hard eviction threshold.

        `resource` is memory, ephemeral-storage (disk) or pids. Returns once the
        node condition is written; evictions follow in the eviction loop.
        """
        signal = signal_for(resource)
        self._pressures[signal.condition] = Pressure(
            signal, parse_or_zero(threshold), observed(signal, available)
        )
        await self._synchronize_conditions()
        self._eviction_wake.set()

    async def clear_pressure(self, resource: str = "memory") -> None:
        """The pressure is gone: drop the observation and the condition at once.

        (The real kubelet keeps the condition for evictionPressureTransitionPeriod;
        this is the simulator's knob to end it now.)
        """
        signal = signal_for(resource)
        self._pressures.pop(signal.condition, None)
        self._condition_seen.pop(signal.condition, None)
        await self._synchronize_conditions()

    def _met(self) -> list[Pressure]:
        met = [p for p in self._pressures.values() if threshold_met(p.threshold, p.available)]
        return sorted(met, key=lambda p: p.signal is not MEMORY)  # byEvictionPriority

    async def _synchronize_conditions(self) -> None:
        now = asyncio.get_running_loop().time()
        for pressure in self._met():
            self._condition_seen[pressure.signal.condition] = now
        current = {
            condition
            for condition, seen in self._condition_seen.items()
            if now - seen < self.config.pressure_transition_period
            or any(p.signal.condition == condition for p in self._met())
        }
        if current != self._reported_pressure:
            self._reported_pressure = current
            await self._sync_node_status()

    async def _eviction_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._eviction_wake.wait(), self.config.eviction_monitoring_interval
                )
            self._eviction_wake.clear()
            try:
                victim = await self._synchronize()
            except Exception as err:  # retried at the next monitoring interval
                log.warning("kubelet %s: eviction: %s", self.node_name, err)
                continue
            if victim is not None:  # waitForPodsCleanup
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(victim.terminated.wait(), POD_CLEANUP_TIMEOUT)

    async def _synchronize(self) -> PodWorker | None:
        """One `managerImpl.synchronize`: conditions, then at most one eviction."""
        await self._synchronize_conditions()
        met = self._met()
        if not met:
            return None
        pressure = met[0]
        signal = pressure.signal
        await self.recorder.emit(
            self._node_ref(),
            "Warning",
            "EvictionThresholdMet",
            f"Attempting to reclaim {signal.resource}",
        )
        candidates = [w for w in self.workers.values() if w.active]
        pods = [w.pod for w in candidates]
        by_uid = {w.uid: w for w in candidates}
        ranked = (
            rank_memory_pressure(pods, self._usage) if signal is MEMORY else rank_by_priority(pods)
        )
        for pod in ranked:
            if is_critical(pod):
                continue
            worker = by_uid[pod["metadata"].get("uid", "")]
            await self._evict(worker, pressure)
            return worker
        return None

    def _usage(self, pod: Obj) -> dict[str, int]:
        return {
            name: parse_or_zero(value).value()
            for name, value in memory_usage_by_container(pod).items()
        }

    async def _evict(self, worker: PodWorker, pressure: Pressure) -> None:
        """`evictPod`: the annotated Warning event first, then the kill."""
        pod = worker.pod
        usage = self._usage(pod)
        message, annotations = eviction_message(
            pressure.signal, pod, usage, pressure.threshold, pressure.available
        )
        await self.recorder.emit(pod, "Warning", REASON, message, annotations=annotations)
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": TERMINATION_BY_KUBELET,
            "message": message,
        }
        worker.evict(Eviction(REASON, message, condition), IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS)
        if pressure.signal is MEMORY:
            # The simulated node gets the victim's working set back.
            freed = Quantity.from_int(sum(usage.values()), pressure.available.format)
            pressure.available = pressure.available + freed


def _condition_order(condition: str) -> int:
    return ("MemoryPressure", "DiskPressure", "PIDPressure").index(condition)
