"""Part 3 under the real Karpenter: N protected Deployments on KWOK nodes Karpenter
provisioned, disrupted first by kubesim's Karpenter-style client, then by Karpenter itself
(NodeClaims deleted), on the real control plane the rest of the part runs on.

    runs = await KarpenterSeries(cluster, karpenter, 10, controller, controller_pid).run()

A `RealSeries` (real.py) with a NodePool of its own: its namespace, workload, settling,
webhook switch and clean-up are RealSeries'; what differs is where the pods run and who
disrupts their nodes. Each disruption is measured by kubesim's availability recorder, the
API server's audit log (karpenter_table.summarize_audit) and the controller process's CPU
and RSS (procs.UsageSampler).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.drain import workload
from bench.drain.controller import ControllerReady, register_by_url, unregister
from bench.drain.harness import SETTLE_SECONDS, all_ready, first_reaching
from bench.drain.karpenter_table import (
    REAL,
    SIMULATED,
    KarpenterRun,
    allowed_between,
    summarize_audit,
)
from bench.drain.real import RealSeries, cluster_client
from bench.drain.timings import DrainTimings
from bench.procs import UsageSampler
from kubesim.client import ApiStatusError, resource_path
from kubesim.drain import CLIENTS, DrainClient
from kubesim.recorder import AvailabilityRecorder
from kubesim.scenario_runner import DRAIN_IDENTITIES
from kubesim.watchlog import watch_until
from realcluster.addons import Karpenter, node_pool, on_pool
from realcluster.cluster import RealCluster

# Karpenter's timings are constants of its code: this part runs in real time (scale 1), the
# readiness delay R at its upstream-like default.
TIMINGS = DrainTimings(1.0)
DISRUPTION_BOUND = 300.0  # a disruption that does not end in time is reported, not waited on
NODECLAIMS = resource_path("karpenter.sh/v1", "nodeclaims")
NODEPOOLS = resource_path("karpenter.sh/v1", "nodepools")
Obj = dict[str, Any]


def pool_name(count: int) -> str:
    return f"bench-{count}"


def node_claims_of(claims: list[Obj], nodes: set[str]) -> list[Obj]:
    return [c for c in claims if (c.get("status") or {}).get("nodeName") in nodes]


class KarpenterSeries(RealSeries):
    def __init__(self, cluster: RealCluster, karpenter: Karpenter, count: int,
                 controller: ControllerReady, controller_pid: int,
                 timings: DrainTimings = TIMINGS) -> None:  # fmt: skip
        super().__init__(cluster, "karpenter", count, timings, controller)
        self.karpenter = karpenter
        self.controller_pid = controller_pid
        self.namespace = f"karpenter-{count}"
        self.pool = pool_name(count)

    async def run(self) -> list[KarpenterRun]:  # type: ignore[override]
        runs: list[KarpenterRun] = []
        try:
            await asyncio.to_thread(
                self.karpenter.apply_node_pool, node_pool(self.pool, cpu_limit="1000")
            )
            await self.create_workload()
            async with AvailabilityRecorder(self.api, namespace=self.namespace) as recorder:
                await self.settled(recorder)
                await register_by_url(self.api, self.controller)
                try:
                    await self.webhook_switched(on=True)
                    runs.append(await self.disrupt(recorder, SIMULATED, self.simulated))
                    await self.remove_drained_nodes(await self.nodes_holding_pods())
                    await self.settled(recorder)
                    runs.append(await self.disrupt(recorder, REAL, self.real))
                finally:
                    await unregister(self.api)
                await self.webhook_switched(on=False)
            await self.delete_namespace()
        finally:
            with contextlib.suppress(ApiStatusError):
                await self.api.delete(f"{NODEPOOLS}/{self.pool}")
            await self.api.close()
        return runs

    async def create_workload(self) -> None:
        namespace = {"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": self.namespace}}  # fmt: skip
        await self.api.create(resource_path("v1", "namespaces"), namespace)
        deployments = resource_path("apps/v1", "deployments", self.namespace)
        for name in self.names:
            manifest = workload.deployment(name, self.timings.readiness_delay, self.namespace)
            spec = manifest["spec"]["template"]["spec"]
            spec.pop("affinity")  # no node-a here: Karpenter's nodes
            on_pool(spec, self.pool)
            await self.api.create(deployments, manifest)

    async def settled(self, recorder: AvailabilityRecorder) -> None:
        # Karpenter provisions a node first (batching pending pods for 1 to 10 s).
        async with asyncio.timeout(SETTLE_SECONDS + self.count + 30):
            await recorder.wait_until(lambda: all_ready(recorder, self.namespace, self.names))

    async def nodes_holding_pods(self) -> set[str]:
        return {
            str(p["spec"]["nodeName"])
            for p in await self.pods()
            if not p["metadata"].get("deletionTimestamp") and (p.get("spec") or {}).get("nodeName")
        }

    async def nodes_gone(self, nodes: set[str]) -> None:
        await watch_until(
            self.api, "v1", "nodes", "Node", None,
            lambda items: not nodes & {n["metadata"]["name"] for n in items},
            bound=DISRUPTION_BOUND,
        )  # fmt: skip

    async def delete_node_claims(self, nodes: set[str]) -> None:
        claims = node_claims_of((await self.api.get(NODECLAIMS)).get("items") or [], nodes)
        if len(claims) != len(nodes):
            raise RuntimeError(f"{self.namespace}: {len(claims)} NodeClaim(s) for the "
                               f"{len(nodes)} node(s) holding the pods")  # fmt: skip
        for claim in claims:
            await self.api.delete(f"{NODECLAIMS}/{claim['metadata']['name']}")

    async def remove_drained_nodes(self, keep: set[str]) -> None:
        """Delete the pool's nodes that no longer hold pods (the simulated client leaves them,
        tainted), and wait until they are gone: the next window sees only its own work."""
        claims = (await self.api.get(NODECLAIMS)).get("items") or []
        ours = {
            str((c.get("status") or {}).get("nodeName"))
            for c in claims
            if (c["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == self.pool
        }
        drained = ours - keep
        if drained:
            await self.delete_node_claims(drained)
            await self.nodes_gone(drained)

    async def simulated(self, nodes: set[str]) -> float:
        """kubesim's Karpenter-style client drains every node at once; when the last
        returned.

        The nodes are cordoned first: real Karpenter's disruption controller removes
        `karpenter.sh/disrupted` from every node of its own that it is not disrupting
        (sigs.k8s.io/karpenter pkg/controllers/disruption/controller.go), so the simulated
        client's taint alone would not keep the surge pods off the node (they would land on
        it and be evicted, not Ready, over and over)."""
        for node in nodes:
            await self.api.patch(resource_path("v1", "nodes", name=node),
                                 {"spec": {"unschedulable": True}})  # fmt: skip
        api = cluster_client(self.cluster, DRAIN_IDENTITIES["karpenter"][2])
        try:
            cls: Any = CLIENTS["karpenter"]
            drains: list[DrainClient] = [
                cls(api, clock=time.monotonic, **self.timings.parameters("karpenter"))
                for _ in nodes
            ]
            pairs = zip(drains, sorted(nodes), strict=True)
            results = await asyncio.gather(*(drain.drain(node) for drain, node in pairs))
        finally:
            await api.close()
        failed = [r.error for r in results if not r.drained]
        if failed:
            raise RuntimeError(f"kubesim's Karpenter client did not drain: {failed[0]}")
        return time.monotonic()

    async def real(self, nodes: set[str]) -> float:
        """Delete the nodes' NodeClaims, as `kubectl delete nodeclaim` does; when the last
        node was deleted."""
        await self.delete_node_claims(nodes)
        await self.nodes_gone(nodes)
        return time.monotonic()

    async def disrupt(self, recorder: AvailabilityRecorder, client: str,
                      how: Callable[[set[str]], Awaitable[float]]) -> KarpenterRun:  # fmt: skip
        """One disruption of the nodes holding the pods, until they are done with (`how`
        returns when) and every Deployment is Ready again."""
        nodes = await self.nodes_holding_pods()
        error = None
        done: float | None = None
        metrics_before = await self.metrics()
        async with UsageSampler(self.controller_pid) as usage:
            wall_start = time.time()
            started = recorder.mark("disruption-started", client=client).at
            try:
                async with asyncio.timeout(DISRUPTION_BOUND):
                    done = await how(nodes) - started
                    await recorder.wait_until(
                        lambda: all_ready(recorder, self.namespace, self.names)
                    )
            except (TimeoutError, RuntimeError) as failure:
                error = str(failure) or "not done within the bound"
            ended = recorder.mark("disruption-settled", client=client).at
            wall_end = time.time()
        metrics_after = await self.metrics()
        records = await asyncio.to_thread(self.cluster.audit_records)
        timelines = [recorder.timeline(name, self.namespace) for name in self.names]
        return KarpenterRun(
            client=client,
            count=self.count,
            nodes=len(nodes),
            done=done,
            surge_ready=tuple(first_reaching(t.samples, 2, started, ended) for t in timelines),
            zero_ready=tuple(t.zero_ready_seconds(started, ended) for t in timelines),
            audit=summarize_audit(records, self.namespace, wall_start, wall_end),
            usage=usage.usage,
            error=error,
            allowed=allowed_between(metrics_before, metrics_after),
        )


async def run_karpenter_series(cluster: RealCluster, karpenter: Karpenter,
                               counts: tuple[int, ...], controller: ControllerReady,
                               controller_pid: int) -> list[KarpenterRun]:  # fmt: skip
    runs: list[KarpenterRun] = []
    for count in counts:
        runs += await KarpenterSeries(cluster, karpenter, count, controller, controller_pid).run()
    return runs
