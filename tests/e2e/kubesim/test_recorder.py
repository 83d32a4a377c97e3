"""The availability recorder over a real watch, on a hand-driven clock.

Objects are written straight through the API (no controllers): the recorder
must attribute pods to their Deployment via the ReplicaSet and follow Ready,
terminating and deleted pods. Each step stamps its events with the clock's
current value and waits until the recorder has seen its effect.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from kubesim.client import KubeClient, resource_path
from kubesim.recorder import AvailabilityRecorder
from kubesim.sim import KubeSim
from tests.e2e.kubesim.drainkit import NS, node, pod, replicaset, start_pod

pytestmark = pytest.mark.e2e


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def client(sim: KubeSim) -> AsyncIterator[KubeClient]:
    c = KubeClient(sim.url, sim.admin_token, sim.ca_pem, user_agent="recorder-test")
    yield c
    await c.close()


def deployment() -> dict[str, object]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            },
        },
    }


async def test_recorder_measures_the_outage_inside_a_drain_window(
    sim: KubeSim, client: KubeClient
) -> None:
    clock = ManualClock()
    sim.create(node("node-a"))
    web = sim.create(deployment())
    rs = replicaset("web-1")
    rs["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
         "uid": web["metadata"]["uid"], "controller": True}
    ]  # fmt: skip
    owned = sim.create(rs)

    async with AvailabilityRecorder(client, namespace=NS, clock=clock) as recorder:
        async with asyncio.timeout(30):
            clock.now = 1.0
            await start_pod(client, pod("web-1-a", "node-a", owned))
            await recorder.wait_until(lambda: recorder.ready("web") == 1)

            clock.now = 2.0
            recorder.mark_drain_started("node-a", "kubectl")

            clock.now = 3.0
            await client.delete(resource_path("v1", "pods", NS, "web-1-a"))
            await recorder.wait_until(lambda: recorder.ready("web") == 0)

            clock.now = 5.0
            await start_pod(client, pod("web-1-b", "node-a", owned))
            await recorder.wait_until(lambda: recorder.ready("web") == 1)

            clock.now = 6.0
            recorder.mark("drain-finished", node="node-a")

    clock.now = 7.0
    timeline = recorder.timeline("web")
    start, end = recorder.drain_window("node-a")
    assert (start, end) == (2.0, 6.0)
    assert [count for _, count in timeline.samples] == [0, 1, 0, 1]
    assert timeline.samples[-2:] == ((3.0, 0), (5.0, 1))
    assert timeline.zero_ready_intervals(start, end) == [(3.0, 5.0)]
    assert timeline.zero_ready_seconds(start, end) == 2.0
    assert timeline.max_ready(start, end) == 1
    assert timeline.rollouts() == ["web-1"]
    assert timeline.rollouts(start, end) == []
