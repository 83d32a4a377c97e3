"""The informer cache against kubesim: resume after a dropped watch, re-list after 410 Gone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlsplit

import pytest
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig

from graceful_drain.controller.cache.cluster import ClusterCache
from graceful_drain.controller.decision.deadline import KARPENTER_TERMINATION_ANNOTATION
from graceful_drain.controller.decision.model import Enablement
from graceful_drain.kube.informer import Informer
from graceful_drain.kube.timefmt import format_rfc3339
from kubesim.apiserver.audit import AuditRecord
from kubesim.client import KubeClient
from kubesim.sim import KubeSim

from .conftest import DEADLINE, NODECLAIM_CRD, create_pod, create_workload, quick_backoff

pytestmark = pytest.mark.e2e


async def started_cache(sim: KubeSim, **options: object) -> ClusterCache:
    client = AsyncClient(KubeConfig.from_file(str(sim.kubeconfig_path)))
    cache = ClusterCache(client, backoff=quick_backoff, **options)  # type: ignore[arg-type]
    await cache.start()
    async with asyncio.timeout(DEADLINE):
        await cache.wait_synced()
    return cache


@pytest.fixture
async def cache(sim: KubeSim) -> AsyncIterator[ClusterCache]:
    started = await started_cache(sim)
    yield started
    await started.stop()


def pod_informer(cache: ClusterCache) -> Informer[object]:
    [informer] = cache.pods.informers
    return informer  # type: ignore[return-value]


async def until(informer: Informer[object], predicate: object) -> None:
    async with asyncio.timeout(DEADLINE):
        await informer.wait_for(predicate)  # type: ignore[arg-type]


def pod_watch_versions(sim: KubeSim) -> list[str]:
    """resourceVersion of every finished pod watch request, in order."""
    versions = []
    for record in sim.audit.records():
        if record.verb == "watch" and record.resource == "pods":
            query = parse_qs(urlsplit(record.uri).query)
            assert query.get("allowWatchBookmarks") == ["true"]
            versions.append(query.get("resourceVersion", [""])[0])
    return versions


async def test_cache_fills_and_indexes_owners(
    sim: KubeSim, raw: KubeClient, cache: ClusterCache
) -> None:
    workload = await create_workload(sim, raw, "web")
    informer = pod_informer(cache)
    await until(informer, lambda: cache.pods.get("shop", workload.pod_name) is not None)
    [rs_informer] = cache.replicasets.informers
    async with asyncio.timeout(DEADLINE):
        await rs_informer.wait_for(lambda: len(cache.replicasets_of_deployment("shop", "web")) == 1)
    assert [p.name for p in cache.pods_of_replicaset("shop", "web-5d9")] == [workload.pod_name]
    assert cache.sync_status() == {
        "pods": True, "replicasets": True, "deployments": True, "nodes": True,
    }  # fmt: skip


async def test_informer_resumes_after_a_dropped_watch(
    sim: KubeSim, raw: KubeClient, cache: ClusterCache
) -> None:
    informer = pod_informer(cache)
    await until(informer, lambda: informer.stats.watches == 1)
    await create_pod(sim, raw, "before", "shop")
    await until(informer, lambda: cache.pods.get("shop", "before") is not None)
    version_before_drop = informer.resource_version

    sim.store.close_watchers()
    await until(informer, lambda: informer.stats.watches == 2)
    await create_pod(sim, raw, "after", "shop")
    await until(informer, lambda: cache.pods.get("shop", "after") is not None)

    assert informer.stats.lists == 1  # resumed, not re-listed
    assert informer.stats.resumed == 1
    assert informer.stats.gone == 0
    # kubesim audits a watch when it ends: the dropped one asked for bookmarks from the
    # list's version; the informer's version had moved on to the "before" pod since.
    [first_watch] = pod_watch_versions(sim)
    assert first_watch not in ("", "0")
    assert int(version_before_drop or 0) > int(first_watch)


async def test_informer_relists_after_410_gone() -> None:
    async with KubeSim(bookmark_interval=3600) as sim:  # no bookmark may move the version on
        raw = KubeClient(sim.url, sim.admin_token, sim.ca_pem)
        cache = await started_cache(sim, namespaces=["shop"])
        try:
            informer = pod_informer(cache)
            await until(informer, lambda: informer.stats.watches == 1)
            await create_pod(sim, raw, "kept", "shop")
            await until(informer, lambda: cache.pods.get("shop", "kept") is not None)
            # Writes elsewhere move the store's revision past the pod watch's version;
            # forgetting history then makes resuming from it answer 410 Gone.
            await create_pod(sim, raw, "elsewhere", "other")
            sim.store.compact()
            await until(informer, lambda: informer.stats.lists == 2)
            await until(informer, lambda: informer.stats.watches == 3)
            assert informer.stats.gone == 1
            assert cache.pods.get("shop", "kept") is not None
            assert cache.pods.get("other", "elsewhere") is None  # namespaces filter
            await create_pod(sim, raw, "after-relist", "shop")
            await until(informer, lambda: cache.pods.get("shop", "after-relist") is not None)
        finally:
            await cache.stop()
            await raw.close()


async def test_deployments_are_cached_with_the_enabled_annotation_read(
    sim: KubeSim, raw: KubeClient
) -> None:
    enabled = "graceful-drain.stonal.com/enabled"
    workload = await create_workload(sim, raw, "opted-in")
    path = "/apis/apps/v1/namespaces/shop/deployments/opted-in"
    deployment = await raw.get(path)
    deployment["metadata"]["annotations"] = {enabled: "true"}
    await raw.replace(path, deployment)
    await create_workload(sim, raw, "opted-out")
    cache = await started_cache(sim, enabled_annotation=enabled)
    try:
        opted_in, opted_out = (
            cache.deployment("shop", "opted-in"),
            cache.deployment("shop", "opted-out"),
        )
        assert opted_in is not None and opted_in.enablement is Enablement.ON
        assert opted_out is not None and opted_out.enablement is Enablement.ABSENT
        assert cache.pods.get("shop", workload.pod_name) is not None  # synced: listed already
    finally:
        await cache.stop()


async def test_the_node_cache_tells_which_nodes_are_being_drained(
    sim: KubeSim, raw: KubeClient, cache: ClusterCache
) -> None:
    """decision/draining.py's signals as the API server serves them, through the informer;
    a node the cache does not hold counts as being drained."""
    for name in ("stays", "cordoned", "karpenter", "autoscaler"):
        await raw.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                         "metadata": {"name": name}})  # fmt: skip
    await raw.patch("/api/v1/nodes/cordoned", {"spec": {"unschedulable": True}})
    await raw.patch("/api/v1/nodes/karpenter", {"spec": {"taints": [
        {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}})  # fmt: skip
    await raw.patch("/api/v1/nodes/autoscaler", {"spec": {"taints": [
        {"key": "ToBeDeletedByClusterAutoscaler", "value": "1700000000",
         "effect": "NoSchedule"}]}})  # fmt: skip
    [nodes] = cache.nodes.informers
    async with asyncio.timeout(DEADLINE):
        await nodes.wait_for(lambda: all(
            cache.being_drained(n) for n in ("cordoned", "karpenter", "autoscaler")
        ))  # fmt: skip
    assert not cache.being_drained("stays")
    assert cache.being_drained("never-listed")


def nodeclaim_lists(records: list[AuditRecord]) -> list[int]:
    """The status code of every NodeClaim list the controller's cache made, in order."""
    return [r.code for r in records if r.resource == "nodeclaims" and r.verb == "list"]


async def test_karpenter_installed_after_the_controller_is_read_without_a_restart(
    sim: KubeSim, raw: KubeClient
) -> None:
    """No NodeClaims served at start (404: Karpenter not installed yet): the cache asks again
    every `nodeclaims_recheck` seconds, and once Karpenter's CRD is there a NodeClaim's
    termination deadline is known to it (it used to ask once, at start, and never again)."""
    cache = await started_cache(sim, nodeclaims_recheck=0.05)
    try:
        assert cache.nodeclaims is not None
        [informer] = cache.nodeclaims.informers
        async with asyncio.timeout(DEADLINE):  # asked, refused, asked again
            await sim.audit.wait_for(lambda records: nodeclaim_lists(records).count(404) >= 2)
        assert cache.node_deadline("node-k") is None
        await raw.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", NODECLAIM_CRD)
        deadline = "2026-12-06T12:00:30Z"
        await raw.create("/apis/karpenter.sh/v1/nodeclaims", {
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "claim-k",
                         "annotations": {KARPENTER_TERMINATION_ANNOTATION: deadline}},
            "status": {"nodeName": "node-k"},
        })  # fmt: skip
        async with asyncio.timeout(DEADLINE):
            await informer.wait_for(lambda: cache.node_deadline("node-k") is not None)
        assert format_rfc3339(cache.node_deadline("node-k")) == deadline  # type: ignore[arg-type]
        assert 200 in nodeclaim_lists(sim.audit.records())
    finally:
        await cache.stop()
