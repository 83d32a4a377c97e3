"""The shipped RBAC is exactly what the controller uses: every request allowed, no grant idle.

One cluster with graceful-drain installed from deploy/ (drain_cluster.py) goes through every
path that needs a permission, then the audit log of the controller's ServiceAccount is
compared with what its Roles and ClusterRoles grant, as (API group, resource, verb):
- a first install: the certificate Secret created, the caBundle written, the Lease taken;
- a restart over a Secret gone bad: the Secret renewed (update), the Lease taken over;
- two eviction dances on the same Deployment: the stamp, the rollout, events, and the second
  GracefulDrainStarted folded into the first Event (patch);
- a stamp against a stale cache: 409, then a live read of the Deployment;
- an eviction of a pod the cache has not seen yet: a live read of the pod.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.controller.tls.certs import SelfSignedCertificates
from graceful_drain.controller.writes.events import DRAIN_STARTED
from graceful_drain.kube.informer import Informer as ControllerInformer
from kubesim.apiserver.faults import FaultRule
from kubesim.client import JSON_PATCH, ApiStatusError, KubeClient, resource_path
from kubesim.drain import KubectlDrain
from kubesim.sim import KubeSim
from kubesim.watchlog import watch_until
from tests.e2e.watching import annotations_of, is_ready

from .conftest import NODECLAIM_CRD
from .drain_cluster import DrainCluster, drain_cluster, forbidden
from .drain_workloads import pod_on
from .installed import BOUND, CONTROLLER_USER, NAMESPACE, SERVICE_ACCOUNT
from .rbac_usage import describe, granted_to, used_by
from .replica import Replica

pytestmark = pytest.mark.e2e

WEB = "/apis/apps/v1/namespaces/default/deployments/web"


async def drain_with_retries(cluster: DrainCluster, node: str) -> None:
    """kubectl drain's behaviour, in process, retrying refused evictions every 0.2s."""
    drain = KubectlDrain(cluster.admin, ignore_daemonsets=True, delete_emptydir_data=True,
                         retry_interval=0.2, poll_interval=0.1)  # fmt: skip
    cluster.recorder.mark_drain_started(node, "kubectl")
    async with asyncio.timeout(BOUND):
        result = await drain.drain(node)
    cluster.recorder.mark_drain_finished(result)
    assert result.drained, result.error


async def settled(cluster: DrainCluster) -> None:
    """After a drain: the stamp removed, and web down to one Ready pod."""
    await cluster.until_unstamped()
    await watch_until(
        cluster.admin, "v1", "pods", "Pod", "default",
        lambda items: [is_ready(p) for p in items if p["metadata"]["labels"].get("app") == "web"]
        == [True],
    )  # fmt: skip


async def evict(admin: KubeClient, name: str) -> int:
    """POST an Eviction; the HTTP status the API server answered."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name, "namespace": "default"}}  # fmt: skip
    try:
        await admin.create(resource_path("v1", "pods", "default", name, "eviction"), body)
    except ApiStatusError as error:
        return error.code
    return 201


async def freeze(sim: KubeSim, informer: ControllerInformer[Any], resource: str) -> FaultRule:
    """Leave one of the controller's informers behind: its next watch hangs."""
    group = "apps" if resource != "pods" else ""
    rule = sim.faults.add(FaultRule(verb="watch", resource=resource, user=CONTROLLER_USER,
                                    hang=True))  # fmt: skip
    watches = informer.stats.watches
    sim.store.close_watchers((group, resource))
    async with asyncio.timeout(BOUND):
        await informer.wait_for(lambda: informer.stats.watches > watches)
    return rule


async def install_then_restart_over_a_bad_secret(cluster: DrainCluster) -> Replica:
    first = await cluster.start_replica("graceful-drain-0")
    secret_name = first.app.config.self_signed_secret
    await first.stop()  # hands the Lease over
    path = resource_path("v1", "secrets", NAMESPACE, secret_name)
    await cluster.admin.patch(path, [{"op": "replace", "path": "/data", "value": {}}],
                              JSON_PATCH)  # fmt: skip
    return await cluster.start_replica("graceful-drain-1")


async def two_dances(cluster: DrainCluster) -> None:
    await cluster.create_web()
    await drain_with_retries(cluster, "node-a")
    await settled(cluster)
    await cluster.admin.patch("/api/v1/nodes/node-a", {"spec": {"unschedulable": False}})
    await drain_with_retries(cluster, "node-b")
    await settled(cluster)
    # The second GracefulDrainStarted is folded into the first Event (a patch). More than two
    # when a stamp falls in the same second as the previous drain's: restarted-at has second
    # precision, so the reconciler finds it already copied and complete, removes it, and the
    # next retry stamps again.
    [started] = await cluster.events(DRAIN_STARTED)
    assert started["count"] >= 2


async def stamp_against_a_stale_cache(cluster: DrainCluster, replica: Replica) -> None:
    [deployments] = replica.app.cache.deployments.informers
    await freeze(cluster.sim, deployments, "deployments")
    current = await cluster.admin.get(WEB)
    current["metadata"].setdefault("labels", {})["team"] = "payments"
    await cluster.admin.replace(WEB, current)
    [pod] = await cluster.pods("web")
    assert await evict(cluster.admin, pod["metadata"]["name"]) == 429
    patches = [
        r.code
        for r in cluster.controller_requests()
        if r.verb == "patch" and r.resource == "deployments" and r.name == "web"
    ]
    assert patches[-2:] == [409, 200]
    assert RESTARTED_AT_ANNOTATION in annotations_of(await cluster.admin.get(WEB))


async def evict_a_pod_the_cache_has_not_seen(cluster: DrainCluster, replica: Replica) -> None:
    [pods] = replica.app.cache.pods.informers
    await freeze(cluster.sim, pods, "pods")
    await cluster.create(pod_on("node-a", "loner"))
    await cluster.until_pods_ready(["loner"])
    assert replica.app.cache.pods.get("default", "loner") is None
    assert await evict(cluster.admin, "loner") == 201
    reads = [r.code for r in cluster.controller_requests()
             if r.verb == "get" and r.resource == "pods" and r.name == "loner"]  # fmt: skip
    assert reads == [200]


async def resolve_an_owner_before_the_caches_synced(
    cluster: DrainCluster, replica: Replica
) -> None:
    """A replica whose ReplicaSet and Deployment lists hang serves the webhook cold: it reads
    the evicted pod's ReplicaSet and Deployment live (`cache-cold` if it cannot)."""
    rules = [
        cluster.sim.faults.add(
            FaultRule(verb="list", resource=resource, user=CONTROLLER_USER, hang=True)
        )
        for resource in ("replicasets", "deployments")
    ]
    cold = await cluster.start_replica("graceful-drain-cold", wait_synced=False)
    try:
        assert not cold.app.cache.synced
        [pod] = await cluster.pods("web")
        assert await evict(cluster.admin, pod["metadata"]["name"]) == 429
        reads = [r.code for r in cluster.controller_requests()
                 if r.verb == "get" and r.resource == "replicasets"]  # fmt: skip
        assert reads and set(reads) == {200}
    finally:
        for rule in rules:
            cluster.sim.faults.remove(rule)
        await cold.stop()
        await cluster.route_to(replica)


async def end_the_configuration_watch(sim: KubeSim, replica: Replica) -> None:
    """A watch is audited when it ends; the caBundle keeper's lasts the whole test."""
    tls = replica.app.tls
    assert isinstance(tls, SelfSignedCertificates)
    [informer] = [i for i in tls.informers if i.name.startswith("validatingwebhook")]
    watches = informer.stats.watches
    sim.store.close_watchers(("admissionregistration.k8s.io", "validatingwebhookconfigurations"))
    async with asyncio.timeout(BOUND):
        await informer.wait_for(lambda: informer.stats.watches > watches)


async def end_the_nodeclaims_watch(sim: KubeSim, replica: Replica) -> None:
    """Karpenter's NodeClaims are served here: the controller lists and watches them (a watch
    is audited when it ends)."""
    assert replica.app.cache.nodeclaims is not None
    [informer] = replica.app.cache.nodeclaims.informers
    async with asyncio.timeout(BOUND):
        await informer.wait_for(lambda: informer.stats.watches > 0)
    watches = informer.stats.watches
    sim.store.close_watchers(("karpenter.sh", "nodeclaims"))
    async with asyncio.timeout(BOUND):
        await informer.wait_for(lambda: informer.stats.watches > watches)


async def applied_rbac(cluster: DrainCluster) -> list[dict[str, Any]]:
    listed = await cluster.kubectl_json(
        "get", "clusterroles,clusterrolebindings,roles,rolebindings", "--all-namespaces"
    )
    items: list[dict[str, Any]] = listed["items"]
    return items


async def test_the_shipped_rbac_grants_exactly_what_the_controller_uses(
    sim: KubeSim, tmp_path: Path
) -> None:
    async with drain_cluster(sim, tmp_path) as cluster:
        await cluster.admin.create(
            resource_path("apiextensions.k8s.io/v1", "customresourcedefinitions", None),
            NODECLAIM_CRD,
        )
        replica = await install_then_restart_over_a_bad_secret(cluster)
        await two_dances(cluster)
        await stamp_against_a_stale_cache(cluster, replica)
        await evict_a_pod_the_cache_has_not_seen(cluster, replica)
        await resolve_an_owner_before_the_caches_synced(cluster, replica)
        await end_the_configuration_watch(cluster.sim, replica)
        await end_the_nodeclaims_watch(cluster.sim, replica)

        requests = cluster.controller_requests()
        granted = granted_to(await applied_rbac(cluster), NAMESPACE, SERVICE_ACCOUNT)
        used = used_by(requests)

        assert forbidden(requests) == []
        assert describe(used - granted) == []
        assert describe(granted - used) == []  # nothing granted that no path needs
