"""Part 3 on the real control plane: one drain client and one N, unprotected and with
graceful-drain, on a `RealCluster` (kube-apiserver, kube-controller-manager, kube-scheduler,
kwok nodes) that the whole run shares.

    results = await RealSeries(cluster, "kubectl", 10, DrainTimings(), controller).run()

Each series has a namespace of its own (`shop-kubectl-10`) holding N Deployments from
`workload.deployment()` (the same readiness delay R as on kubesim; kwok reads the same
annotations), all Ready on node-a. Then two drains of the node holding them, each from a
settled cluster, measured by kubesim's availability recorder exactly as on kubesim
(`harness.measure_drain`): with no webhook registered, then with graceful-drain's webhook
registered by URL (the controller process runs throughout, as on kubesim). Afterwards the
namespace is deleted, so that the next series' drains evict only its own pods.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import aiohttp

from bench.drain import workload
from bench.drain.controller import ControllerReady, register_by_url, unregister
from bench.drain.harness import (
    SETTLE_SECONDS,
    Mode,
    RunResult,
    all_ready,
    measure_drain,
    node_holding,
    reset_node,
)
from bench.drain.timings import DrainTimings
from graceful_drain.controller.serving.metrics import NAMESPACE as METRICS_NAMESPACE
from kubesim.client import ApiStatusError, KubeClient, resource_path
from kubesim.drain import CLIENTS, DrainClient
from kubesim.recorder import AvailabilityRecorder
from kubesim.scenario_runner import DRAIN_IDENTITIES
from realcluster.cluster import RealCluster

WEBHOOK_SWITCH_TIMEOUT = 30.0  # the API server picks a configuration change up from a watch
NAMESPACE_GONE_TIMEOUT = 180.0
POLL_SECONDS = 0.1
DECISIONS_METRIC = f"{METRICS_NAMESPACE}_decisions_total"
Obj = dict[str, Any]


def series_namespace(client: str, count: int) -> str:
    return f"{workload.NAMESPACE}-{client}-{count}"


def cluster_client(cluster: RealCluster, user_agent: str) -> KubeClient:
    """The admin's identity (system:masters): on the real cluster every client acts as it."""
    return KubeClient(cluster.server, cluster.admin_token, cluster.ca_pem, user_agent=user_agent)


def decisions_total(metrics: str) -> float:
    """The controller's admission decisions so far, from its Prometheus text."""
    return sum(
        float(line.rpartition(" ")[2])
        for line in metrics.splitlines()
        if line.startswith(DECISIONS_METRIC + "{") or line.startswith(DECISIONS_METRIC + " ")
    )


async def dry_run_eviction(api: KubeClient, pod: Obj) -> None:
    """An eviction of `pod` the API server only admits (graceful-drain allows every dry run:
    `Reason.DRY_RUN`)."""
    meta = pod["metadata"]
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        "deleteOptions": {"dryRun": ["All"]},
    }
    path = resource_path("v1", "pods", meta["namespace"], meta["name"], "eviction")
    await api.request("POST", path, body, params={"dryRun": "All"})


class RealSeries:
    def __init__(self, cluster: RealCluster, client: str, count: int, timings: DrainTimings,
                 controller: ControllerReady) -> None:  # fmt: skip
        self.cluster = cluster
        self.client = client
        self.count = count
        self.timings = timings
        self.controller = controller
        self.namespace = series_namespace(client, count)
        self.names = tuple(workload.deployment_name(i) for i in range(count))
        self.node = workload.DRAINED_NODE  # where the pods are
        self.api = cluster_client(cluster, "graceful-drain-bench")

    async def run(self) -> list[RunResult]:
        try:
            await self.create_workload()
            async with AvailabilityRecorder(self.api, namespace=self.namespace) as recorder:
                await self.settled(recorder)
                await self.check_on_drained_node()
                results = [await self.drain(recorder, Mode.NONE)]
                await self.settled(recorder)
                await register_by_url(self.api, self.controller)
                try:
                    await self.webhook_switched(on=True)
                    results.append(await self.drain(recorder, Mode.CONTROLLER))
                finally:
                    await unregister(self.api)
                await self.webhook_switched(on=False)
            await self.delete_namespace()
        finally:
            await self.api.close()
        return results

    async def create_workload(self) -> None:
        namespace = {"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": self.namespace}}  # fmt: skip
        await self.api.create(resource_path("v1", "namespaces"), namespace)
        deployments = resource_path("apps/v1", "deployments", self.namespace)
        for name in self.names:
            manifest = workload.deployment(name, self.timings.readiness_delay, self.namespace)
            await self.api.create(deployments, manifest)

    async def settled(self, recorder: AvailabilityRecorder) -> None:
        async with asyncio.timeout(SETTLE_SECONDS + self.count):
            await recorder.wait_until(lambda: all_ready(recorder, self.namespace, self.names))

    async def pods(self) -> list[Obj]:
        listed = await self.api.get(resource_path("v1", "pods", self.namespace))
        return list(listed.get("items") or [])

    async def check_on_drained_node(self) -> None:
        elsewhere = [
            p["metadata"]["name"]
            for p in await self.pods()
            if (p.get("spec") or {}).get("nodeName") != workload.DRAINED_NODE
        ]
        if elsewhere:
            raise RuntimeError(
                f"{self.namespace}: {len(elsewhere)} pod(s) not on {workload.DRAINED_NODE}: "
                f"{', '.join(sorted(elsewhere)[:5])}"
            )

    async def metrics(self) -> str:
        """The controller's Prometheus text."""
        url = f"http://127.0.0.1:{self.controller.metrics_port}/metrics"
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            return await response.text()

    async def decisions(self) -> float:
        return decisions_total(await self.metrics())

    async def webhook_switched(self, *, on: bool) -> None:
        """Until the API server calls graceful-drain's webhook (`on`) or no longer does: a
        dry-run eviction, and whether the controller counted a decision for it."""
        deadline = time.monotonic() + WEBHOOK_SWITCH_TIMEOUT
        while True:
            pods = [p for p in await self.pods() if not p["metadata"].get("deletionTimestamp")]
            if pods:
                before = await self.decisions()
                await dry_run_eviction(self.api, pods[0])
                if (await self.decisions() > before) is on:
                    return
            if time.monotonic() > deadline:
                state = "not called" if on else "still called"
                raise TimeoutError(f"the webhook was {state} after {WEBHOOK_SWITCH_TIMEOUT:.0f} s")
            await asyncio.sleep(POLL_SECONDS)

    def drain_client(self, api: KubeClient) -> DrainClient:
        cls: Any = CLIENTS[self.client]
        drain: DrainClient = cls(api, clock=time.monotonic, **self.timings.parameters(self.client))
        return drain

    async def drain(self, recorder: AvailabilityRecorder, mode: Mode) -> RunResult:
        """One drain of the node holding the pods, until every Deployment is Ready again."""
        api = cluster_client(self.cluster, DRAIN_IDENTITIES[self.client][2])
        try:
            result = await measure_drain(
                self.drain_client(api), recorder, self.node, mode, self.timings,
                self.namespace, self.names,
            )  # fmt: skip
        finally:
            await api.close()
        await reset_node(self.api, self.node)
        self.node = await node_holding(self.api, self.namespace, self.node)
        # this process holds only the drain client and the recorder, not the control plane
        return dataclasses.replace(result, cpu_seconds=None)

    async def delete_namespace(self) -> None:
        path = resource_path("v1", "namespaces", name=self.namespace)
        await self.api.delete(path)
        deadline = time.monotonic() + NAMESPACE_GONE_TIMEOUT
        while True:
            try:
                await self.api.get(path)
            except ApiStatusError as error:
                if error.code == 404:
                    return
                raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"namespace {self.namespace} still there after "
                                   f"{NAMESPACE_GONE_TIMEOUT:.0f} s")  # fmt: skip
            await asyncio.sleep(0.5)


async def run_real_series(cluster: RealCluster, clients: Sequence[str], counts: Sequence[int],
                          timings: DrainTimings,
                          controller: ControllerReady) -> list[RunResult]:  # fmt: skip
    """Every (client, N) in turn on the one cluster, in the kubesim series' order."""
    results: list[RunResult] = []
    for count in counts:
        for client in clients:
            results += await RealSeries(cluster, client, count, timings, controller).run()
    return results
