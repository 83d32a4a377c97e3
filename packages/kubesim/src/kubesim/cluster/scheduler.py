"""The default scheduler: binds pending pods through `pods/binding`, preempts, reports failures.

Acts only through the API, like kube-scheduler (pkg/scheduler/schedule_one.go):
- success: POST a v1 Binding, then a Normal `Scheduled` event
  ("Successfully assigned ns/pod to node");
- failure: a Warning `FailedScheduling` event, then the PodScheduled=False
  condition (reason Unschedulable) with the `FitError` message, and
  status.nominatedNodeName when preemption picked a node;
- preemption (default_preemption): each victim gets DisruptionTarget
  (PreemptionByScheduler), is deleted with its own grace period, and gets a
  Normal `Preempted` event ("Preempted by pod <uid> on node <node>").

Pods are tried highest priority first (PrioritySort). An unschedulable pod is
retried when the cluster changes in a way that could make it fit (a node's
taints, labels, allocatable or cordon, a pod leaving), never by polling.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from kubesim import jsoncodec
from kubesim.cluster.event_recorder import EventRecorder
from kubesim.lifecycle import cancel_and_wait
from kubesim.types import Obj

from ..apiserver.meta import rfc3339
from ..client import ApiStatusError, KubeClient, resource_path
from .preemption import PREEMPTION_BY_SCHEDULER, Candidate, find_candidate
from .runtime import Informer
from .scheduling import (
    ERR_NO_NODES,
    FilterFailure,
    filter_node,
    fit_error_message,
    is_terminal,
    pod_priority,
    score_nodes,
    select_host,
)

log = logging.getLogger(__name__)

DEFAULT_SCHEDULER = "default-scheduler"


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    scheduler_name: str = DEFAULT_SCHEDULER
    preemption: bool = True


def now_rfc3339() -> str:
    return rfc3339(dt.datetime.now(dt.UTC))


def set_condition(status: Obj, condition: Obj) -> bool:
    """`podutil.UpdatePodCondition`: replace or append, keeping lastTransitionTime if the status
    is unchanged.

    Returns whether anything changed.
    """
    conditions = status.setdefault("conditions", [])
    new = {
        "type": condition["type"],
        "status": condition["status"],
        "lastProbeTime": None,
        "lastTransitionTime": now_rfc3339(),
    }
    for key in ("reason", "message"):
        if condition.get(key):
            new[key] = condition[key]
    for i, old in enumerate(conditions):
        if old.get("type") != condition["type"]:
            continue
        if old.get("status") == new["status"]:
            new["lastTransitionTime"] = old.get("lastTransitionTime")
        if all(old.get(k) == new.get(k) for k in ("status", "reason", "message")):
            return False
        conditions[i] = new
        return True
    conditions.append(new)
    return True


def _sort_key(pod: Obj) -> tuple[int, str, str, str]:
    meta = pod["metadata"]
    return (
        -pod_priority(pod),
        meta.get("creationTimestamp", ""),
        meta.get("namespace", ""),
        meta["name"],
    )


def _relevant_node_view(node: Obj) -> tuple[Any, ...]:
    spec, status = node.get("spec") or {}, node.get("status") or {}
    return (
        spec.get("unschedulable"),
        spec.get("taints"),
        node["metadata"].get("labels"),
        status.get("allocatable"),
    )


class Scheduler:
    def __init__(self, client: KubeClient, config: SchedulerConfig | None = None) -> None:
        self.client = client
        self.config = config or SchedulerConfig()
        self.recorder = EventRecorder(client, self.config.scheduler_name)
        self.pods = Informer(client, "v1", "pods", "Pod")
        self.nodes = Informer(client, "v1", "nodes", "Node")
        self.pods.add_handler(self._on_pod)
        self.nodes.add_handler(self._on_node)
        self._wake = asyncio.Event()
        # Bumped by every change that could make an unschedulable pod fit.
        self._generation = 0
        self._failed_at: dict[str, int] = {}  # pod uid -> generation of its last failed attempt
        self._assumed: dict[str, tuple[str, Obj]] = {}  # pod uid -> (node, pod), bound not yet seen
        self._tasks: list[asyncio.Task[None]] = []

    # lifecycle

    async def start(self) -> None:
        await asyncio.gather(self.pods.start(), self.nodes.start())
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._loop(), name="scheduler"))
        self._wake.set()

    async def stop(self) -> None:
        await cancel_and_wait(*self._tasks)
        self._tasks.clear()
        await asyncio.gather(self.pods.stop(), self.nodes.stop())

    # watch handlers (synchronous: they only mark work)

    def _responsible_for(self, pod: Obj) -> bool:
        spec = pod.get("spec") or {}
        return (
            spec.get("schedulerName", DEFAULT_SCHEDULER) == self.config.scheduler_name
            and not spec.get("nodeName")
            and not pod["metadata"].get("deletionTimestamp")
            and not is_terminal(pod)
        )

    def _on_pod(self, type_: str, pod: Obj, old: Obj | None) -> None:
        uid = pod["metadata"].get("uid", "")
        if type_ == "DELETED":
            self._assumed.pop(uid, None)
            self._failed_at.pop(uid, None)
            if (pod.get("spec") or {}).get("nodeName"):
                self._bump()
            return
        spec = pod.get("spec") or {}
        if spec.get("nodeName"):
            self._assumed.pop(uid, None)
            self._failed_at.pop(uid, None)
            if old is not None and is_terminal(pod) and not is_terminal(old):
                self._bump()
            return
        if self._responsible_for(pod):
            labels = pod["metadata"].get("labels")
            if old is not None and (
                old.get("spec") != pod.get("spec") or old["metadata"].get("labels") != labels
            ):
                self._failed_at.pop(uid, None)
            self._wake.set()

    def _on_node(self, type_: str, node: Obj, old: Obj | None) -> None:
        if (
            type_ != "MODIFIED"
            or old is None
            or _relevant_node_view(old) != _relevant_node_view(node)
        ):
            self._bump()

    def _bump(self) -> None:
        self._generation += 1
        self._wake.set()

    # the scheduling loop

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            for pod in sorted(self._pending(), key=_sort_key):
                try:
                    await self._schedule_one(pod)
                except asyncio.CancelledError:
                    raise
                except Exception as err:  # keep scheduling the others; retry this one later
                    meta = pod["metadata"]
                    log.warning("scheduler: %s/%s: %s", meta.get("namespace"), meta["name"], err)
                    self._failed_at[meta.get("uid", "")] = self._generation

    def _pending(self) -> list[Obj]:
        out = []
        for pod in self.pods.items():
            uid = pod["metadata"].get("uid", "")
            if not self._responsible_for(pod) or uid in self._assumed:
                continue
            failed = self._failed_at.get(uid)
            if failed is not None and failed >= self._generation:
                continue
            out.append(pod)
        return out

    def _cluster_view(self) -> tuple[dict[str, Obj], dict[str, list[Obj]]]:
        nodes = {n["metadata"]["name"]: n for n in self.nodes.items()}
        pods_by_node: dict[str, list[Obj]] = {name: [] for name in nodes}
        assigned: set[str] = set()
        for pod in self.pods.items():
            node = (pod.get("spec") or {}).get("nodeName")
            if node and not is_terminal(pod):
                pods_by_node.setdefault(node, []).append(pod)
                assigned.add(pod["metadata"].get("uid", ""))
        for uid, (node, pod) in self._assumed.items():
            if uid not in assigned:
                pods_by_node.setdefault(node, []).append(pod)
        return nodes, pods_by_node

    def _nominated(self, pod: Obj) -> dict[str, list[Obj]]:
        """Pending pods of equal or higher priority nominated to each node (not `pod` itself)."""
        uid, priority = pod["metadata"].get("uid"), pod_priority(pod)
        out: dict[str, list[Obj]] = {}
        for other in self.pods.items():
            node = (other.get("status") or {}).get("nominatedNodeName")
            if (
                node
                and other["metadata"].get("uid") != uid
                and self._responsible_for(other)
                and pod_priority(other) >= priority
            ):
                out.setdefault(node, []).append(other)
        return out

    async def _schedule_one(self, pod: Obj) -> None:
        nodes, pods_by_node = self._cluster_view()
        nominated = self._nominated(pod)
        if not nodes:
            await self._record_failure(pod, ERR_NO_NODES, None)
            return
        nominated_node = (pod.get("status") or {}).get("nominatedNodeName") or ""
        if nominated_node in nodes and (
            filter_node(
                pod,
                nodes[nominated_node],
                pods_by_node[nominated_node],
                nominated.get(nominated_node, []),
            )
            is None
        ):
            await self._bind(pod, nominated_node)
            return
        failures: dict[str, FilterFailure] = {}
        feasible: dict[str, Obj] = {}
        for name, node in nodes.items():
            failure = filter_node(pod, node, pods_by_node[name], nominated.get(name, []))
            if failure is None:
                feasible[name] = node
            else:
                failures[name] = failure
        if feasible:
            await self._bind(pod, select_host(score_nodes(pod, feasible, pods_by_node)))
            return
        post_filter_message, candidate = "", None
        if self.config.preemption:
            candidate, post_filter_message = find_candidate(
                pod, nodes, failures, pods_by_node, nominated
            )
            if candidate is not None:
                await self._preempt(pod, candidate)
        message = fit_error_message(len(nodes), failures, post_filter_message)
        await self._record_failure(pod, message, candidate.node if candidate else None)

    # API writes

    async def _bind(self, pod: Obj, node: str) -> None:
        meta = pod["metadata"]
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = resource_path("v1", "pods", meta["namespace"], meta["name"], "binding")
        try:
            await self.client.create(path, binding)
        except ApiStatusError as err:
            if err.code in (404, 409):  # gone, or bound by someone else meanwhile
                return
            raise
        assumed = jsoncodec.copy(pod)
        assumed["spec"]["nodeName"] = node
        self._assumed[meta.get("uid", "")] = (node, assumed)
        await self.recorder.emit(
            pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}",
            action="Binding",
        )

    async def _record_failure(self, pod: Obj, message: str, nominate: str | None) -> None:
        self._failed_at[pod["metadata"].get("uid", "")] = self._generation
        await self.recorder.emit(pod, "Warning", "FailedScheduling", message, action="Scheduling")
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
        }

        def mutate(status: Obj) -> bool:
            changed = set_condition(status, condition)
            if nominate is not None and status.get("nominatedNodeName") != nominate:
                status["nominatedNodeName"] = nominate
                changed = True
            return changed

        await self._update_status(pod, mutate)

    async def _preempt(self, preemptor: Obj, candidate: Candidate) -> None:
        message = f"{self.config.scheduler_name}: preempting to accommodate a higher priority pod"
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": PREEMPTION_BY_SCHEDULER,
            "message": message,
        }
        for victim in candidate.victims:
            meta = victim["metadata"]
            if meta.get("deletionTimestamp"):
                continue  # graceful deletion already under way
            if not await self._update_status(victim, lambda s: set_condition(s, condition)):
                continue  # gone already
            path = resource_path("v1", "pods", meta["namespace"], meta["name"])
            try:
                await self.client.delete(path)  # util.DeletePod: default (graceful) options
            except ApiStatusError as err:
                if err.code not in (404, 409):
                    raise
                continue
            await self.recorder.emit(
                victim,
                "Normal",
                "Preempted",
                f"Preempted by pod {preemptor['metadata'].get('uid')} on node {candidate.node}",
                action="Preempting",
                related=preemptor,
            )

    async def _update_status(self, pod: Obj, mutate: Any) -> bool:
        """Apply `mutate(status) -> changed` with PUT pods/status, re-reading on conflict.

        Returns False when the pod no longer exists.
        """
        meta = pod["metadata"]
        path = resource_path("v1", "pods", meta["namespace"], meta["name"], "status")
        current = pod
        for _ in range(5):
            if current["metadata"].get("uid") != meta.get("uid"):
                return False
            updated = jsoncodec.copy(current)
            if not mutate(updated.setdefault("status", {})):
                return True
            try:
                await self.client.replace(path, updated)
                return True
            except ApiStatusError as err:
                if err.code == 404:
                    return False
                if err.code != 409:
                    raise
            try:
                current = await self.client.get(
                    resource_path("v1", "pods", meta["namespace"], meta["name"])
                )
            except ApiStatusError as err:
                if err.code == 404:
                    return False
                raise
        return False
