"""The controller as its ServiceAccount, under the RBAC that deploy/ ships (self-signed mode,
leader election): a whole drain and the certificate set-up, with no request refused."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from bench.objects import eviction_review
from lightkube import AsyncClient
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration

from graceful_drain.controller.app import ControllerApp
from graceful_drain.controller.serving.webhook import WEBHOOK_PATH
from graceful_drain.controller.settings import ControllerConfig
from graceful_drain.controller.tls.certs import SelfSignedCertificates
from graceful_drain.controller.writes.events import DRAIN_COMPLETED, DRAIN_STARTED
from kubesim.client import KubeClient
from kubesim.sim import KubeSim
from tests.unit.deploy.rendered import NAMESPACE, SELF_SIGNED, SERVICE_ACCOUNT, objects

from .conftest import DEADLINE, create_workload, quick_backoff
from .test_app_drain_e2e import NS, complete_rollout, wait_for_event, wait_until

pytestmark = pytest.mark.e2e

INSTALLED_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                   "RoleBinding", "ValidatingWebhookConfiguration")  # fmt: skip
CONTROLLER_USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"


async def review(app: ControllerApp, body: dict[str, Any]) -> dict[str, Any]:
    """POST an AdmissionReview the way the API server would: trusting the published CA."""
    assert isinstance(app.tls, SelfSignedCertificates) and app.tls.bundle is not None
    context = ssl.create_default_context(cadata=app.tls.bundle.ca_bundle_pem.decode())
    connector = aiohttp.TCPConnector(ssl=context, force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        url = f"https://127.0.0.1:{app.webhook_site.port}{WEBHOOK_PATH}"
        async with session.post(url, json=body,
                                server_hostname=app.tls.dns_names[0]) as response:  # fmt: skip
            answer: dict[str, Any] = await response.json()
            return answer


async def test_a_drain_under_the_shipped_rbac_is_never_refused(
    sim: KubeSim, raw: KubeClient, lk: AsyncClient, tmp_path: Path
) -> None:
    for item in objects(SELF_SIGNED):
        if item["kind"] in INSTALLED_KINDS:
            sim.create(item)
    token = sim.service_account_token(NAMESPACE, SERVICE_ACCOUNT)
    kubeconfig = sim.write_kubeconfig(tmp_path / "controller.kubeconfig", token, "controller")
    config = ControllerConfig(
        bind_address="127.0.0.1", webhook_port=0, metrics_port=0, self_signed=True,
        leader_elect=True, controller_namespace=NAMESPACE, kubeconfig=kubeconfig,
    )  # fmt: skip
    app = ControllerApp(config, cache_backoff=quick_backoff, identity="graceful-drain-0")
    await app.start()
    try:
        assert app.elector is not None
        async with asyncio.timeout(DEADLINE):
            await app.cache.wait_synced()
            await app.elector.wait_until_leader()
        workload = await create_workload(sim, raw, "web", namespace=NS)
        await wait_until(app, lambda d: d is not None)

        answer = await review(app, eviction_review(NS, workload.pod_name))
        assert answer["response"]["status"]["code"] == 429
        await wait_for_event(lk, DRAIN_STARTED)
        await wait_until(app, lambda d: d is not None and d.template_restarted_at is not None)
        await complete_rollout(raw)
        await wait_until(app, lambda d: d is not None and d.completed_at_raw is not None)
        await wait_for_event(lk, DRAIN_COMPLETED)
        configuration = await lk.get(ValidatingWebhookConfiguration, "graceful-drain")
    finally:
        await app.stop()

    bundles = {hook.clientConfig.caBundle for hook in configuration.webhooks or []}
    assert app.tls.loaded and len(bundles) == 1 and None not in bundles
    made = sim.audit.records(CONTROLLER_USER)
    refused = [r for r in made if r.code in (401, 403)]
    assert refused == []
    used = {(r.verb, r.api_group, r.resource) for r in made}
    assert {("patch", "apps", "deployments"), ("create", "", "events"),
            ("update", "coordination.k8s.io", "leases"), ("create", "", "secrets"),
            ("patch", "admissionregistration.k8s.io", "validatingwebhookconfigurations"),
            } <= used  # fmt: skip
