"""The whole controller process on kubesim: webhook stamp -> reconciler rollout -> events,
`--leader-elect`, and `--self-signed`.

No Deployment controller runs here: the test writes the Deployment's status when it wants
the rollout to be complete.
"""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
import subprocess
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from bench.objects import eviction_review
from lightkube import AsyncClient
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event, Secret

from graceful_drain.annotations import COMPLETED_AT_ANNOTATION, RESTARTED_AT_ANNOTATION
from graceful_drain.controller.app import ControllerApp
from graceful_drain.controller.decision.model import DeploymentInfo
from graceful_drain.controller.serving.webhook import WEBHOOK_PATH
from graceful_drain.controller.writes.events import DRAIN_COMPLETED, DRAIN_STARTED, DRAIN_WAITING
from graceful_drain.kube.events import REPORTING_CONTROLLER
from kubesim.client import KubeClient
from kubesim.sim import KubeSim

from .conftest import (
    DEADLINE,
    WebhookCerts,
    controller_config,
    create_workload,
    get_health,
    post_review,
    quick_backoff,
    running_controller,
)

pytestmark = pytest.mark.e2e

NS = "shop"


async def wait_until(app: ControllerApp, predicate: Callable[[DeploymentInfo | None], bool],
                     name: str = "web") -> None:  # fmt: skip
    """Until the app's own cache shows the Deployment in the state `predicate` accepts."""
    (informer,) = app.cache.deployments.informers
    async with asyncio.timeout(DEADLINE):
        await informer.wait_for(lambda: predicate(app.cache.deployment(NS, name)))


async def wait_for_event(client: AsyncClient, reason: str, name: str = "web") -> dict[str, Any]:
    async with asyncio.timeout(DEADLINE):
        async for _, event in client.watch(
            Event, namespace=NS, fields={"involvedObject.name": name}
        ):
            raw: dict[str, Any] = event.to_dict()
            if raw.get("reason") == reason:
                return raw
    raise AssertionError("the watch ended")  # pragma: no cover


async def complete_rollout(raw: KubeClient, name: str = "web") -> None:
    """Play the Deployment controller at the end of the rollout."""
    path = f"/apis/apps/v1/namespaces/{NS}/deployments/{name}"
    current = await raw.get(path)
    await raw.replace(f"{path}/status", {**current, "status": {
        "observedGeneration": current["metadata"]["generation"], "replicas": 1,
        "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1,
    }})  # fmt: skip


async def describe(sim: KubeSim, *args: str) -> str:
    env = {**os.environ, "KUBECONFIG": str(sim.kubeconfig_path)}
    result = await asyncio.to_thread(
        subprocess.run, ["kubectl", "describe", *args], capture_output=True, text=True, env=env,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture
async def app(sim: KubeSim, certs: WebhookCerts) -> AsyncIterator[ControllerApp]:
    async with running_controller(sim, certs, namespaces=(NS,)) as running:
        async with asyncio.timeout(DEADLINE):
            await running.cache.wait_synced()
        yield running


async def test_eviction_to_completed_rollout_through_the_whole_process(
    sim: KubeSim,
    app: ControllerApp,
    https: aiohttp.ClientSession,
    raw: KubeClient,
    lk: AsyncClient,
) -> None:
    workload = await create_workload(sim, raw, "web", namespace=NS)
    await wait_until(app, lambda d: d is not None)

    status, first = await post_review(https, app, eviction_review(NS, workload.pod_name))
    assert (status, first["response"]["status"]["code"]) == (200, 429)
    started = await wait_for_event(lk, DRAIN_STARTED)
    await wait_until(app, lambda d: d is not None and d.template_restarted_at is not None)
    stamped = app.cache.deployment(NS, "web")
    assert stamped is not None and stamped.template_restarted_at == stamped.restarted_at_raw

    _, second = await post_review(https, app, eviction_review(NS, workload.pod_name))
    assert second["response"]["status"]["code"] == 429  # rollout in progress
    waiting = await wait_for_event(lk, DRAIN_WAITING)

    await complete_rollout(raw)
    await wait_until(app, lambda d: d is not None and d.completed_at_raw is not None)
    completed = await wait_for_event(lk, DRAIN_COMPLETED)
    text = await describe(sim, "deployment", "web", "-n", NS)

    assert f"pod {workload.pod_name} can leave node node-a" in started["message"]
    assert "held until the replacement is Ready" in waiting["message"]
    assert completed["reportingInstance"] == app.identity
    for reason in (DRAIN_STARTED, DRAIN_WAITING, DRAIN_COMPLETED):
        assert reason in text
    assert REPORTING_CONTROLLER in text
    exposition = app.metrics.exposition().decode()
    assert "graceful_drain_rollouts_completed_total 1.0" in exposition
    assert "graceful_drain_drains_in_progress 0.0" in exposition
    deployment = await lk.get(Deployment, "web", namespace=NS)
    # Kept, with completed-at, for the replaced pod's grace period (30s by default): the
    # evidence its termination-cause detector reads (docs/decisions.md, "Reconciler").
    annotations = deployment.metadata.annotations or {}
    assert annotations[RESTARTED_AT_ANNOTATION] == stamped.restarted_at_raw
    assert COMPLETED_AT_ANNOTATION in annotations
    assert deployment.metadata.generation == 2  # exactly one template change


async def test_with_leader_election_one_replica_reconciles_and_every_replica_serves(
    sim: KubeSim, certs: WebhookCerts, https: aiohttp.ClientSession, raw: KubeClient,
    lk: AsyncClient,
) -> None:  # fmt: skip
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "graceful-drain"}})
    config = controller_config(sim, certs, namespaces=(NS,), leader_elect=True,
                               controller_namespace="graceful-drain")  # fmt: skip
    apps = [
        ControllerApp(config, cache_backoff=quick_backoff, identity=f"replica-{index}")
        for index in range(2)
    ]
    started: list[ControllerApp] = []
    try:
        for app in apps:  # one after the other, so that replica-0 surely leads
            await app.start()
            started.append(app)
            assert app.elector is not None
            async with asyncio.timeout(DEADLINE):
                await app.cache.wait_synced()
                if app is apps[0]:
                    await app.elector.wait_until_leader()
        lease = await lk.get(Lease, "graceful-drain", namespace="graceful-drain")
        assert lease.spec.holderIdentity == "replica-0"
        assert apps[0].reconciler.running and not apps[1].reconciler.running
        for app in apps:
            assert await get_health(https, app, "/readyz") == 200

        workload = await create_workload(sim, raw, "web", namespace=NS)
        await wait_until(apps[1], lambda d: d is not None)
        _, answer = await post_review(https, apps[1], eviction_review(NS, workload.pod_name))
        assert answer["response"]["status"]["code"] == 429  # the follower's webhook stamps
        await wait_until(apps[1], lambda d: d is not None and d.template_restarted_at is not None)
    finally:
        for app in reversed(started):
            await app.stop()
    deployment = await lk.get(Deployment, "web", namespace=NS)
    assert deployment.metadata.generation == 2


async def test_self_signed_controller_publishes_its_ca_and_serves_with_it(
    sim: KubeSim, certs: WebhookCerts, lk: AsyncClient
) -> None:
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "graceful-drain"}})
    sim.create({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "graceful-drain"},
        "webhooks": [{
            "name": "evictions.graceful-drain.stonal.com",
            "clientConfig": {"service": {"namespace": "graceful-drain",
                                         "name": "graceful-drain-webhook", "path": WEBHOOK_PATH}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods/eviction"]}],
            "failurePolicy": "Ignore", "sideEffects": "NoneOnDryRun", "timeoutSeconds": 5,
            "admissionReviewVersions": ["v1"],
        }],
    })  # fmt: skip
    self_signed: dict[str, Any] = {"tls_cert_file": None, "tls_key_file": None, "self_signed": True,
                   "controller_namespace": "graceful-drain"}  # fmt: skip
    async with running_controller(sim, certs, **self_signed) as app:
        async with asyncio.timeout(DEADLINE):
            await app.cache.wait_synced()
        secret = await lk.get(Secret, "graceful-drain-webhook-tls", namespace="graceful-drain")
        assert secret.data is not None
        ca_pem = base64.b64decode(secret.data["ca.crt"]).decode()
        context = ssl.create_default_context(cadata=ca_pem)
        connector = aiohttp.TCPConnector(ssl=context, force_close=True)
        async with aiohttp.ClientSession(connector=connector) as session:
            url = f"https://127.0.0.1:{app.webhook_site.port}{WEBHOOK_PATH}"
            async with session.post(
                url, json=eviction_review(NS, "gone"),
                server_hostname="graceful-drain-webhook.graceful-drain.svc",
            ) as response:  # fmt: skip
                answer = await response.json()
            async with session.get(f"http://127.0.0.1:{app.health_site.port}/readyz") as ready:
                assert ready.status == 200
        configuration = await lk.get(ValidatingWebhookConfiguration, "graceful-drain")

    assert answer["response"]["allowed"] is True  # the pod does not exist
    bundles = [hook.clientConfig.caBundle for hook in configuration.webhooks or []]
    assert bundles == [secret.data["ca.crt"]]
