"""The one "deny on doubt": a freshly started controller that cannot read the API yet.

graceful-drain installed from deploy/ (drain_cluster.py); the controller process starts while
the API server refuses its informers and reads (503), as during a control-plane outage. An
eviction of a Deployment's only pod must not slip through as "unprotected": 429.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from kubesim.apiserver.faults import FaultRule
from kubesim.client import ApiStatusError, resource_path
from kubesim.sim import KubeSim
from tests.e2e.watching import annotations_of

from .drain_cluster import drain_cluster
from .installed import BOUND, CONTROLLER_USER

pytestmark = pytest.mark.e2e

CACHED = ("pods", "replicasets", "deployments")


async def readyz(port: int) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/readyz") as response,
    ):
        return response.status


async def test_a_cold_cache_answers_429_while_the_api_is_unreachable(
    sim: KubeSim, tmp_path: Path
) -> None:
    async with drain_cluster(sim, tmp_path) as cluster:
        await cluster.create_web()
        [pod] = await cluster.pods("web")
        name = pod["metadata"]["name"]
        outage = [
            sim.faults.add(FaultRule(user=CONTROLLER_USER, resource=resource, error_code=503))
            for resource in CACHED
        ]
        replica = await cluster.start_replica(wait_synced=False)
        assert not replica.app.cache.synced
        assert await readyz(replica.app.health_site.port) == 503

        with pytest.raises(ApiStatusError) as refused:
            await cluster.admin.create(
                resource_path("v1", "pods", "default", name, "eviction"),
                {"apiVersion": "policy/v1", "kind": "Eviction",
                 "metadata": {"name": name, "namespace": "default"}},
            )  # fmt: skip

        assert refused.value.code == 429
        message = refused.value.status["message"]
        assert f"pod default/{name} is not in the controller's cache yet" in message
        assert replica.decisions("cache-cold", allowed=False) == 1
        assert [p["metadata"]["uid"] for p in await cluster.pods("web")] == [pod["metadata"]["uid"]]
        assert RESTARTED_AT_ANNOTATION not in annotations_of(await cluster.deployment())
        live_reads = [r for r in cluster.controller_requests()
                      if r.verb == "get" and r.resource == "pods" and r.name == name]  # fmt: skip
        assert live_reads and {r.code for r in live_reads} == {503}

        for rule in outage:  # the API comes back: the caches fill, /readyz passes
            sim.faults.remove(rule)
        async with asyncio.timeout(BOUND):
            await replica.app.cache.wait_synced()
        assert await readyz(replica.app.health_site.port) == 200
