"""`webhook_health`: is the webhook protecting evictions? Registration, caBundle, a real TLS
handshake on loopback and a dry-run AdmissionReview answered by the controller's own
webhook (EvictionWebhook behind WebhookServer), and the Service a `service` clientConfig
names. Every shape that leaves evictions unchecked is `unprotected`."""

from __future__ import annotations

import asyncio
import base64
import copy
import random
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.controller.decision.table import DecisionConfig
from graceful_drain.controller.serving.admission import MAX_REVIEW_BYTES
from graceful_drain.controller.serving.http import WebhookServer
from graceful_drain.controller.serving.webhook import ClusterView, EvictionWebhook
from graceful_drain.controller.writes.patcher import DeploymentPatcher
from graceful_drain.inspection.webhook_health import (
    ServiceBackend,
    WebhookHealth,
    service_problem,
    webhook_health,
)
from kubesim.pki import CertificateAuthority

SERVICE_NAME = "graceful-drain-webhook.graceful-drain.svc"
PATH = "/validate-eviction"
Obj = dict[str, Any]


def configuration(ca_bundle: str | None, **webhook: Any) -> Obj:
    client_config: Obj = {"service": {"name": "graceful-drain-webhook",
                                      "namespace": "graceful-drain", "port": 443,
                                      "path": PATH}}  # fmt: skip
    if ca_bundle is not None:
        client_config["caBundle"] = ca_bundle
    return {"webhooks": [{
        "name": "eviction.graceful-drain.stonal.com", "clientConfig": client_config,
        "failurePolicy": "Ignore",
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": ["pods/eviction"], "scope": "Namespaced"}],
        **webhook,
    }]}  # fmt: skip


def by_url(ca_bundle: str, url: str) -> Obj:
    config = configuration(ca_bundle)
    config["webhooks"][0]["clientConfig"] = {"url": url, "caBundle": ca_bundle}
    return config


def bundle(ca: CertificateAuthority) -> str:
    return base64.b64encode(ca.cert_pem).decode()


def free_loopback_address() -> str:
    """A loopback port nobody listens on (bound, read, released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture
def serving_ca() -> CertificateAuthority:
    return CertificateAuthority("webhook-ca")


@pytest.fixture
def server_tls(serving_ca: CertificateAuthority, tmp_path: Path) -> ssl.SSLContext:
    pair = serving_ca.issue_server([SERVICE_NAME], common_name="webhook")
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    return context


@pytest.fixture
async def webhook(server_tls: ssl.SSLContext) -> AsyncIterator[str]:
    """host:port of the controller's webhook serving PATH. A dry-run review is decided
    before any lookup, so its cluster view and patcher are never touched."""
    answering = EvictionWebhook(cast(ClusterView, None), cast(DeploymentPatcher, None),
                                config=DecisionConfig())  # fmt: skip
    server = WebhookServer("webhook", {PATH: answering.answer}, "127.0.0.1", 0, server_tls,
                           max_body=MAX_REVIEW_BYTES)  # fmt: skip
    await server.start()
    try:
        yield f"127.0.0.1:{server.port}"
    finally:
        await server.stop()


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _hang_up(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.close()


@pytest.fixture
async def tls_hangs_up(server_tls: ssl.SSLContext) -> AsyncIterator[str]:
    """Completes the TLS handshake with the right certificate, then closes: no answer."""
    server = await asyncio.start_server(_hang_up, "127.0.0.1", 0, ssl=server_tls)
    async with server:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"


@pytest.fixture
async def tcp_hangs_up() -> AsyncIterator[str]:
    """Accepts TCP and closes at once, as a load balancer with no backend does."""
    server = await asyncio.start_server(_hang_up, "127.0.0.1", 0)
    async with server:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def test_the_controllers_webhook_behind_a_verified_certificate_is_protected(
    serving_ca: CertificateAuthority, webhook: str
) -> None:
    health = await webhook_health("gd", configuration(bundle(serving_ca)), webhook)
    assert (health.registered, health.ca_bundle, health.certificate, health.answer) == (
        True, "valid", "verified", "answered",
    )  # fmt: skip
    assert health.server_name == SERVICE_NAME and health.endpoint == webhook
    assert (health.protection, health.healthy, health.consequence) == ("protected", True, "")
    # A url clientConfig is dialled (here through the address) at its own path.
    url = f"https://{SERVICE_NAME}:443{PATH}"
    assert (await webhook_health("gd", by_url(bundle(serving_ca), url), webhook)).healthy


def unprotected(health: WebhookHealth, certificate: str, answer: str = "not-checked") -> None:
    assert (health.certificate, health.answer) == (certificate, answer), health
    assert (health.protection, health.healthy) == ("unprotected", False)
    assert "lets every eviction through unchecked" in health.consequence


async def test_an_address_that_does_not_answer_with_a_verified_review_is_unprotected(
    serving_ca: CertificateAuthority, webhook: str, tls_hangs_up: str, tcp_hangs_up: str
) -> None:
    ours = bundle(serving_ca)
    other = bundle(CertificateAuthority("someone-else"))
    dead = free_loopback_address()
    failed = await webhook_health("gd", configuration(other), webhook)
    unprotected(failed, "failed")
    assert "does not verify" in failed.detail
    unprotected(await webhook_health("gd", configuration(ours), dead), "unreachable")
    unprotected(await webhook_health("gd", configuration(ours), tcp_hangs_up), "unreachable")
    silent = await webhook_health("gd", configuration(ours), tls_hangs_up)
    unprotected(silent, "verified", "no-answer")
    assert "AdmissionReview" in silent.detail
    wrong_path = by_url(ours, f"https://{SERVICE_NAME}/not-the-webhook")
    unprotected(await webhook_health("gd", wrong_path, webhook), "verified", "no-answer")
    # Registered by url to a dead loopback port, as Done-when 7's second shape.
    by_dead_url = by_url(ours, f"https://{dead}{PATH}")
    unprotected(await webhook_health("gd", by_dead_url, None), "unreachable")


async def test_failure_policy_fail_refuses_instead() -> None:
    config = configuration(bundle(CertificateAuthority("ca")), failurePolicy="Fail")
    health = await webhook_health("gd", config, free_loopback_address())
    assert (health.protection, health.failure_policy) == ("unprotected", "Fail")
    assert "refuses every eviction" in health.consequence
    del config["webhooks"][0]["failurePolicy"]  # admissionregistration/v1 defaults it to Fail
    assert (await webhook_health("gd", config, None)).failure_policy == "Fail"


def rule_changed(**rule: Any) -> Obj:
    config = configuration(bundle(CertificateAuthority("ca")))
    config["webhooks"][0]["rules"][0].update(rule)
    return config


@pytest.mark.parametrize(
    ("shape", "config"),
    [
        ("no configuration", None),
        ("no webhooks", {"webhooks": []}),
        ("resources pods", rule_changed(resources=["pods"])),
        ("operations UPDATE", rule_changed(operations=["UPDATE"])),
        ("apiGroups policy", rule_changed(apiGroups=["policy"])),
        ("apiVersions v1beta1", rule_changed(apiVersions=["v1beta1"])),
        ("scope Cluster", rule_changed(scope="Cluster")),
    ],
)
async def test_no_webhook_on_create_pods_eviction_is_unprotected(
    shape: str, config: Obj | None
) -> None:
    health = await webhook_health("gd", config, None)
    assert (health.registered, health.protection) == (False, "unprotected"), shape
    assert "every eviction goes through unchecked" in health.consequence


@pytest.mark.parametrize("rule", [{"resources": ["*/*"]}, {"resources": ["pods/*"]},
                                  {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                                   "scope": "*"}])  # fmt: skip
async def test_wildcard_rules_cover_evictions(rule: Obj) -> None:
    assert (await webhook_health("gd", rule_changed(**rule), None)).registered


async def test_a_broken_ca_bundle_or_an_object_selector_needing_labels_is_unprotected() -> None:
    no_bundle = await webhook_health("gd", configuration(None), None)
    assert (no_bundle.ca_bundle, no_bundle.protection) == ("missing", "unprotected")
    garbage = await webhook_health("gd", configuration("bm90IGEgY2VydA=="), None)
    assert (garbage.ca_bundle, garbage.protection) == ("invalid", "unprotected")
    ours = bundle(CertificateAuthority("ca"))
    needs = configuration(ours, objectSelector={"matchLabels": {"team": "a"}})
    health = await webhook_health("gd", needs, None)
    assert health.protection == "unprotected" and health.problem is not None
    assert "objectSelector" in health.detail
    absent_only = configuration(ours, objectSelector={
        "matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]})  # fmt: skip
    assert (await webhook_health("gd", absent_only, None)).protection == "unverified"


SERVICE: Obj = {
    "metadata": {"name": "graceful-drain-webhook", "namespace": "graceful-drain"},
    "spec": {"ports": [{"name": "https", "port": 443, "targetPort": "webhook"}]},
}


def endpoint_slice(*ready: bool | None, port: str = "https") -> Obj:
    def endpoint(state: bool | None) -> Obj:
        return {"addresses": ["10.0.0.1"], "conditions": {} if state is None else {"ready": state}}

    return {"ports": [{"name": port, "port": 8443}], "endpoints": [endpoint(r) for r in ready]}


@pytest.mark.parametrize(
    ("shape", "backend", "protection"),
    [
        ("no Service", ServiceBackend(None, []), "unprotected"),
        ("no such port", ServiceBackend({"spec": {"ports": [{"port": 80}]}}, []), "unprotected"),
        ("no EndpointSlice", ServiceBackend(SERVICE, []), "unprotected"),
        ("no ready endpoint", ServiceBackend(SERVICE, [endpoint_slice(False, False)]),
         "unprotected"),
        ("ready on another port", ServiceBackend(SERVICE, [endpoint_slice(True, port="metrics")]),
         "unprotected"),
        ("a ready endpoint", ServiceBackend(SERVICE, [endpoint_slice(False, True)]), "unverified"),
        ("ready unset reads as ready", ServiceBackend(SERVICE, [endpoint_slice(None)]),
         "unverified"),
        ("slices unreadable", ServiceBackend(SERVICE, None), "unverified"),
        ("ExternalName", ServiceBackend({"spec": {"type": "ExternalName"}}, []), "unverified"),
    ],
)  # fmt: skip
async def test_what_is_behind_a_service_decides_when_it_cannot_be_reached_from_here(
    shape: str, backend: ServiceBackend, protection: str
) -> None:
    config = configuration(bundle(CertificateAuthority("ca")))
    health = await webhook_health("gd", config, None, backend)
    assert health.protection == protection, (shape, health.detail)
    if protection == "unverified":  # says how to check it
        assert "--webhook-address" in health.detail and health.certificate == "not-checked"


async def test_a_service_with_a_ready_endpoint_is_still_checked_at_the_address_given(
    serving_ca: CertificateAuthority, webhook: str
) -> None:
    ready = ServiceBackend(SERVICE, [endpoint_slice(True)])
    health = await webhook_health("gd", configuration(bundle(serving_ca)), webhook, ready)
    assert health.protection == "protected"
    empty = ServiceBackend(SERVICE, [endpoint_slice(False)])
    # The address answers (a port-forward to a pod that is not Ready yet), the API server's
    # Service has no endpoint to send the review to: unprotected.
    health = await webhook_health("gd", configuration(bundle(serving_ca)), webhook, empty)
    assert health.protection == "unprotected" and health.answer == "answered"


readiness = st.one_of(st.none(), st.booleans())
slices = st.lists(st.tuples(st.sampled_from(["https", "metrics"]), st.lists(readiness)), max_size=4)


@given(slices, st.randoms())
def test_service_problem_is_none_exactly_when_an_endpoint_on_the_port_is_ready(
    layout: list[tuple[str, list[bool | None]]], shuffler: random.Random
) -> None:
    client_config = configuration(None)["webhooks"][0]["clientConfig"]
    objects = [endpoint_slice(*states, port=port) for port, states in layout]
    serving = any(port == "https" and state is not False for port, states in layout
                  for state in states)  # fmt: skip
    problem = service_problem(client_config, ServiceBackend(SERVICE, objects))
    assert (problem is None) == serving
    shuffled = copy.deepcopy(objects)
    shuffler.shuffle(shuffled)
    for item in shuffled:
        shuffler.shuffle(item["endpoints"])
    assert service_problem(client_config, ServiceBackend(SERVICE, shuffled)) == problem
