"""Drains one after another in the same cluster, by each of kubesim's drain clients and by the
real `kubectl drain`.

graceful-drain installed from deploy/ (drain_cluster.py) protects two single-replica
Deployments. node-a is drained, then freed as the benchmark frees a node between its drains
(`reset_node`: uncordoned, Karpenter's and Cluster Autoscaler's taints removed); then node-b,
where the replacements went, likewise; then node-a again. Every drain must finish and, from
the first drain's start until the last replacement is Ready, neither Deployment may be left
without a Ready pod: a drain after the first must be protected as the first was. kubesim's
clients run with their upstream timings scaled down as the benchmark scales them
(`DrainTimings`); the real kubectl keeps its 5 s retry, so its case takes longest.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from bench.drain.harness import reset_node
from bench.drain.timings import DrainTimings

from kubesim.client import KubeClient
from kubesim.drain import CLIENTS, DrainClient, DrainResult
from kubesim.scenario_runner import DRAIN_IDENTITIES
from kubesim.sim import KubeSim
from kubesim.watchlog import watch_until
from tests.e2e.watching import is_ready

from .drain_cluster import DrainCluster, drain_cluster
from .installed import BOUND, WORKLOADS

pytestmark = pytest.mark.e2e

DEPLOYMENTS = ("web", "api")
ROUTE = ("node-a", "node-b", "node-a")  # each drain takes the pods to the other node
OTHER = {"node-a": "node-b", "node-b": "node-a"}
Obj = dict[str, Any]


async def protected_cluster(cluster: DrainCluster) -> float:
    """The controller running and every Deployment Ready on node-a; when that was."""
    await cluster.start_replica()
    for name in DEPLOYMENTS:
        await cluster.create_web(name)
    return cluster.recorder.clock()


async def settle_and_free(cluster: DrainCluster, node: str) -> None:
    """Until every Deployment's only pod is a Ready one on the other node; then `node` is
    freed for the next drain."""

    def moved(pods: list[Obj]) -> bool:
        ours = [p for p in pods if p["metadata"]["labels"].get("app") in DEPLOYMENTS]
        return len(ours) == len(DEPLOYMENTS) and all(
            p["spec"].get("nodeName") == OTHER[node] and is_ready(p) for p in ours
        )

    await watch_until(cluster.admin, "v1", "pods", "Pod", WORKLOADS, moved)
    await reset_node(cluster.admin, node)


def assert_never_without_a_ready_pod(cluster: DrainCluster, since: float) -> None:
    window = (since, cluster.recorder.clock())
    for name in DEPLOYMENTS:
        assert cluster.zero_ready_seconds(window, name) == 0, name
        assert len(cluster.rollouts(window, name)) == len(ROUTE), name  # one per drain


async def drain_with(cluster: DrainCluster, drain: DrainClient, node: str) -> DrainResult:
    cluster.recorder.mark_drain_started(node, drain.name)
    async with asyncio.timeout(BOUND):
        result = await drain.drain(node)
    cluster.recorder.mark_drain_finished(result)
    assert result.drained, (node, result.error)
    ours = [key for key in result.attempts if key.split("/", 1)[0] == WORKLOADS]
    assert len(ours) == len(DEPLOYMENTS), (node, ours)
    # Each held by the webhook while its replacement started, on every drain.
    assert all(result.rejections.get(key, 0) >= 1 for key in ours), (node, result.rejections)
    return result


@pytest.mark.parametrize("name", sorted(CLIENTS))
async def test_every_drain_after_the_first_is_protected_as_the_first(
    sim: KubeSim, tmp_path: Path, name: str
) -> None:
    async with drain_cluster(sim, tmp_path) as cluster:
        started = await protected_cluster(cluster)
        user, groups, agent = DRAIN_IDENTITIES[name]
        client = KubeClient(sim.url, sim.user_token(user, groups), sim.ca_pem, user_agent=agent)
        parameters = dict(DrainTimings().parameters(name))
        if name == "kubectl":  # the controller's own pods have an emptyDir, as kubectl_drain
            parameters["delete_emptydir_data"] = True
        # One client for every drain, as one Karpenter or Cluster Autoscaler process would be.
        drain: DrainClient = CLIENTS[name](client, **parameters)
        try:
            for node in ROUTE:
                await drain_with(cluster, drain, node)
                await settle_and_free(cluster, node)
        finally:
            await client.close()

        assert_never_without_a_ready_pod(cluster, started)


async def test_every_real_kubectl_drain_after_the_first_is_protected_as_the_first(
    sim: KubeSim, tmp_path: Path
) -> None:
    async with drain_cluster(sim, tmp_path) as cluster:
        started = await protected_cluster(cluster)
        for node in ROUTE:
            drained = await cluster.kubectl_drain(node)
            assert drained.code == 0, (node, drained.stderr)
            assert drained.lines[-1] == f"node/{node} drained"
            assert "graceful-drain: waiting for a replacement of Deployment" in drained.stderr
            await settle_and_free(cluster, node)

        assert_never_without_a_ready_pod(cluster, started)
