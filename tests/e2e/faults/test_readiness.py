"""/readyz says when the controller is unprotecting, over HTTP as the kubelet probes it:
the published caBundle no longer verifies the served certificate, or the caches have not
heard from the API server for too long. And /metrics shows the staleness."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import aiohttp
import pytest

from kubesim.apiserver.faults import FaultRule
from kubesim.client import resource_path
from kubesim.sim import KubeSim
from tests.e2e.controller.drain_cluster import drain_cluster
from tests.e2e.controller.installed import CONTROLLER_USER, WEBHOOK_CONFIGURATION
from tests.e2e.controller.replica import Replica
from tests.e2e.faults.test_faults import tls_of

pytestmark = pytest.mark.e2e

BOUND = 15.0


async def get(replica: Replica, path: str) -> tuple[int, str]:
    url = f"http://127.0.0.1:{replica.app.health_site.port}{path}"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def test_readyz_fails_while_the_published_bundle_does_not_verify_the_served_cert(
    sim: KubeSim, tmp_path: Path
) -> None:
    async with drain_cluster(sim, tmp_path) as cluster:
        replica = await cluster.start_replica()
        tls = tls_of(replica)
        async with asyncio.timeout(BOUND):
            await tls.wait_for_ca_bundle(verified=True)
        assert await get(replica, "/readyz") == (200, "ok\n")

        # The controller cannot write its configuration, and someone puts another CA in it.
        blocked = sim.faults.add(FaultRule(verb="patch", user=CONTROLLER_USER,
                                           resource="validatingwebhookconfigurations",
                                           error_code=503))  # fmt: skip
        path = resource_path(
            "admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", None,
            WEBHOOK_CONFIGURATION,
        )  # fmt: skip
        foreign = base64.b64encode(sim.ca_pem).decode()
        replace = {"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": foreign}
        await cluster.admin.patch(path, [replace], "application/json-patch+json")
        async with asyncio.timeout(BOUND):
            await tls.wait_for_ca_bundle(verified=False)
        status, body = await get(replica, "/readyz")
        assert status == 503 and "ca-bundle-verified" in body

        sim.faults.remove(blocked)  # the keeper's next retry repairs it
        async with asyncio.timeout(BOUND):
            await tls.wait_for_ca_bundle(verified=True)
        assert await get(replica, "/readyz") == (200, "ok\n")


async def test_readyz_fails_once_the_caches_have_not_heard_from_the_api_server(
    sim: KubeSim, tmp_path: Path
) -> None:
    sim.server.bookmark_interval = 0.1
    async with drain_cluster(sim, tmp_path) as cluster:
        replica = await cluster.start_replica(app_options={"watch_silence_limit": 0.5})
        assert (await get(replica, "/readyz"))[0] == 200
        status, metrics = await get(replica, "/metrics")
        assert 'graceful_drain_cache_staleness_seconds{resource="deployments"}' in metrics

        # A half-open connection to an API server that then stops answering the controller.
        silent = sim.faults.add(FaultRule(verb="watch", user=CONTROLLER_USER,
                                          silence_watch=True))  # fmt: skip
        down = sim.faults.add(FaultRule(verb="list", user=CONTROLLER_USER, error_code=503))
        cache = replica.app.cache
        [deployments] = cache.deployments.informers
        async with asyncio.timeout(BOUND):
            await deployments.wait_for(lambda: deployments.stats.silent >= 1)
            await deployments.wait_for(lambda: not cache.fresh)
        status, body = await get(replica, "/readyz")
        assert status == 503 and "caches-fresh" in body
        _, metrics = await get(replica, "/metrics")
        assert "graceful_drain_cache_silent_watches_total" in metrics

        sim.faults.remove(silent)
        sim.faults.remove(down)
        async with asyncio.timeout(BOUND):
            await deployments.wait_for(lambda: cache.fresh)
        assert (await get(replica, "/readyz"))[0] == 200
