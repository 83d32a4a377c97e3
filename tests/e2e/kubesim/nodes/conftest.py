"""Fixtures for the scheduler and kubelet end-to-end tests: a running cluster, watch logs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import pytest

from kubesim.client import KubeClient, resource_path
from kubesim.cluster.kubeletconfig import KubeletConfig
from kubesim.cluster.node_lifecycle import NodeLifecycleController
from kubesim.cluster.nodeset import NodeSet
from kubesim.cluster.nodestatus import NodeShape
from kubesim.cluster.scheduler import Scheduler
from kubesim.sim import KubeSim
from kubesim.watchlog import WatchLog

# What the fixtures below give a test: `cluster(nodes, ...)` and `watch(path)`.
Cluster = Callable[..., Awaitable[NodeSet]]
Watch = Callable[[str], Awaitable[WatchLog]]
PODS = resource_path("v1", "pods", "default")
EVENTS = resource_path("v1", "events", "default")
NODES = resource_path("v1", "nodes")

# Real kubelet defaults, except where a test would otherwise wait for seconds.
FAST = KubeletConfig(
    eviction_monitoring_interval=0.2,
    backoff_initial=0.05,
    backoff_max=0.4,
    minimum_kill_grace=0.0,
)


@pytest.fixture
def fast_config() -> KubeletConfig:
    return FAST


@pytest.fixture
async def kube(sim: KubeSim) -> AsyncIterator[KubeClient]:
    client = KubeClient(sim.url, sim.admin_token, sim.ca_pem, user_agent="e2e-test")
    yield client
    await client.close()


@pytest.fixture
async def watch(kube: KubeClient) -> AsyncIterator[Watch]:
    """Start a WatchLog on a collection path; stopped at teardown."""
    started: list[WatchLog] = []

    async def make(path: str) -> WatchLog:
        log = await WatchLog(kube, path).start()
        started.append(log)
        return log

    yield make
    for log in started:
        await log.stop()


@pytest.fixture
async def cluster(kube: KubeClient) -> AsyncIterator[Cluster]:
    """Start the node lifecycle controller, kubelets for `nodes` and (by default) the scheduler."""
    running: list[Any] = []

    async def make(
        nodes: Mapping[str, NodeShape], config: KubeletConfig = FAST, scheduler: bool = True
    ) -> NodeSet:
        lifecycle = NodeLifecycleController(kube)
        await lifecycle.start()
        running.append(lifecycle)
        nodeset = NodeSet(kube, nodes, config)
        await nodeset.start()
        running.append(nodeset)
        if scheduler:
            sched = Scheduler(kube)
            await sched.start()
            running.append(sched)
        return nodeset

    yield make
    for component in reversed(running):
        await component.stop()
