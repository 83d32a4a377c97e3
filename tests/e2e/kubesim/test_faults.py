"""Seeded, deterministic fault injection: latency, error responses, dropped watches."""

from __future__ import annotations

import asyncio

import aiohttp
import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import ConfigMap

from kubesim.apiserver.faults import FaultRule
from kubesim.client import ApiStatusError, KubeClient
from kubesim.sim import KubeSim

pytestmark = pytest.mark.e2e

CMS = "/api/v1/namespaces/default/configmaps"


@pytest.mark.parametrize("code", [500, 503, 429, 504])
async def test_injected_error_reaches_lightkube_as_a_status(
    sim: KubeSim, lk: AsyncClient, code: int
) -> None:
    sim.faults.add(FaultRule(resource="configmaps", verb="list", error_code=code, remaining=1))
    with pytest.raises(ApiError) as err:
        await anext(aiter(lk.list(ConfigMap, namespace="default")))
    assert err.value.status.code == code
    # `remaining=1`: the fault is spent, the next request succeeds.
    assert [cm async for cm in lk.list(ConfigMap, namespace="default")] == []


async def test_faults_match_only_their_route(sim: KubeSim) -> None:
    sim.faults.add(FaultRule(resource="pods", error_code=503))
    api = kubernetes.config.new_client_from_config(config_file=str(sim.kubeconfig_path))
    core = kubernetes.client.CoreV1Api(api)
    try:
        with pytest.raises(ApiException) as err:
            await asyncio.to_thread(core.list_namespaced_pod, "default")
        assert err.value.status == 503
        listed = await asyncio.to_thread(core.list_namespaced_config_map, "default")
        assert listed.items == []
    finally:
        api.close()


async def test_latency_outlasts_a_short_client_timeout(sim: KubeSim, raw: KubeClient) -> None:
    sim.faults.add(FaultRule(resource="configmaps", verb="list", latency_seconds=30))
    with pytest.raises(TimeoutError):
        await raw.request("GET", CMS, request_timeout=0.2)
    # Other routes are not delayed: the same short timeout is enough for them.
    await raw.request("GET", "/api/v1/namespaces/default/secrets", request_timeout=10)


async def test_hang_never_answers(sim: KubeSim, raw: KubeClient) -> None:
    sim.faults.add(FaultRule(resource="pods", hang=True))
    with pytest.raises(TimeoutError):
        await raw.request("GET", "/api/v1/namespaces/default/pods", request_timeout=0.2)


async def _pattern(seed: int) -> list[int]:
    async with KubeSim(seed=seed) as sim:
        sim.faults.add(FaultRule(resource="configmaps", error_code=500, probability=0.5))
        client = KubeClient(sim.url, sim.admin_token, sim.ca_pem)
        codes = []
        try:
            for _ in range(20):
                try:
                    await client.get(CMS)
                    codes.append(200)
                except ApiStatusError as err:
                    codes.append(err.code)
        finally:
            await client.close()
        return codes


async def test_probabilistic_faults_are_deterministic_per_seed() -> None:
    first, again, other = await _pattern(7), await _pattern(7), await _pattern(8)
    assert first == again
    assert set(first) == {200, 500}
    assert first != other


async def test_dropped_watch_ends_the_stream(sim: KubeSim, raw: KubeClient) -> None:
    rv = (await raw.get(CMS))["metadata"]["resourceVersion"]
    started = asyncio.Event()
    events: list[str] = []

    async def consume() -> None:
        async for event in raw.watch(CMS, rv, 60, {"allowWatchBookmarks": "false"}):
            events.append(event["type"])
            started.set()

    task = asyncio.create_task(consume())
    await raw.create(CMS, {"metadata": {"name": "seen"}})
    await asyncio.wait_for(started.wait(), 10)
    sim.store.close_watchers()
    await asyncio.wait_for(task, 10)  # the stream ended without an error
    assert events == ["ADDED"]


async def test_connection_refused_after_stop() -> None:
    sim = KubeSim()
    await sim.start()
    client = KubeClient(sim.url, sim.admin_token, sim.ca_pem)
    await sim.stop()
    try:
        with pytest.raises(aiohttp.ClientConnectionError):
            await client.get(CMS)
    finally:
        await client.close()
