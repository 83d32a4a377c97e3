"""The eviction dance with Karpenter- and Cluster-Autoscaler-style drain clients.

graceful-drain installed from deploy/ (drain_cluster.py). The clients (kubesim.drain) act as
their upstream counterparts do, under their own identities, with their retry timings scaled
down: Karpenter's eviction queue backs off from 100ms, Cluster Autoscaler retries a refused
eviction every DefaultEvictionRetryTime (10s upstream, 0.5s here).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from graceful_drain.controller.writes.events import DRAIN_COMPLETED
from kubesim.client import KubeClient
from kubesim.drain import CLIENTS, DrainClient
from kubesim.scenario_runner import DRAIN_IDENTITIES
from kubesim.sim import KubeSim

from .drain_cluster import drain_cluster
from .installed import BOUND

pytestmark = pytest.mark.e2e

SCALED: dict[str, dict[str, Any]] = {
    "karpenter": {"eviction_base_delay": 0.1, "eviction_max_delay": 1.0, "requeue_interval": 0.2},
    "cluster-autoscaler": {"eviction_retry_time": 0.5, "wait_poll_interval": 0.2,
                           "max_pod_eviction_time": 60.0},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SCALED))
async def test_the_eviction_dance_with_an_autoscaler_style_client(
    sim: KubeSim, tmp_path: Path, name: str
) -> None:
    async with drain_cluster(sim, tmp_path) as cluster:
        replica = await cluster.start_replica()
        await cluster.create_web(ready_delay="1s")
        user, groups, agent = DRAIN_IDENTITIES[name]
        client = KubeClient(sim.url, sim.user_token(user, groups), sim.ca_pem, user_agent=agent)
        try:
            factory: Any = CLIENTS[name]
            drain: DrainClient = factory(client, **SCALED[name])
            cluster.recorder.mark_drain_started("node-a", name)
            async with asyncio.timeout(BOUND):
                result = await drain.drain("node-a")
            cluster.recorder.mark_drain_finished(result)
        finally:
            await client.close()
        window = await cluster.settle_after_drain("node-a")
        await cluster.until_event(DRAIN_COMPLETED)

        assert result.drained, result.error
        [web_pod] = [key for key in result.attempts if key.startswith("default/web-")]
        assert result.rejections[web_pod] >= 1  # held while the replacement started
        assert replica.decisions("rollout-requested", allowed=False) == 1
        assert cluster.zero_ready_seconds(window) == 0
        assert len(cluster.rollouts(window)) == 1
        [new] = await cluster.pods("web")
        assert new["spec"]["nodeName"] == "node-b"
