"""kubesim in its own process, seeded with pods directly (no HTTP), for the sync benchmark.

Protocol: the child sends the admin kubeconfig path once serving; then ("seed", total) grows
the pod count to `total` and answers ("seeded", total, seconds); "stop" ends it.

Pods belong to one Deployment and ReplicaSet per namespace (proper owner uids, so kubesim's
garbage collector keeps them); owners stay fixed while pods grow, so the cache's growth
between sizes is the pods' alone.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from bench import objects
from bench.procs import receive_async, run_child
from kubesim.sim import KubeSim

SETTLE_STEPS = 10_000
# Fields the API server assigns: a create must not carry them.
_ASSIGNED = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")


@dataclass(frozen=True)
class SeedOptions:
    namespaces: int = 20
    uvloop: bool = True


def _for_create(raw: dict[str, Any]) -> dict[str, Any]:
    for key in _ASSIGNED:
        raw["metadata"].pop(key, None)
    raw.pop("status", None)
    return raw


class Seeder:
    def __init__(self, sim: KubeSim, namespaces: int) -> None:
        self.sim = sim
        self.owners: list[tuple[str, str, str]] = []  # (namespace, replicaset name, its uid)
        self.count = 0
        for index in range(namespaces):
            namespace = f"team-{index:03d}"
            sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
            name = f"checkout-{index:03d}"
            deployment = sim.create(
                _for_create(objects.deployment(index, namespace=namespace, name=name, replicas=1))
            )
            replicaset = _for_create(
                objects.replicaset(
                    index, namespace=namespace, name=f"{name}-7f9c8d6b5", deployment=name,
                    replicas=1,
                )
            )  # fmt: skip
            replicaset["metadata"]["ownerReferences"][0]["uid"] = deployment["metadata"]["uid"]
            created = sim.create(replicaset)
            self.owners.append((namespace, created["metadata"]["name"], created["metadata"]["uid"]))

    def grow(self, total: int) -> None:
        while self.count < total:
            namespace, replicaset, uid = self.owners[self.count % len(self.owners)]
            raw = objects.pod(
                self.count,
                namespace=namespace,
                name=f"{replicaset}-{self.count:06d}",
                replicaset=replicaset,
            )
            status = raw["status"]
            raw["metadata"]["ownerReferences"][0]["uid"] = uid
            created = self.sim.create(_for_create(raw))
            # The kubelet's first status write, folded into the creation: no client has read
            # the object yet, and a real update would double the seeding time.
            created["status"] = status
            self.count += 1


async def _settled(sim: KubeSim) -> None:
    """Until kubesim's garbage collector has looked at every seeded object: it reacts to each
    write after the fact (one queued item per pod), and that backlog must not run during the
    sync being measured. Bounded: the collector drains its queue in one loop step."""
    for _ in range(SETTLE_STEPS):
        if _gc_backlog(sim) == 0:
            return
        await asyncio.sleep(0)  # one loop iteration: the collector's turn
    raise RuntimeError(f"kubesim's garbage collector still busy after {SETTLE_STEPS} steps")


def _gc_backlog(sim: KubeSim) -> int:
    """The collector's changes not yet looked at. A `--baseline` commit's kubesim from before
    `GarbageCollector.backlog` (1248dcd) has only its queue."""
    backlog: int | None = getattr(sim.gc, "backlog", None)
    return sim.gc._queue.qsize() if backlog is None else backlog


async def _serve(connection: Connection, options: SeedOptions) -> None:
    # The watch history would hold a second reference to every seeded pod; nobody resumes.
    async with KubeSim(history_limit=1000) as sim:
        seeder = Seeder(sim, options.namespaces)
        connection.send(str(sim.kubeconfig_path))
        while (command := await receive_async(connection)) != "stop":
            _, total = command
            started = time.perf_counter()
            seeder.grow(total)
            await _settled(sim)
            connection.send(("seeded", seeder.count, time.perf_counter() - started))
    connection.send("stopped")


def kubesim_main(connection: Connection, options: SeedOptions) -> None:
    """Process entry point (spawned)."""
    run_child(connection, _serve(connection, options), uvloop=options.uvloop)
