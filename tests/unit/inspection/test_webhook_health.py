"""`webhook_health`: registration, caBundle, and a real TLS handshake on loopback."""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from graceful_drain.inspection.webhook_health import webhook_health
from kubesim.pki import CertificateAuthority

SERVICE_NAME = "graceful-drain-webhook.graceful-drain.svc"


def configuration(ca_bundle: str | None) -> dict[str, Any]:
    client_config: dict[str, Any] = {"service": {
        "name": "graceful-drain-webhook", "namespace": "graceful-drain", "port": 443}}  # fmt: skip
    if ca_bundle is not None:
        client_config["caBundle"] = ca_bundle
    return {"webhooks": [{
        "name": "eviction.graceful-drain.stonal.com", "clientConfig": client_config,
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": ["pods/eviction"]}],
    }]}  # fmt: skip


def bundle(ca: CertificateAuthority) -> str:
    return base64.b64encode(ca.cert_pem).decode()


@pytest.fixture
def serving_ca() -> CertificateAuthority:
    return CertificateAuthority("webhook-ca")


@pytest.fixture
async def served(serving_ca: CertificateAuthority, tmp_path: Path) -> AsyncIterator[str]:
    """host:port of a TLS server presenting a certificate for the Service name."""
    pair = serving_ca.issue_server([SERVICE_NAME], common_name="webhook")
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")

    async def close(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(close, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"127.0.0.1:{port}"


async def test_a_ca_bundle_that_signed_the_served_certificate_verifies(
    serving_ca: CertificateAuthority, served: str
) -> None:
    health = await webhook_health("gd", configuration(bundle(serving_ca)), served)
    assert (health.registered, health.ca_bundle, health.certificate) == (True, "valid", "verified")
    assert health.server_name == SERVICE_NAME and health.healthy


async def test_a_ca_bundle_from_another_ca_fails(served: str) -> None:
    other = CertificateAuthority("someone-else")
    health = await webhook_health("gd", configuration(bundle(other)), served)
    assert health.certificate == "failed" and not health.healthy
    assert "does not verify" in health.detail


async def test_a_service_without_an_address_is_not_checked_and_an_unreachable_one_says_so(
    serving_ca: CertificateAuthority,
) -> None:
    health = await webhook_health("gd", configuration(bundle(serving_ca)), None)
    assert health.certificate == "not-checked" and health.healthy
    assert "kubectl port-forward -n graceful-drain svc/graceful-drain-webhook" in health.detail
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{probe.getsockname()[1]}"
    unreachable = await webhook_health("gd", configuration(bundle(serving_ca)), closed)
    assert unreachable.certificate == "unreachable" and unreachable.healthy


async def test_missing_or_broken_registrations() -> None:
    absent = await webhook_health("gd", None, None)
    assert (absent.registered, absent.healthy) == (False, False)
    no_bundle = await webhook_health("gd", configuration(None), None)
    assert (no_bundle.ca_bundle, no_bundle.healthy) == ("missing", False)
    garbage = await webhook_health("gd", configuration("bm90IGEgY2VydA=="), None)
    assert (garbage.ca_bundle, garbage.healthy) == ("invalid", False)
    other_rules = configuration(None)
    other_rules["webhooks"][0]["rules"][0]["resources"] = ["pods"]
    assert not (await webhook_health("gd", other_rules, None)).registered
