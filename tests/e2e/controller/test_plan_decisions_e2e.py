"""The webhook and `plan` decide through one function: the same cluster state, each pod asked
of both (the running webhook over HTTPS, and plan's reading of the API), the same answers."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from bench.objects import eviction_review
from lightkube import AsyncClient

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.inspection.gather import node_state
from graceful_drain.inspection.plan import plan_node
from graceful_drain.kube.client import RawApi
from graceful_drain.kube.timefmt import format_rfc3339
from kubesim.client import KubeClient
from kubesim.sim import KubeSim

from .conftest import (
    WebhookCerts,
    create_pod,
    create_workload,
    post_review,
    running_controller,
)

pytestmark = pytest.mark.e2e

NS = "shop"
LEASE_NS = "graceful-drain"
GO_DURATION = re.compile(r"\b\d+(?:h\d+m\d+s|m\d+s|s|ms)\b")


def masked(message: str) -> str:
    """Durations depend on the instant each side decided at."""
    return GO_DURATION.sub("<duration>", message)


async def deployment_patch(raw: KubeClient, name: str, patch: dict[str, Any]) -> None:
    await raw.patch(f"/apis/apps/v1/namespaces/{NS}/deployments/{name}", patch)


async def cluster_state(sim: KubeSim, raw: KubeClient, certs: WebhookCerts) -> None:
    now = datetime.now(UTC)
    # Another replica leads, so this one's reconciler never changes the state under the test.
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LEASE_NS}})
    sim.create({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "graceful-drain", "namespace": LEASE_NS},
        "spec": {"holderIdentity": "another-replica", "leaseDurationSeconds": 3600,
                 "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")},
    })  # fmt: skip
    sim.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}})
    sim.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b"}})
    sim.create({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "graceful-drain"},
        "webhooks": [{
            "name": "eviction.graceful-drain.stonal.com", "admissionReviewVersions": ["v1"],
            "sideEffects": "NoneOnDryRun", "failurePolicy": "Ignore",
            # Port 1 is dead: plan is pointed at the running webhook with --webhook-address.
            "clientConfig": {"url": "https://127.0.0.1:1/validate-eviction",
                             "caBundle": base64.b64encode(certs.ca.cert_pem).decode()},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods/eviction"]}],
        }],
    })  # fmt: skip
    await create_workload(sim, raw, "steady", namespace=NS)  # rollout-requested
    # v3: its one pod is on node-a, so its eviction is held whatever its replicas
    await create_workload(sim, raw, "pair", namespace=NS, replicas=2, ready_replicas=2)
    await create_workload(sim, raw, "sleepy", namespace=NS, pod_ready=False)  # 12
    surged = await create_workload(sim, raw, "surged", namespace=NS, ready_replicas=2)  # 13
    # its other pod, Ready on a node that stays: ready-elsewhere
    await create_pod(sim, raw, "surged-5d9-fghij", NS, owner=surged.replicaset,
                     labels={"app": "surged"}, node="node-b")  # fmt: skip
    # The status still counts a pod that is gone: 13 needs the replacement among the pods.
    await create_workload(sim, raw, "lagging", namespace=NS, ready_replicas=2)  # 16
    await create_workload(sim, raw, "nosurge", namespace=NS)  # 11
    await deployment_patch(raw, "nosurge", {"spec": {"strategy": {"rollingUpdate": {
        "maxSurge": 0, "maxUnavailable": 1}}}})  # fmt: skip
    await create_workload(sim, raw, "recreate", namespace=NS)  # 11
    recreate = {"spec": {"strategy": {"type": "Recreate", "rollingUpdate": None}}}
    await deployment_patch(raw, "recreate", recreate)
    await create_workload(sim, raw, "holding", namespace=NS)  # 15
    await deployment_patch(raw, "holding", {"metadata": {"annotations": {
        RESTARTED_AT_ANNOTATION: format_rfc3339(now - timedelta(seconds=30))}}})  # fmt: skip
    await create_workload(sim, raw, "expired", namespace=NS)  # 14
    await deployment_patch(raw, "expired", {"metadata": {"annotations": {
        RESTARTED_AT_ANNOTATION: format_rfc3339(now - timedelta(hours=1))}}})  # fmt: skip
    await create_pod(sim, raw, "scratch", NS)  # 7


async def test_the_webhook_and_plan_give_each_pod_the_same_decision(
    sim: KubeSim, raw: KubeClient, lk: AsyncClient, certs: WebhookCerts,
    https: aiohttp.ClientSession,
) -> None:  # fmt: skip
    await cluster_state(sim, raw, certs)
    async with running_controller(
        sim, certs, leader_elect=True, controller_namespace=LEASE_NS
    ) as app:
        await app.cache.wait_synced()
        address = f"127.0.0.1:{app.webhook_site.port}"
        state = await node_state(RawApi(lk), "node-a", "graceful-drain", address)
        assert state.health.protection == "protected", state.health.detail
        plan = plan_node(state, app.config.decision_config(), datetime.now(UTC))

        compared: list[str] = []
        for pod in plan.pods:
            decision = pod.decision
            assert decision is not None, pod
            metric = {"allowed": str(decision.allowed).lower(), "reason": decision.reason.value}
            before = app.metrics.registry.get_sample_value(
                "graceful_drain_decisions_total", metric
            ) or 0.0  # fmt: skip
            status, answer = await post_review(https, app, eviction_review(NS, pod.name))
            after = app.metrics.registry.get_sample_value("graceful_drain_decisions_total", metric)

            response = answer["response"]
            assert status == 200
            assert after == before + 1, f"{pod.name}: the webhook decided otherwise than plan"
            assert response["allowed"] is decision.allowed, pod.name
            said = (response.get("status") or {}).get("message") or " ".join(
                response.get("warnings") or []
            )
            if said:
                assert masked(said) == masked(decision.message), pod.name
            compared.append(decision.reason.value)

    assert sorted(compared) == sorted([
        "rollout-requested", "rollout-requested", "pod-not-ready", "ready-elsewhere",
        "rollout-requested", "cannot-surge", "cannot-surge", "rollout-in-progress",
        "rollout-timeout", "no-deployment",
    ])  # fmt: skip
