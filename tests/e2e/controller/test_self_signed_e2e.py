"""`--self-signed` against kubesim: the Secret, the caBundle, and kubesim calling the webhook
over TLS verified with that caBundle."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from aiohttp import web
from cryptography import x509
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.core_v1 import Pod, Secret

from graceful_drain.controller.tls.certs import SelfSignedCertificates
from graceful_drain.controller.tls.pki import certificates, fingerprint, service_dns_names
from graceful_drain.kube.backoff import Backoff
from kubesim.apiserver.faults import FaultRule
from kubesim.sim import KubeSim

from .conftest import DEADLINE
from .deployments import lightkube_client

pytestmark = pytest.mark.e2e

HOOK_NS, HOOK_SVC, SECRET = "graceful-drain", "graceful-drain", "graceful-drain-webhook-tls"
CONFIGURATION = "graceful-drain"
EVICTION_RULES = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": ["pods/eviction"], "scope": "*"}]  # fmt: skip


def webhook_configuration(hooks: int = 2) -> dict[str, Any]:
    """As the manifests ship it: no caBundle; failurePolicy Fail so a TLS failure shows."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": CONFIGURATION},
        "webhooks": [
            {
                "name": f"hook-{index}.graceful-drain.stonal.com",
                "clientConfig": {  # port as the API server defaults it
                    "service": {
                        "namespace": HOOK_NS,
                        "name": HOOK_SVC,
                        "path": "/validate",
                        "port": 443,
                    }
                },
                "rules": EVICTION_RULES,
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "timeoutSeconds": 2,
                "admissionReviewVersions": ["v1"],
            }
            for index in range(hooks)
        ],
    }


@asynccontextmanager
async def self_signed(
    sim: KubeSim, *, serving_lifetime: timedelta = timedelta(days=365), **options: Any
) -> AsyncIterator[SelfSignedCertificates]:
    async with AsyncExitStack() as stack:
        client = lightkube_client(sim)
        stack.push_async_callback(client.close)
        certs = SelfSignedCertificates(
            client, namespace=HOOK_NS, secret_name=SECRET, service_name=HOOK_SVC,
            webhook_configuration=CONFIGURATION, serving_lifetime=serving_lifetime,
            backoff=lambda: Backoff(0.05, 0.5), **options,
        )  # fmt: skip
        await certs.start()
        stack.push_async_callback(certs.stop)
        yield certs


@pytest.fixture
def namespace(sim: KubeSim) -> str:
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HOOK_NS}})
    return HOOK_NS


async def secret_data(client: AsyncClient) -> dict[str, str]:
    secret = await client.get(Secret, SECRET, namespace=HOOK_NS)
    assert secret.data is not None
    return dict(secret.data)


async def ca_bundles(client: AsyncClient) -> list[str | None]:
    configuration = await client.get(ValidatingWebhookConfiguration, CONFIGURATION)
    return [hook.clientConfig.caBundle for hook in configuration.webhooks or []]


async def wait_for_ca_bundles(client: AsyncClient, expected: str) -> None:
    async with asyncio.timeout(DEADLINE):
        async for _, configuration in client.watch(
            ValidatingWebhookConfiguration, fields={"metadata.name": CONFIGURATION}
        ):
            bundles = [hook.clientConfig.caBundle for hook in configuration.webhooks or []]
            if bundles and all(bundle == expected for bundle in bundles):
                return


async def test_first_replica_creates_the_secret_second_reuses_it(
    sim: KubeSim, lk: AsyncClient, namespace: str
) -> None:
    sim.create(webhook_configuration())
    async with self_signed(sim) as first:
        assert first.loaded and first.secret_writes == 1
        assert first.bundle is not None
        await wait_for_ca_bundles(lk, first.bundle.ca_bundle_b64)
        async with self_signed(sim) as second:
            assert second.loaded and second.secret_writes == 0
            assert second.bundle == first.bundle
        stored = await secret_data(lk)

    secret = await lk.get(Secret, SECRET, namespace=HOOK_NS)
    assert secret.type == "kubernetes.io/tls"
    assert set(stored) == {"tls.crt", "tls.key", "ca.crt"}  # the CA key is kept apart
    ca_secret = await lk.get(Secret, f"{SECRET}-ca", namespace=HOOK_NS)
    assert ca_secret.type == "Opaque" and ca_secret.data is not None
    assert set(ca_secret.data) == {"ca.crt", "ca.key"}
    assert ca_secret.data["ca.crt"] == stored["ca.crt"]
    served = x509.load_pem_x509_certificate(base64.b64decode(stored["tls.crt"]))
    names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"{HOOK_SVC}.{HOOK_NS}.svc" in names.get_values_for_type(x509.DNSName)
    assert await ca_bundles(lk) == [stored["ca.crt"], stored["ca.crt"]]


async def test_two_replicas_racing_to_create_end_up_with_one_secret(
    sim: KubeSim, namespace: str
) -> None:
    # Both read "no Secret", then both create: the second create is answered 409.
    sim.faults.add(FaultRule(verb="create", resource="secrets", latency_seconds=0.3))
    async with AsyncExitStack() as stack:
        first, second = await asyncio.gather(
            stack.enter_async_context(self_signed(sim)),
            stack.enter_async_context(self_signed(sim)),
        )
        assert first.secret_conflicts + second.secret_conflicts >= 1  # they did race
        assert first.bundle == second.bundle and first.bundle is not None
        assert first.secret_writes + second.secret_writes in (1, 2)  # one CA, one serving


async def test_kubesim_calls_the_webhook_over_tls_verified_by_the_published_ca_bundle(
    sim: KubeSim, lk: AsyncClient, namespace: str
) -> None:
    sim.create(webhook_configuration(hooks=1))
    sim.create({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-1", "namespace": "default"},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]}})  # fmt: skip
    reviews: list[dict[str, Any]] = []

    async def validate(request: web.Request) -> web.Response:
        review = await request.json()
        reviews.append(review)
        return web.json_response({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True},
        })  # fmt: skip

    async with self_signed(sim) as certs:
        assert certs.bundle is not None
        await wait_for_ca_bundles(lk, certs.bundle.ca_bundle_b64)
        app = web.Application()
        app.router.add_post("/validate", validate)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certs.context)
        await site.start()
        try:
            sim.webhook_services.register(HOOK_NS, HOOK_SVC, 443, "127.0.0.1",
                                          runner.addresses[0][1])  # fmt: skip
            await lk.create(
                Pod.Eviction(metadata=ObjectMeta(name="web-1", namespace="default")),
                "web-1",
                namespace="default",
            )
        finally:
            await runner.cleanup()

    assert [r["request"]["name"] for r in reviews] == ["web-1"]
    with pytest.raises(ApiError) as gone:
        await lk.get(Pod, "web-1", namespace="default")
    assert gone.value.status.code == 404


async def test_serving_certificate_is_renewed_by_a_timer_with_the_same_ca(
    sim: KubeSim, lk: AsyncClient, namespace: str
) -> None:
    sim.create(webhook_configuration())
    async with self_signed(sim, serving_lifetime=timedelta(seconds=3)) as certs:
        first = certs.bundle
        assert first is not None
        async with asyncio.timeout(DEADLINE):
            await certs.wait_for_loads(2)  # about two seconds in: two thirds of three
        renewed = certs.bundle
        assert renewed is not None
        stored = await secret_data(lk)

    assert renewed.cert_pem != first.cert_pem
    assert renewed.ca_bundle_pem == first.ca_bundle_pem  # the caBundle need not change
    assert base64.b64decode(stored["tls.crt"]) == renewed.cert_pem
    assert await ca_bundles(lk) == [first.ca_bundle_b64, first.ca_bundle_b64]


async def test_a_configuration_applied_after_the_controller_gets_its_ca_bundle(
    sim: KubeSim, lk: AsyncClient, namespace: str
) -> None:
    async with self_signed(sim) as certs:
        assert certs.bundle is not None
        sim.create(webhook_configuration())  # after the controller started
        await wait_for_ca_bundles(lk, certs.bundle.ca_bundle_b64)


def test_dns_names_lead_with_the_service_name_the_api_server_uses() -> None:
    assert service_dns_names(HOOK_SVC, HOOK_NS)[0] == "graceful-drain.graceful-drain.svc"


async def test_a_re_created_configuration_gets_its_ca_bundle_back_from_the_watch(
    sim: KubeSim, lk: AsyncClient, namespace: str
) -> None:
    """Issue 15 defect 1: re-created (reinstall, kubectl replace, GitOps), the caBundle stayed
    empty until a restart (measured: not within 75 s)."""
    sim.create(webhook_configuration())
    async with self_signed(sim) as certs:
        assert certs.bundle is not None
        await wait_for_ca_bundles(lk, certs.bundle.ca_bundle_b64)
        await lk.delete(ValidatingWebhookConfiguration, CONFIGURATION)
        recreated = webhook_configuration()
        recreated["webhooks"][1]["timeoutSeconds"] = 3
        sim.create(recreated)
        await wait_for_ca_bundles(lk, certs.bundle.ca_bundle_b64)
        async with asyncio.timeout(DEADLINE):
            await certs.wait_for_ca_bundle(verified=True)
    configuration = (await lk.get(ValidatingWebhookConfiguration, CONFIGURATION)).to_dict()
    for hook in configuration["webhooks"]:  # only caBundle was written
        hook["clientConfig"].pop("caBundle")
    assert configuration["webhooks"][1]["timeoutSeconds"] == 3
    assert [h["clientConfig"] for h in configuration["webhooks"]] == [
        h["clientConfig"] for h in recreated["webhooks"]
    ]


async def test_re_created_secrets_keep_the_old_ca_published_until_both_replicas_moved_off(
    sim: KubeSim, lk: AsyncClient, namespace: str
) -> None:
    """Issue 15 defect 2: the new bundle held only the new CA while the other replica served
    from the old one for up to 24 h, /readyz green."""
    sim.create(webhook_configuration(hooks=1))
    states: list[set[bytes]] = []
    changed = asyncio.Event()

    async def record() -> None:
        async for _, configuration in lk.watch(
            ValidatingWebhookConfiguration, fields={"metadata.name": CONFIGURATION}
        ):
            [hook] = configuration.webhooks or []
            pem = base64.b64decode(hook.clientConfig.caBundle or "")
            state = {fingerprint(ca) for ca in certificates(pem)}
            if not states or states[-1] != state:
                states.append(state)
                changed.set()

    async with self_signed(sim, retire_after=0.5) as a, self_signed(sim, retire_after=0.5) as b:
        old = a.bundle
        assert old is not None and b.bundle == old
        await wait_for_ca_bundles(lk, old.ca_bundle_b64)
        recorder = asyncio.create_task(record())
        try:
            await lk.delete(Secret, SECRET, namespace=HOOK_NS)
            await lk.delete(Secret, f"{SECRET}-ca", namespace=HOOK_NS)
            async with asyncio.timeout(DEADLINE):
                await a.wait_for_loads(2)
                await b.wait_for_loads(2)
            new = a.bundle
            assert new is not None and b.bundle is not None
            assert new.ca_bundle_pem == b.bundle.ca_bundle_pem != old.ca_bundle_pem
            await wait_for_ca_bundles(lk, new.ca_bundle_b64)  # the old CA retired at last
            assert a.ca_bundle_verified and b.ca_bundle_verified
            [new_ca] = certificates(new.ca_bundle_pem)
            async with asyncio.timeout(DEADLINE):  # the recorder's own watch catches up
                while not states or states[-1] != {fingerprint(new_ca)}:
                    changed.clear()
                    await changed.wait()
        finally:
            recorder.cancel()
            await asyncio.gather(recorder, return_exceptions=True)
    [old_ca] = certificates(old.ca_bundle_pem)
    first_with_new = next(state for state in states if fingerprint(new_ca) in state)
    assert fingerprint(old_ca) in first_with_new  # added before the old one was removed


async def test_the_ca_bundle_check_fails_while_the_published_bundle_does_not_verify(
    sim: KubeSim, lk: AsyncClient, namespace: str
) -> None:
    """/readyz's ca-bundle-verified: someone else's CA in the caBundle, and this replica
    cannot write (a 503 burst): not verified; the writes resume and repair it."""
    sim.create(webhook_configuration(hooks=1))
    async with self_signed(sim) as certs:
        assert certs.bundle is not None
        await wait_for_ca_bundles(lk, certs.bundle.ca_bundle_b64)
        async with asyncio.timeout(DEADLINE):
            await certs.wait_for_ca_bundle(verified=True)
        outage = sim.faults.add(FaultRule(verb="patch", resource="validatingwebhookconfigurations",
                                          user="kubernetes-admin", error_code=503))  # fmt: skip
        foreign = base64.b64encode(sim.ca_pem).decode()
        configuration = await lk.get(ValidatingWebhookConfiguration, CONFIGURATION)
        [hook] = configuration.webhooks or []
        hook.clientConfig.caBundle = foreign
        await lk.replace(configuration)
        async with asyncio.timeout(DEADLINE):
            await certs.wait_for_ca_bundle(verified=False)
        sim.faults.remove(outage)
        async with asyncio.timeout(DEADLINE):
            await certs.wait_for_ca_bundle(verified=True)
