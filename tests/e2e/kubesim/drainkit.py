"""Test helpers for drain tests: objects, watch-based waits, and a terminating-pod finisher."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from kubesim.client import ApiStatusError, KubeClient, resource_path
from kubesim.cluster.runtime import Informer
from kubesim.watchlog import watch_until

Obj = dict[str, Any]
NS = "default"
APP = {"app": "web"}


def node(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def ready_status() -> Obj:
    conditions = [
        {"type": t, "status": "True"}
        for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    return {"phase": "Running", "conditions": conditions}


def pod(
    name: str,
    on: str,
    owner: Obj | None,
    grace: int | None = None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    """A pod bound to `on`; `owner` (an object as created) controls it.

    Owners must exist: kubesim's garbage collector removes pods whose owner is gone.
    """
    meta: Obj = {"name": name, "namespace": NS, "labels": dict(APP)}
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": owner["apiVersion"], "kind": owner["kind"],
             "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
             "controller": True}
        ]  # fmt: skip
    if annotations:
        meta["annotations"] = annotations
    spec: Obj = {"nodeName": on, "containers": [{"name": "app", "image": "nginx"}]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


async def start_pod(client: KubeClient, obj: Obj) -> Obj:
    """Create the pod and report it Running and Ready, as its kubelet would."""
    created = await client.create(resource_path("v1", "pods", NS), obj)
    path = resource_path("v1", "pods", NS, created["metadata"]["name"], "status")
    return await client.replace(path, {**created, "status": ready_status()})


def replicaset(name: str = "web-rs") -> Obj:
    """A ReplicaSet to own test pods (no ReplicaSet controller runs in these tests)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": APP},
            "template": {
                "metadata": {"labels": APP},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            },
        },
    }


def daemonset(name: str) -> Obj:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "agent", "image": "agent"}]},
            },
        },
    }


def pdb_min_available(count: int = 1) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"minAvailable": count, "selector": {"matchLabels": APP}},
    }


async def pdb_computed(client: KubeClient) -> None:
    def done(pdbs: list[Obj]) -> bool:
        return bool(pdbs) and all(
            (p.get("status") or {}).get("observedGeneration") == p["metadata"]["generation"]
            for p in pdbs
        )

    await watch_until(client, "policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", NS, done)


@dataclass
class Finisher:
    """The kubelet's last step for terminating pods: a grace-period-0 DELETE.

    Records each pod's deletionGracePeriodSeconds as the drain client asked for it.
    With `replace`, the pod comes back at once under the same name (a new UID).
    """

    client: KubeClient
    replace: bool = False
    grace_seen: dict[str, int] = field(default_factory=dict)

    async def _finish(self, obj: Obj) -> None:
        meta = obj["metadata"]
        self.grace_seen[meta["name"]] = int(meta.get("deletionGracePeriodSeconds", -1))
        path = resource_path("v1", "pods", NS, meta["name"])
        with contextlib.suppress(ApiStatusError):
            await self.client.delete(path, {"gracePeriodSeconds": 0})
            if self.replace:
                keep = ("name", "namespace", "labels", "ownerReferences")
                fresh = {**obj, "metadata": {k: meta[k] for k in keep}}
                fresh["spec"] = {**obj["spec"], "nodeName": "elsewhere"}
                await self.client.create(resource_path("v1", "pods", NS), fresh)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Finisher]:
        informer = Informer(self.client, "v1", "pods", "Pod", namespace=NS)
        pending: set[asyncio.Task[None]] = set()

        def on_pod(_type: str, obj: Obj, _old: Obj | None) -> None:
            if _type != "DELETED" and obj["metadata"].get("deletionTimestamp"):
                task = asyncio.get_running_loop().create_task(self._finish(obj))
                pending.add(task)
                task.add_done_callback(pending.discard)

        informer.add_handler(on_pod)
        task = asyncio.get_running_loop().create_task(informer.run())
        await informer.synced.wait()
        try:
            yield self
        finally:
            for t in [task, *pending]:
                t.cancel()
            for t in [task, *pending]:
                with contextlib.suppress(asyncio.CancelledError):
                    await t


async def events(client: KubeClient, reason: str | None = None) -> list[Obj]:
    listed = await client.get(resource_path("v1", "events", NS))
    return [e for e in listed.get("items") or [] if reason is None or e.get("reason") == reason]
