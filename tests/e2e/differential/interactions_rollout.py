"""Deployment rollout arithmetic in the differential catalogue: for replicas 1..3, each
strategy (RollingUpdate with surge/unavailable combinations, Recreate) rolls out a restart,
and the sequence of (old, new) ReplicaSet `spec.replicas` a watch sees is compared. A paused
Deployment does not roll out until resumed.

Pods become Ready after the same declared delay on both servers (`sim.kubesim.io/ready-delay`:
kwok's stages on the real control plane, kubesim's simulated kubelets); the rollouts of one
replica count run side by side, each Deployment with its own label.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kubesim.client import MERGE_PATCH, resource_path

from .interactions import Api, Interaction, status_only, until

READY_DELAY = "1s"
RESTARTED_AT = "2026-01-01T00:00:00Z"
REVISION = "deployment.kubernetes.io/revision"

STRATEGIES: dict[str, dict[str, Any]] = {
    "default": {"type": "RollingUpdate"},
    "surge1-unavailable0": {"type": "RollingUpdate",
                            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
    "surge0-unavailable1": {"type": "RollingUpdate",
                            "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
    "surge2-unavailable50%": {"type": "RollingUpdate",
                              "rollingUpdate": {"maxSurge": 2, "maxUnavailable": "50%"}},
    "recreate": {"type": "Recreate"},
}  # fmt: skip


def _deployment(name: str, replicas: int, strategy: dict[str, Any]) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {
            "replicas": replicas, "strategy": strategy,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels,
                             "annotations": {"sim.kubesim.io/ready-delay": READY_DELAY}},
                "spec": {"terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "app", "image": "example/app:1"}]},
            },
        },
    }  # fmt: skip


def _complete(name: str, replicas: int, revision: str) -> Callable[[list[Any]], bool]:
    """The Deployment has rolled out `revision` completely: everything updated and available,
    nothing old left."""

    def check(objs: list[Any]) -> bool:
        for d in objs:
            if d["metadata"]["name"] != name:
                continue
            status = d.get("status") or {}
            return bool(
                d["metadata"].get("annotations", {}).get(REVISION) == revision
                and status.get("observedGeneration") == d["metadata"]["generation"]
                and all(status.get(k, 0) == replicas for k in
                        ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas"))
            )  # fmt: skip
        return False

    return check


async def _record(
    api: Api, name: str, into: list[tuple[int, int]], listed_once: asyncio.Event
) -> None:
    """Every (old, new) pair of ReplicaSet spec.replicas the watch sees, until cancelled."""
    path = resource_path("apps/v1", "replicasets", api.namespace)
    listed = await api.client.get(path, params={"labelSelector": f"app={name}"})
    replicas: dict[str, int] = {}
    for rs in listed["items"]:
        replicas[rs["metadata"]["annotations"][REVISION]] = rs["spec"]["replicas"]
    since = listed["metadata"]["resourceVersion"]
    into.append((replicas.get("1", 0), replicas.get("2", 0)))  # before the restart
    listed_once.set()
    while True:
        async for event in api.client.watch(path, since, timeout_seconds=60,
                                            params={"labelSelector": f"app={name}"}):  # fmt: skip
            rs = event["object"]
            since = rs["metadata"]["resourceVersion"]
            if event["type"] == "BOOKMARK":
                continue
            revision = (rs["metadata"].get("annotations") or {}).get(REVISION)
            if revision is None:
                continue
            replicas[revision] = 0 if event["type"] == "DELETED" else rs["spec"]["replicas"]
            pair = (replicas.get("1", 0), replicas.get("2", 0))
            if not into or into[-1] != pair:
                into.append(pair)


async def _rollout(api: Api, name: str, replicas: int) -> list[tuple[int, int]]:
    deployments = resource_path("apps/v1", "deployments", api.namespace)
    await until(api, deployments, _complete(name, replicas, "1"))
    seen: list[tuple[int, int]] = []
    listed = asyncio.Event()
    recorder = asyncio.create_task(_record(api, name, seen, listed))
    try:
        await listed.wait()  # the recorder starts from before the restart
        restart = {"spec": {"template": {"metadata": {"annotations": {
            "kubectl.kubernetes.io/restartedAt": RESTARTED_AT}}}}}  # fmt: skip
        await api.client.patch(f"{deployments}/{name}", restart, MERGE_PATCH)
        await until(api, deployments, _complete(name, replicas, "2"))
        rs_path = resource_path("apps/v1", "replicasets", api.namespace)
        await until(api, rs_path, lambda objs: all(
            rs["spec"]["replicas"] == 0 for rs in objs
            if rs["metadata"]["labels"].get("app") == name
            and rs["metadata"].get("annotations", {}).get(REVISION) == "1"))  # fmt: skip
    finally:
        recorder.cancel()
        await asyncio.gather(recorder, return_exceptions=True)
    return seen


def _steps(sequence: list[tuple[int, int]], strategy: dict[str, Any], replicas: int) -> Any:
    """The whole sequence where the controller meets one pod becoming Ready at a time;
    where it may meet several (a surge of 2 or more new pods, Ready after the same delay),
    how many of them each sync sees is a race on either server: then the state before,
    the first sync's steps, the most pods at once, and the end."""
    surge = (strategy.get("rollingUpdate") or {}).get("maxSurge", 0)
    if not (isinstance(surge, int) and surge >= 2 and replicas >= 2):
        return [list(pair) for pair in sequence]
    return {"before and first sync": [list(pair) for pair in sequence[:3]],
            "most pods": max(old + new for old, new in sequence),
            "end": list(sequence[-1])}  # fmt: skip


def _rollouts(replicas: int) -> Interaction:
    async def interaction(api: Api) -> None:
        deployments = resource_path("apps/v1", "deployments", api.namespace)
        names = {strategy: f"{strategy.replace('%', 'pct')}" for strategy in STRATEGIES}
        for strategy, name in names.items():
            await api.call(f"create {strategy}", "POST", deployments,
                           _deployment(name, replicas, STRATEGIES[strategy]),
                           view=status_only)  # fmt: skip
        sequences = await asyncio.gather(
            *(_rollout(api, name, replicas) for name in names.values())
        )
        for strategy, sequence in zip(names, sequences, strict=True):
            api.note(f"{strategy}: (old, new) replicas",
                     _steps(sequence, STRATEGIES[strategy], replicas))  # fmt: skip

    return interaction


async def _paused(api: Api) -> None:
    """A paused Deployment takes a template change without rolling it out; resumed, it
    rolls out."""
    deployments = resource_path("apps/v1", "deployments", api.namespace)
    await api.call(
        "create",
        "POST",
        deployments,
        _deployment("paused", 2, STRATEGIES["default"]),
        view=status_only,
    )
    await until(api, deployments, _complete("paused", 2, "1"))
    await api.call("pause", "PATCH", f"{deployments}/paused", {"spec": {"paused": True}},
                   content_type=MERGE_PATCH, view=status_only)  # fmt: skip
    restart = {"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": RESTARTED_AT}}}}}  # fmt: skip
    await api.call("restart", "PATCH", f"{deployments}/paused", restart,
                   content_type=MERGE_PATCH, view=status_only)  # fmt: skip

    def observed(objs: list[Any]) -> bool:
        return any(d["metadata"]["name"] == "paused"
                   and (d.get("status") or {}).get("observedGeneration")
                   == d["metadata"]["generation"] for d in objs)  # fmt: skip

    await until(api, deployments, observed)
    await api.call("paused status", "GET", f"{deployments}/paused",
                                   view=_rollout_status)  # fmt: skip
    rs_path = resource_path("apps/v1", "replicasets", api.namespace)
    await api.call("replica sets while paused", "GET", rs_path,
                             view=_replica_sets)  # fmt: skip
    await api.call("resume", "PATCH", f"{deployments}/paused", {"spec": {"paused": False}},
                   content_type=MERGE_PATCH, view=status_only)  # fmt: skip
    await until(api, deployments, _complete("paused", 2, "2"))
    await api.call("resumed status", "GET", f"{deployments}/paused", view=_rollout_status)


def _rollout_status(body: Any) -> Any:
    if not isinstance(body, dict) or body.get("kind") == "Status":
        return body
    status = body.get("status") or {}
    conditions = [{k: c.get(k) for k in ("type", "status", "reason")}
                  for c in status.get("conditions") or []]  # fmt: skip
    counts = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
              "unavailableReplicas")  # fmt: skip
    return {"paused": body["spec"].get("paused"), "conditions": conditions,
            "revision": body["metadata"].get("annotations", {}).get(REVISION),
            **{k: status.get(k) for k in counts}}  # fmt: skip


def _replica_sets(body: Any) -> Any:
    items = body.get("items") if isinstance(body, dict) else None
    if items is None:
        return body
    return sorted([rs["metadata"].get("annotations", {}).get(REVISION), rs["spec"]["replicas"]]
                  for rs in items)  # fmt: skip


ROLLOUT: list[tuple[str, Interaction]] = [
    *((f"rollout: restart, {n} replica{'s' if n > 1 else ''}", _rollouts(n)) for n in (1, 2, 3)),
    ("rollout: paused", _paused),
]
