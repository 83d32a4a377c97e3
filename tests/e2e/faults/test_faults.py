"""The fault suite on kubesim (issue 15): one row per fault, each a drain of a protected pod.

Every row asserts: no eviction of the protected pod admitted after the controller recovered
(and none at all during the faults the controller is meant to absorb), the drain ends well
within the rollout timeout, recovery within the bound docs/reliability.md states, and every
replica ready at the end. The table of all rows is printed at the end of the run (conftest.py)
and copied into docs/reliability.md. Timings are scaled where a row says so.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import ssl
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from bench.objects import eviction_review

from graceful_drain.controller.app import ControllerApp
from graceful_drain.controller.serving.connections import ConnectionGuard
from graceful_drain.controller.serving.webhook import WEBHOOK_PATH
from graceful_drain.controller.settings import ControllerConfig
from graceful_drain.controller.tls.certs import SelfSignedCertificates
from graceful_drain.kube.backoff import Backoff
from kubesim.apiserver.faults import FaultRule
from kubesim.client import resource_path
from kubesim.pki import CertificateAuthority
from kubesim.sim import KubeSim
from tests.e2e.controller.conftest import quick_backoff
from tests.e2e.controller.drain_cluster import DrainCluster, drain_cluster
from tests.e2e.controller.drain_workloads import template_restarted_at
from tests.e2e.controller.installed import CONTROLLER_USER, NAMESPACE, WEBHOOK_CONFIGURATION
from tests.e2e.controller.replica import Replica
from tests.e2e.controller.test_webhook_connections import HEADERS_NEVER_END, trickle
from tests.e2e.faults.suite import ROWS, Context, Fault, FaultRow, evict, readyz, run_fault
from tests.unit.deploy.rendered import SELF_SIGNED, objects, one

pytestmark = pytest.mark.e2e

SECRET = "graceful-drain-webhook-tls"


def informer_of(replica: Replica, resource: str) -> Any:
    [informer] = getattr(replica.app.cache, resource).informers
    return informer


async def template_patched(context: Context) -> None:
    await context.cluster.until_deployment(lambda d: template_restarted_at(d) is not None)


def check(row: FaultRow, *, absorbed: bool) -> None:
    """absorbed: the controller is meant to keep every eviction held through this fault."""
    assert row.survived, row
    assert row.wrongly_allowed_after == 0, row
    if absorbed:
        assert row.wrongly_allowed_during == 0, row


@pytest.fixture
async def cluster(sim: KubeSim, tmp_path: Path) -> Any:
    async with drain_cluster(sim, tmp_path) as running:
        yield running


# --- the API server misbehaves -----------------------------------------------------------------


async def test_api_5xx_burst(cluster: DrainCluster) -> None:
    async def inject(context: Context) -> None:
        deployments = informer_of(context.replicas[0], "deployments")
        errors = deployments.stats.errors
        context.state["rule"] = cluster.sim.faults.add(
            FaultRule(user=CONTROLLER_USER, error_code=503)
        )
        cluster.sim.store.close_watchers()
        async with asyncio.timeout(30):  # four failures in a row: the back-off reaches ~4 s
            await deployments.wait_for(lambda: deployments.stats.errors >= errors + 4)

    async def lift(context: Context) -> None:
        cluster.sim.faults.remove(context.state["rule"])
        context.state["watches"] = informer_of(context.replicas[0], "deployments").stats.watches

    async def recovered(context: Context) -> None:
        # The informer's next attempt after the outage: a watch resumed from where it was.
        deployments = informer_of(context.replicas[0], "deployments")
        await deployments.wait_for(lambda: deployments.stats.watches > context.state["watches"])

    row = await run_fault(cluster, Fault(
        "API 5xx burst (every controller request 503, 4 informer retries)",
        inject, lift, recovered, bound=6.0, app_options={"cache_backoff": Backoff},
        note="real back-off (cap 5 s); a stamp tried during the burst is held (write-deferred)",
    ))  # fmt: skip
    check(row, absorbed=False)


async def test_watches_dropped(cluster: DrainCluster) -> None:
    async def inject(context: Context) -> None:
        context.state["watches"] = {
            r: informer_of(context.replicas[0], r).stats.watches
            for r in ("pods", "replicasets", "deployments")
        }
        cluster.sim.store.close_watchers()

    async def recovered(context: Context) -> None:
        for resource, watches in context.state["watches"].items():
            informer = informer_of(context.replicas[0], resource)
            await informer.wait_for(lambda i=informer, w=watches: i.stats.watches > w)

    row = await run_fault(
        cluster, Fault("watches dropped by the API server", inject, recovered=recovered, bound=5.0)
    )
    check(row, absorbed=True)


async def test_forced_410(cluster: DrainCluster) -> None:
    async def inject(context: Context) -> None:
        deployments = informer_of(context.replicas[0], "deployments")
        context.state["lists"] = deployments.stats.lists
        cluster.sim.store.compact()
        cluster.sim.store.close_watchers()

    async def recovered(context: Context) -> None:
        deployments = informer_of(context.replicas[0], "deployments")
        await deployments.wait_for(
            lambda: deployments.stats.gone >= 1 and deployments.stats.lists > context.state["lists"]
        )

    check(await run_fault(cluster, Fault("history compacted, watches dropped (410 Gone)",
                                         inject, recovered=recovered, bound=5.0)),
          absorbed=True)  # fmt: skip


async def test_half_open_watch(cluster: DrainCluster) -> None:
    cluster.sim.server.bookmark_interval = 0.2  # the real server: one a minute, limit 125 s

    async def inject(context: Context) -> None:
        context.state["rule"] = cluster.sim.faults.add(FaultRule(
            verb="watch", resource="deployments", user=CONTROLLER_USER, silence_watch=True,
        ))  # fmt: skip
        cluster.sim.store.close_watchers(("apps", "deployments"))

    async def lift(context: Context) -> None:
        deployments = informer_of(context.replicas[0], "deployments")
        await deployments.wait_for(lambda: deployments.stats.silent >= 1)
        cluster.sim.faults.remove(context.state["rule"])

    row = await run_fault(cluster, Fault(
        "half-open watch on Deployments (no events, no bookmarks)", inject, lift,
        template_patched, bound=5.0, before_drain=True,
        app_options={"watch_silence_limit": 1.0},
        note="silence limit scaled to 1 s (default 125 s)",
    ))  # fmt: skip
    check(row, absorbed=True)


async def test_slow_stamp_patch(cluster: DrainCluster) -> None:
    async def inject(context: Context) -> None:
        cluster.sim.faults.add(FaultRule(verb="patch", resource="deployments",
                                         user=CONTROLLER_USER, latency_seconds=2.5,
                                         remaining=1))  # fmt: skip

    row = await run_fault(cluster, Fault(
        "restarted-at PATCH answered after 2.5 s", inject, before_drain=True,
        note="the first eviction is held (429), not let through",
    ))  # fmt: skip
    check(row, absorbed=True)


# --- the controller's own objects change under it ---------------------------------------------


async def test_webhook_configuration_re_created(cluster: DrainCluster) -> None:
    shipped = one(objects(SELF_SIGNED), "ValidatingWebhookConfiguration")
    path = resource_path("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations",
                         None)  # fmt: skip

    async def inject(context: Context) -> None:
        # As a GitOps sync or `kubectl replace --force` does it: delete, create as shipped.
        await cluster.admin.delete(f"{path}/{WEBHOOK_CONFIGURATION}")
        await cluster.admin.create(path, shipped)

    async def recovered(context: Context) -> None:
        await cluster.until_ca_bundle_published()
        await context.drain.until_held_after(time.monotonic())

    row = await run_fault(cluster, Fault(
        "webhook configuration re-created without caBundle (delete + create)", inject,
        recovered=recovered, bound=10.0,
        note="until the caBundle is back the API server cannot call the webhook (Ignore)",
    ))  # fmt: skip
    check(row, absorbed=False)


async def test_secrets_re_created_with_two_replicas(cluster: DrainCluster) -> None:
    async def inject(context: Context) -> None:
        context.state["loads"] = [tls_of(r).loads for r in context.replicas]
        deleted = await cluster.kubectl("delete", "secret", SECRET, f"{SECRET}-ca",
                                        "-n", NAMESPACE)  # fmt: skip
        assert deleted.code == 0, deleted.stderr

    async def recovered(context: Context) -> None:
        for replica, loads in zip(context.replicas, context.state["loads"], strict=True):
            tls = tls_of(replica)
            await tls.wait_for_loads(loads + 1)
            await tls.wait_for_ca_bundle(verified=True)
        await cluster.route_to(context.replicas[1])  # the API server reaches the other one

    row = await run_fault(cluster, Fault(
        "certificate Secrets deleted (re-created by a replica), 2 replicas", inject,
        recovered=recovered, bound=10.0, replicas=2,
        app_options={"self_signed_options": {"retire_after": 1.0}},
        note="old CA kept 1 s (default 60 s) after both moved off",
    ))  # fmt: skip
    check(row, absorbed=True)


def tls_of(replica: Replica) -> SelfSignedCertificates:
    tls = replica.app.tls
    assert isinstance(tls, SelfSignedCertificates)
    return tls


# --- replicas come and go ----------------------------------------------------------------------


async def test_leader_failover(cluster: DrainCluster) -> None:
    async def inject(context: Context) -> None:
        leader, other = context.replicas
        await cluster.route_to(other)
        await leader.stop()  # releases the Lease

    async def recovered(context: Context) -> None:
        other = context.replicas[1].app.elector
        assert other is not None
        await other.wait_until_leader()
        await template_patched(context)

    row = await run_fault(cluster, Fault(
        "leader stopped before the drain (Lease released), 2 replicas", inject,
        recovered=recovered, bound=10.0, before_drain=True, replicas=2,
    ))  # fmt: skip
    check(row, absorbed=True)


async def test_crash_mid_drain(cluster: DrainCluster) -> None:
    async def inject(context: Context) -> None:
        crashed, other = context.replicas
        await cluster.route_to(other)
        assert crashed.app.elector is not None
        await crashed.app.elector.abandon()  # no Lease release, as after kill -9
        await crashed.stop()
        context.state["restarted"] = await cluster.start_replica(crashed.pod_name, route=False)

    async def recovered(context: Context) -> None:
        elector = context.state["restarted"].app.elector
        assert elector is not None
        await elector.wait_until_leader()  # its own Lease: no need to wait it out
        context.replicas.append(context.state["restarted"])
        await template_patched(context)

    row = await run_fault(cluster, Fault(
        "leader crashes mid-drain and restarts (same pod name), 2 replicas", inject,
        recovered=recovered, bound=10.0, replicas=2,
        note="in process: stopped without releasing its Lease, as kill -9 leaves it",
    ))  # fmt: skip
    check(row, absorbed=True)


# --- abusive clients on the webhook port --------------------------------------------------------


async def test_slowloris(cluster: DrainCluster) -> None:
    async def inject(context: Context) -> None:
        replica = context.replicas[0]
        context_ = ssl.create_default_context(cadata=tls_of(replica).bundle.ca_bundle_pem.decode())
        context_.check_hostname = False
        context.state["slow"] = [
            asyncio.create_task(trickle(replica.webhook_port, context_, HEADERS_NEVER_END))
            for _ in range(150)
        ]

    async def lift(context: Context) -> None:
        async with asyncio.timeout(30):
            assert all(await asyncio.gather(*context.state["slow"]))

    guard = ConnectionGuard(read_timeout=0.5)
    row = await run_fault(cluster, Fault(
        "slowloris: 150 clients sending headers a byte at a time", inject, lift,
        app_options={"connection_guard": guard},
        note="read deadline scaled to 0.5 s (default 10 s); all 150 closed by the server",
    ))  # fmt: skip
    check(row, absorbed=True)
    assert guard.stats.timed_out >= 150


async def test_random_bodies(cluster: DrainCluster) -> None:
    async def inject(context: Context) -> None:
        replica = context.replicas[0]
        ca = tls_of(replica).bundle.ca_bundle_pem.decode()
        client_context = ssl.create_default_context(cadata=ca)
        client_context.check_hostname = False
        rng = random.Random(15)
        url = f"https://127.0.0.1:{replica.webhook_port}{WEBHOOK_PATH}"
        connector = aiohttp.TCPConnector(ssl=client_context)
        async with aiohttp.ClientSession(connector=connector) as session:
            for _ in range(200):
                body = rng.randbytes(rng.randrange(0, 4096))
                async with session.post(url, data=body) as response:
                    assert response.status == 200
                    review = json.loads(await response.read())
                    assert review["response"]["allowed"] is True

    check(await run_fault(cluster, Fault("200 random bodies posted to the webhook", inject,
                                         note="each answered 200 with an allow review")),
          absorbed=True)  # fmt: skip


# --- cold start with the API server unreachable -------------------------------------------------


async def cold_start_row(cluster: DrainCluster, name: str, env: dict[str, str]) -> FaultRow:
    """Start a replica while every controller request fails; the webhook must answer a pod it
    cannot look up with 429 (CACHE_COLD), then become ready once the API answers."""
    config = await cluster.replica_config("graceful-drain-cold", env)
    outage = cluster.sim.faults.add(FaultRule(user=CONTROLLER_USER, error_code=503))
    app = ControllerApp(config, identity="graceful-drain-cold", cache_backoff=quick_backoff)
    await app.start()
    replica = Replica("graceful-drain-cold", app)
    cluster.replicas.append(replica)
    try:
        await cluster.route_to(replica)
        status = await evict_unknown(cluster)
        cluster.sim.faults.remove(outage)
        loop = asyncio.get_running_loop()
        lifted = loop.time()
        async with asyncio.timeout(10.0):
            await app.cache.wait_synced()
            if isinstance(app.tls, SelfSignedCertificates):
                await app.tls.wait_for_ca_bundle(verified=True)
        recovery = loop.time() - lifted
        survived = await readyz(replica) == 200
    finally:
        cluster.sim.faults.remove(outage)
    row = FaultRow(name, survived, 0 if status == 429 else 1, 0, recovery, 10.0,
                   "webhook answers 429 (cache-cold) before the API answers")  # fmt: skip
    ROWS.append(row)
    return row


async def evict_unknown(cluster: DrainCluster) -> int:
    """An eviction of a pod the controller has never seen: the API server asks the webhook."""
    created = await cluster.create({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "cold", "namespace": "default",
                     "ownerReferences": []},
        "spec": {"nodeName": "node-b", "containers": [{"name": "app", "image": "x"}]},
    })  # fmt: skip
    return await evict(cluster.admin, created["metadata"]["name"])


async def test_cold_start_self_signed(cluster: DrainCluster, tmp_path: Path) -> None:
    first = await cluster.start_replica("graceful-drain-0")  # creates the Secrets
    await first.stop()
    secret = await cluster.kubectl_json("get", "secret", SECRET, "-n", NAMESPACE)
    mount = tmp_path / "webhook-tls"  # what the kubelet projects from the optional volume
    mount.mkdir()
    for key, value in secret["data"].items():
        (mount / key).write_bytes(base64.b64decode(value))
    row = await cold_start_row(cluster, "cold start, API unreachable (--self-signed)",
                               {"GRACEFUL_DRAIN_SELF_SIGNED_MOUNT": str(mount)})  # fmt: skip
    check(row, absorbed=True)


async def test_cold_start_without_the_mount_is_ignored_by_the_api_server(
    cluster: DrainCluster, tmp_path: Path
) -> None:
    """The control row: no mounted certificate, no TLS before the API answers, so the API
    server cannot reach the webhook and admits (failurePolicy: Ignore). Not put in the table:
    it shows what the mount changes."""
    first = await cluster.start_replica("graceful-drain-0")
    await first.stop()
    config = await cluster.replica_config(
        "graceful-drain-cold", {"GRACEFUL_DRAIN_SELF_SIGNED_MOUNT": str(tmp_path / "none")}
    )
    outage = cluster.sim.faults.add(FaultRule(user=CONTROLLER_USER, error_code=503))
    app = ControllerApp(config, identity="graceful-drain-cold", cache_backoff=quick_backoff)
    await app.start()
    cluster.replicas.append(Replica("graceful-drain-cold", app))
    try:
        assert not app.tls.loaded
        await cluster.route_to(cluster.replicas[-1])
        assert await evict_unknown(cluster) == 201
    finally:
        cluster.sim.faults.remove(outage)


async def test_cold_start_tls_files(sim: KubeSim, tmp_path: Path) -> None:
    """The cert-manager mode: the certificate files are there from the start."""
    ca = CertificateAuthority("cold-start-ca")
    pair = ca.issue_server(["127.0.0.1", "localhost"], common_name="graceful-drain")
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    config = ControllerConfig(
        bind_address="127.0.0.1", webhook_port=0, metrics_port=0,
        tls_cert_file=tmp_path / "tls.crt", tls_key_file=tmp_path / "tls.key",
        kubeconfig=sim.kubeconfig_path,
    )  # fmt: skip
    outage = sim.faults.add(FaultRule(error_code=503))  # nothing the controller asks answers
    app = ControllerApp(config, cache_backoff=quick_backoff)
    await app.start()
    try:
        context = ssl.create_default_context(cadata=ca.cert_pem.decode())
        connector = aiohttp.TCPConnector(ssl=context)
        url = f"https://127.0.0.1:{app.webhook_site.port}{WEBHOOK_PATH}"
        review_body = eviction_review("default", "web-1")
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.post(url, json=review_body) as answer,
        ):
            review = await answer.json()
        held = review["response"]["status"]["code"] == 429 and not review["response"]["allowed"]
        sim.faults.remove(outage)
        loop = asyncio.get_running_loop()
        lifted = loop.time()
        async with asyncio.timeout(10.0):
            await app.cache.wait_synced()
        recovery = loop.time() - lifted
        ready = not app.readiness.failing()
    finally:
        sim.faults.remove(outage)
        await app.stop()
    row = FaultRow("cold start, API unreachable (TLS files, cert-manager mode)", ready,
                   0 if held else 1, 0, recovery, 10.0,
                   "webhook answers 429 (cache-cold) before the API answers")  # fmt: skip
    ROWS.append(row)
    check(row, absorbed=True)
