"""The webhook over real TLS, backed by an informer cache of kubesim."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from typing import Any, cast

import aiohttp
import pytest
from bench.objects import eviction_review

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.controller.app import ControllerApp
from graceful_drain.controller.decision.table import Protect
from graceful_drain.controller.serving.webhook import WEBHOOK_PATH
from graceful_drain.kube.timefmt import parse_rfc3339
from kubesim.apiserver.faults import FaultRule
from kubesim.client import KubeClient
from kubesim.sim import KubeSim

from .conftest import (
    DEADLINE,
    WebhookCerts,
    Workload,
    create_pod,
    create_workload,
    get_health,
    post_review,
    running_controller,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
async def controller(sim: KubeSim, certs: WebhookCerts) -> AsyncIterator[ControllerApp]:
    async with running_controller(sim, certs) as app:
        async with asyncio.timeout(DEADLINE):
            await app.cache.wait_synced()
        yield app


async def until_cached(app: ControllerApp, workload: Workload) -> None:
    """The cache holds the workload's objects as last written."""
    namespace = workload.namespace
    name = workload.deployment["metadata"]["name"]
    version = workload.deployment["metadata"]["resourceVersion"]
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in workload.pod["status"].get("conditions", [])
    )
    async with asyncio.timeout(DEADLINE):
        [deployments] = app.cache.deployments.informers
        await deployments.wait_for(
            lambda: (
                getattr(app.cache.deployment(namespace, name), "resource_version", None) == version
            )
        )
        if workload.replicaset is not None:
            rs_name = workload.replicaset["metadata"]["name"]
            [replicasets] = app.cache.replicasets.informers
            await replicasets.wait_for(lambda: app.cache.replicaset(namespace, rs_name) is not None)
        [pods] = app.cache.pods.informers
        await pods.wait_for(
            lambda: (
                getattr(app.cache.pods.get(namespace, workload.pod_name), "ready", None) == ready
            )
        )


def reason_text(response: dict[str, Any]) -> str:
    return str(response.get("status", {}).get("message") or response.get("warnings"))


def decisions(app: ControllerApp, allowed: bool, reason: str) -> float:
    value = app.metrics.registry.get_sample_value(
        "graceful_drain_decisions_total",
        {"allowed": "true" if allowed else "false", "reason": reason},
    )
    return value or 0.0


# --- allow rows -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"replicas": 2, "ready_replicas": 2}, "replicas-not-one"),
        ({"ready_replicas": 2}, "surge-ready"),
        ({"pod_ready": False}, "pod-not-ready"),
    ],
)
async def test_allow_rows_for_deployment_pods(
    sim: KubeSim,
    raw: KubeClient,
    certs: WebhookCerts,
    https: aiohttp.ClientSession,
    options: dict[str, Any],
    reason: str,
) -> None:
    """v2's rows (`--protect=single-replica`): the status's replica counts decide. The v3
    rule reads the pods and their nodes instead (test_last_ready_real.py)."""
    async with running_controller(sim, certs, protect=Protect.SINGLE_REPLICA) as controller:
        async with asyncio.timeout(DEADLINE):
            await controller.cache.wait_synced()
        await _allow_row(sim, raw, controller, https, options, reason)


async def _allow_row(
    sim: KubeSim, raw: KubeClient, controller: ControllerApp, https: aiohttp.ClientSession,
    options: dict[str, Any], reason: str,
) -> None:  # fmt: skip
    workload = await create_workload(sim, raw, "web", **options)
    await until_cached(controller, workload)
    if reason == "surge-ready":  # the replacement the status counts
        await surge_pod(sim, raw, controller, workload)
    status, review = await post_review(
        https, controller, eviction_review(workload.namespace, workload.pod_name)
    )
    assert status == 200
    assert review["response"]["allowed"] is True
    assert decisions(controller, True, reason) == 1
    deployment = sim.get("apps/v1", "Deployment", "web", workload.namespace)
    assert deployment is not None
    assert RESTARTED_AT_ANNOTATION not in deployment["metadata"].get("annotations", {})


async def surge_pod(sim: KubeSim, raw: KubeClient, app: ControllerApp, workload: Workload) -> None:
    """A second Ready pod of the workload's ReplicaSet, once the cache holds it."""
    assert workload.replicaset is not None
    name = f"{workload.pod_name}-surge"
    await create_pod(sim, raw, name, workload.namespace, owner=workload.replicaset,
                     labels=workload.pod["metadata"]["labels"])  # fmt: skip
    [pods] = app.cache.pods.informers
    async with asyncio.timeout(DEADLINE):
        await pods.wait_for(
            lambda: getattr(app.cache.pods.get(workload.namespace, name), "ready", False)
        )


async def test_a_status_still_counting_a_pod_that_is_gone_does_not_let_the_last_one_go(
    sim: KubeSim, raw: KubeClient, controller: ControllerApp, https: aiohttp.ClientSession
) -> None:
    """Right after a rollout, the Deployment's status may still count the old pod (its
    controller has not synced since the old ReplicaSet's pods went): readyReplicas 2 with one
    Ready pod left. Evicting that pod would leave none: it is held, and a rollout requested."""
    workload = await create_workload(sim, raw, "web", ready_replicas=2)
    await until_cached(controller, workload)
    status, review = await post_review(
        https, controller, eviction_review(workload.namespace, workload.pod_name)
    )
    assert status == 200
    assert review["response"]["allowed"] is False
    assert review["response"]["status"]["code"] == 429
    assert decisions(controller, False, "rollout-requested") == 1
    assert decisions(controller, True, "surge-ready") == 0


async def test_bare_pod_and_dry_run_and_gone_pod_are_allowed(
    sim: KubeSim, raw: KubeClient, controller: ControllerApp, https: aiohttp.ClientSession
) -> None:
    await create_pod(sim, raw, "bare", "shop")
    [pods] = controller.cache.pods.informers
    async with asyncio.timeout(DEADLINE):
        await pods.wait_for(lambda: controller.cache.pods.get("shop", "bare") is not None)
    for review, reason in [
        (eviction_review("shop", "bare"), "no-deployment"),
        (eviction_review("shop", "bare", dry_run=True), "dry-run"),
        (eviction_review("shop", "never-existed"), "pod-gone"),  # the live GET says 404
    ]:
        status, answer = await post_review(https, controller, review)
        assert status == 200
        assert answer["response"] == {
            "uid": review["request"]["uid"], "allowed": True,
        } | ({"warnings": answer["response"]["warnings"]} if "warnings" in answer["response"]
             else {})  # fmt: skip
        assert decisions(controller, True, reason) == 1, reason


# --- the stamp (ROLLOUT_REQUESTED) ------------------------------------------------------------


async def test_singleton_gets_stamped_and_429(
    sim: KubeSim, raw: KubeClient, controller: ControllerApp, https: aiohttp.ClientSession
) -> None:
    workload = await create_workload(sim, raw, "checkout")
    await until_cached(controller, workload)
    status, review = await post_review(
        https, controller, eviction_review(workload.namespace, workload.pod_name)
    )
    assert status == 200
    response = review["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 429
    assert response["status"]["reason"] == "TooManyRequests"
    assert "shop/checkout" in response["status"]["message"]
    deployment = sim.get("apps/v1", "Deployment", "checkout", "shop")
    assert deployment is not None
    stamped = deployment["metadata"]["annotations"][RESTARTED_AT_ANNOTATION]
    assert parse_rfc3339(stamped) is not None
    assert decisions(controller, False, "rollout-requested") == 1
    assert (
        controller.metrics.registry.get_sample_value("graceful_drain_rollouts_started_total") == 1
    )

    # The retry, whether or not the cache has seen the stamp yet, is held: ROLLOUT_IN_PROGRESS
    # (or a 409 on a second stamp, re-read, ROLLOUT_IN_PROGRESS).
    status, again = await post_review(
        https, controller, eviction_review(workload.namespace, workload.pod_name)
    )
    assert again["response"]["allowed"] is False
    assert decisions(controller, False, "rollout-in-progress") == 1
    deployment = sim.get("apps/v1", "Deployment", "checkout", "shop")
    assert deployment is not None
    assert deployment["metadata"]["annotations"][RESTARTED_AT_ANNOTATION] == stamped


async def test_stale_cache_stamp_conflicts_then_rereads_and_stamps(
    sim: KubeSim, raw: KubeClient, controller: ControllerApp, https: aiohttp.ClientSession
) -> None:
    workload = await create_workload(sim, raw, "stale")
    await until_cached(controller, workload)
    # Freeze the Deployment informer: its next watch hangs; then change the Deployment.
    sim.faults.add(FaultRule(verb="watch", resource="deployments", hang=True))
    [deployments] = controller.cache.deployments.informers
    watches = deployments.stats.watches
    sim.store.close_watchers(("apps", "deployments"))
    async with asyncio.timeout(DEADLINE):
        await deployments.wait_for(lambda: deployments.stats.watches > watches)
    path = "/apis/apps/v1/namespaces/shop/deployments/stale"
    current = await raw.get(path)
    current["metadata"].setdefault("labels", {})["team"] = "payments"
    changed = await raw.replace(path, current)
    cached = controller.cache.deployment("shop", "stale")
    assert cached is not None
    assert cached.resource_version != changed["metadata"]["resourceVersion"]

    review = eviction_review("shop", workload.pod_name)
    status, answer = await post_review(https, controller, review)
    assert status == 200
    assert answer["response"]["allowed"] is False
    assert decisions(controller, False, "rollout-requested") == 1
    stamped = sim.get("apps/v1", "Deployment", "stale", "shop")
    assert stamped is not None
    assert RESTARTED_AT_ANNOTATION in stamped["metadata"]["annotations"]
    assert stamped["metadata"]["labels"]["team"] == "payments"  # the stamp kept the change
    patches = [r for r in sim.audit.records() if r.verb == "patch" and r.name == "stale"]
    assert [r.code for r in patches] == [409, 200]


# --- cold cache (CACHE_COLD) and readiness ----------------------------------------------------


async def test_cold_cache_answers_429_while_the_api_fails_then_becomes_ready(
    sim: KubeSim, raw: KubeClient, certs: WebhookCerts, https: aiohttp.ClientSession
) -> None:
    workload = await create_workload(sim, raw, "cold")
    pods_down = [
        sim.faults.add(FaultRule(verb="list", resource="pods", error_code=503)),
        sim.faults.add(FaultRule(verb="get", resource="pods", error_code=503)),
    ]
    async with running_controller(sim, certs) as app:
        [pods] = app.cache.pods.informers
        async with asyncio.timeout(DEADLINE):
            await pods.wait_for(lambda: pods.stats.errors >= 1)
        assert await get_health(https, app, "/healthz") == 200
        assert await get_health(https, app, "/readyz") == 503

        status, review = await post_review(
            https, app, eviction_review(workload.namespace, workload.pod_name)
        )
        assert status == 200
        response = review["response"]
        assert response["allowed"] is False
        assert response["status"]["code"] == 429
        assert "503" in response["status"]["message"]
        assert decisions(app, False, "cache-cold") == 1

        for rule in pods_down:
            sim.faults.remove(rule)
        async with asyncio.timeout(DEADLINE):
            await app.cache.wait_synced()
        assert await get_health(https, app, "/readyz") == 200
        metrics = await _metrics(https, app)
        assert 'graceful_drain_cache_synced{resource="pods"} 1.0' in metrics
        assert 'graceful_drain_decisions_total{allowed="false",reason="cache-cold"} 1.0' in metrics


async def test_readyz_fails_once_shutdown_begins(
    sim: KubeSim, certs: WebhookCerts, https: aiohttp.ClientSession
) -> None:
    async with running_controller(sim, certs) as app:
        async with asyncio.timeout(DEADLINE):
            await app.cache.wait_synced()
        assert await get_health(https, app, "/readyz") == 200
        app.readiness.shutting_down = True
        assert await get_health(https, app, "/readyz") == 503


async def _metrics(session: aiohttp.ClientSession, app: ControllerApp) -> str:
    async with session.get(f"http://127.0.0.1:{app.health_site.port}/metrics") as resp:
        assert resp.status == 200
        return await resp.text()


# --- malformed requests -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[]",
        b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
        b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",'
        b' "request": {"uid": "u"}}',
        b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",'
        b' "request": {"uid": "u", "operation": 7}}',
        b"\xff\xfe\x00",
        b"[" * 100_000,
        b" " * (2 << 20),  # beyond the 1 MiB the handler reads
    ],
    ids=lambda body: repr(body[:40]),
)
async def test_malformed_bodies_get_200_and_a_valid_review(
    controller: ControllerApp, https: aiohttp.ClientSession, body: bytes
) -> None:
    status, review = await post_review(https, controller, body)
    assert status == 200
    assert review["apiVersion"] == "admission.k8s.io/v1"
    assert review["kind"] == "AdmissionReview"
    assert review["response"]["allowed"] is True
    assert isinstance(review["response"]["uid"], str)


async def test_only_a_post_on_the_webhook_path_is_reviewed(
    controller: ControllerApp, https: aiohttp.ClientSession
) -> None:
    """The site is aiohttp's low-level server: it answers elsewhere as a router would."""
    base = f"https://127.0.0.1:{controller.webhook_site.port}"
    async with https.get(base + WEBHOOK_PATH) as resp:
        assert (resp.status, resp.headers.get("Allow")) == (405, "POST")
    async with https.post(base + "/validate", data=b"{}") as resp:
        assert resp.status == 404
    status, review = await post_review(https, controller, b"{}")  # and the connection still serves
    assert status == 200 and review["response"]["allowed"] is True


# --- TLS hot reload ---------------------------------------------------------------------------


async def _served_common_name(app: ControllerApp, certs: WebhookCerts) -> str:
    _, writer = await asyncio.open_connection(
        "127.0.0.1", app.webhook_site.port, ssl=certs.client_context(),
        server_hostname="127.0.0.1",
    )  # fmt: skip
    try:
        ssl_object = writer.get_extra_info("ssl_object")
        assert isinstance(ssl_object, ssl.SSLObject)
        peer = ssl_object.getpeercert()
        assert peer is not None
        subject = cast(tuple[tuple[tuple[str, str], ...], ...], peer["subject"])
        names = [value for rdn in subject for key, value in rdn if key == "commonName"]
        return str(names[0])
    finally:
        writer.close()


async def test_a_new_certificate_is_served_after_reload(sim: KubeSim, certs: WebhookCerts) -> None:
    async with running_controller(sim, certs) as app:
        assert await _served_common_name(app, certs) == "graceful-drain-1"
        assert app.tls.loaded
        certs.issue("graceful-drain-2")
        assert app.tls.reload_if_changed()  # type: ignore[attr-defined]
        assert await _served_common_name(app, certs) == "graceful-drain-2"
        assert not app.tls.reload_if_changed()  # type: ignore[attr-defined]

        certs.key_file.write_bytes(b"half-written")  # a broken pair keeps the last good one
        assert not app.tls.reload_if_changed()  # type: ignore[attr-defined]
        assert await _served_common_name(app, certs) == "graceful-drain-2"


# --- NOT_EVICTION, INVALID_NAME: checked before any lookup ------------------------------------


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"kind": {"group": "policy", "version": "v1", "kind": "DeleteOptions"}}, "not-eviction"),
        ({"kind": {"group": "", "version": "v1", "kind": "Pod"}}, "not-eviction"),
        ({"name": "web-5d9-abcde/status"}, "invalid-name"),
        ({"name": "../web-5d9-abcde"}, "invalid-name"),
    ],
    ids=["DeleteOptions", "core Pod", "slash", "dot-dot"],
)
async def test_a_review_of_another_kind_or_an_invalid_name_is_allowed_without_a_lookup(
    sim: KubeSim,
    raw: KubeClient,
    controller: ControllerApp,
    https: aiohttp.ClientSession,
    change: dict[str, Any],
    reason: str,
) -> None:
    """A protected, Ready singleton is stamped and held (ROLLOUT_REQUESTED) by a real
    eviction of its pod; a review of any other kind, or naming no valid pod, is let through."""
    workload = await create_workload(sim, raw, "web")
    await until_cached(controller, workload)
    review = eviction_review(workload.namespace, workload.pod_name)
    review["request"].update(change)
    reads_before = [r for r in sim.audit.records() if r.resource == "pods" and r.verb == "get"]

    status, answer = await post_review(https, controller, review)

    assert status == 200
    assert answer["response"]["allowed"] is True
    assert decisions(controller, True, reason) == 1
    reads = [r for r in sim.audit.records() if r.resource == "pods" and r.verb == "get"]
    assert reads == reads_before  # no live GET, escaped or not
    deployment = sim.get("apps/v1", "Deployment", "web", workload.namespace)
    assert deployment is not None
    assert RESTARTED_AT_ANNOTATION not in deployment["metadata"].get("annotations", {})
