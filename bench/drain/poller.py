"""The polling alternative: a loop that restarts Deployments with pods on cordoned nodes.

Every `period` it lists the nodes, takes those being drained (unschedulable, or carrying
Karpenter's or Cluster Autoscaler's drain taint), and restarts each Deployment with a pod
there once, as `kubectl rollout restart` does (the pod template's
kubectl.kubernetes.io/restartedAt annotation). The surge replacement then starts on another
node. Without something refusing the eviction meanwhile (a PDB), the drain evicts the pod
long before the loop's next tick: the benchmark pairs it with PDBs.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import Any

from graceful_drain.kube.timefmt import format_rfc3339
from kubesim.client import STRATEGIC_MERGE_PATCH, KubeClient, resource_path
from kubesim.drain.autoscaler_rules import TO_BE_DELETED_TAINT
from kubesim.drain.karpenter_rules import DISRUPTED_TAINT

Obj = dict[str, Any]
DRAIN_TAINTS = frozenset({TO_BE_DELETED_TAINT, DISRUPTED_TAINT["key"]})


def being_drained(node: Obj) -> bool:
    spec = node.get("spec") or {}
    taints = spec.get("taints") or []
    return bool(spec.get("unschedulable")) or any(t.get("key") in DRAIN_TAINTS for t in taints)


def owning_deployment(pod: Obj, replicasets: dict[tuple[str, str], Obj]) -> str | None:
    """The name of the Deployment controlling the pod's controlling ReplicaSet, if any."""
    namespace = pod["metadata"].get("namespace", "")
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "ReplicaSet":
            replicaset = replicasets.get((namespace, ref.get("name", "")))
            if replicaset is None:
                return None
            for owner in replicaset["metadata"].get("ownerReferences") or []:
                if owner.get("controller") and owner.get("kind") == "Deployment":
                    return str(owner.get("name"))
    return None


class RestartOnCordon:
    def __init__(self, client: KubeClient, period: float, *, first_tick: float) -> None:
        self.client = client
        self.period = period
        self.first_tick = first_tick
        self.restarted: set[tuple[str, str]] = set()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="restart-poller")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        await asyncio.sleep(self.first_tick)
        while True:
            await self.tick()
            await asyncio.sleep(self.period)

    async def tick(self) -> None:
        nodes = (await self.client.get(resource_path("v1", "nodes"))).get("items") or []
        drained = [n["metadata"]["name"] for n in nodes if being_drained(n)]
        if not drained:
            return
        listed = await self.client.get(resource_path("apps/v1", "replicasets"))
        replicasets = {(rs["metadata"]["namespace"], rs["metadata"]["name"]): rs
                       for rs in listed.get("items") or []}  # fmt: skip
        for node in drained:
            pods = await self.client.get(
                resource_path("v1", "pods"), {"fieldSelector": f"spec.nodeName={node}"}
            )
            for pod in pods.get("items") or []:
                name = owning_deployment(pod, replicasets)
                key = (pod["metadata"]["namespace"], name or "")
                if name is None or key in self.restarted:
                    continue
                self.restarted.add(key)
                await self.restart(*key)

    async def restart(self, namespace: str, name: str) -> None:
        stamp = format_rfc3339(datetime.now(UTC))
        patch = {"spec": {"template": {"metadata": {
            "annotations": {"kubectl.kubernetes.io/restartedAt": stamp}}}}}  # fmt: skip
        await self.client.patch(
            resource_path("apps/v1", "deployments", namespace, name), patch, STRATEGIC_MERGE_PATCH
        )
