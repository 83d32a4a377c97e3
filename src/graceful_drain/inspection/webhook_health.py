"""Is the webhook registered, and does its caBundle verify the certificate it serves?

The API server calls a `service` clientConfig at `https://NAME.NAMESPACE.svc:PORT/PATH` and
verifies the served certificate against the caBundle for that name. The same handshake is
made here: to a `url` clientConfig directly, or to `--webhook-address HOST:PORT` (e.g. a
`kubectl port-forward` of the Service), as a Service is only reachable inside the cluster.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from cryptography import x509

HANDSHAKE_TIMEOUT_SECONDS = 5.0

CaBundleState = Literal["valid", "missing", "invalid"]
CertificateState = Literal["verified", "failed", "unreachable", "not-checked"]


@dataclass(frozen=True, slots=True)
class WebhookHealth:
    configuration: str
    registered: bool  # the configuration exists and has a webhook on pods/eviction CREATE
    ca_bundle: CaBundleState
    certificate: CertificateState
    endpoint: str | None  # host:port the handshake went to
    server_name: str | None  # the name the certificate must carry
    detail: str

    @property
    def healthy(self) -> bool:
        return self.registered and self.ca_bundle == "valid" and self.certificate != "failed"


def _covers_pod_evictions(rule: Mapping[str, Any]) -> bool:
    def has(field: str, value: str) -> bool:
        values = rule.get(field) or []
        return value in values or "*" in values

    resources = rule.get("resources") or []
    return (
        (has("operations", "CREATE"))
        and has("apiGroups", "")
        and ("pods/eviction" in resources or "*/*" in resources or "pods/*" in resources)
    )


def eviction_webhook(configuration: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The configuration's webhook on CREATE pods/eviction, if it has one."""
    if configuration is None:
        return None
    for webhook in configuration.get("webhooks") or []:
        if any(_covers_pod_evictions(rule) for rule in webhook.get("rules") or []):
            return webhook  # type: ignore[no-any-return]
    return None


def _ca_bundle(client_config: Mapping[str, Any]) -> tuple[CaBundleState, str, str]:
    encoded = client_config.get("caBundle")
    if not encoded:
        return "missing", "", "no caBundle: the API server cannot trust the webhook"
    try:
        pem = base64.b64decode(str(encoded), validate=True).decode()
        x509.load_pem_x509_certificates(pem.encode())
    except (binascii.Error, UnicodeDecodeError, ValueError) as error:
        return "invalid", "", f"caBundle is not base64 PEM certificates ({error})"
    return "valid", pem, ""


def _target(
    client_config: Mapping[str, Any], address: str | None
) -> tuple[str | None, str | None, str]:
    """(host:port to connect to, the name to verify, why not when there is nothing to reach)."""
    url = client_config.get("url")
    if url:
        parts = urlsplit(str(url))
        host = parts.hostname or ""
        return address or f"{host}:{parts.port or 443}", host, ""
    service = client_config.get("service") or {}
    name = f"{service.get('name', '')}.{service.get('namespace', '')}.svc"
    if address:
        return address, name, ""
    forward = (
        f"kubectl port-forward -n {service.get('namespace', '')} svc/{service.get('name', '')} "
        f"8443:{service.get('port') or 443}"
    )
    return (
        None,
        name,
        f"Service {name} is reachable from inside the cluster only: run "
        f"`{forward}` and pass --webhook-address 127.0.0.1:8443 to check its certificate",
    )


async def _handshake(endpoint: str, server_name: str, ca_pem: str) -> tuple[CertificateState, str]:
    host, _, port = endpoint.rpartition(":")
    context = ssl.create_default_context(cadata=ca_pem)
    try:
        async with asyncio.timeout(HANDSHAKE_TIMEOUT_SECONDS):
            _, writer = await asyncio.open_connection(
                host.strip("[]"), int(port), ssl=context, server_hostname=server_name
            )
    except ssl.SSLCertVerificationError as error:
        return "failed", f"the served certificate does not verify: {error.verify_message}"
    except (OSError, TimeoutError, ValueError) as error:
        return "unreachable", f"could not connect to {endpoint}: {error or type(error).__name__}"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return "verified", f"the certificate served at {endpoint} verifies for {server_name}"


async def webhook_health(
    name: str, configuration: Mapping[str, Any] | None, address: str | None
) -> WebhookHealth:
    webhook = eviction_webhook(configuration)
    if webhook is None:
        detail = (
            f"ValidatingWebhookConfiguration {name} not found"
            if configuration is None
            else f"ValidatingWebhookConfiguration {name} has no webhook on pods/eviction"
        )
        return WebhookHealth(name, False, "missing", "not-checked", None, None, detail)
    client_config = webhook.get("clientConfig") or {}
    bundle, pem, problem = _ca_bundle(client_config)
    endpoint, server_name, unreachable = _target(client_config, address)
    if bundle != "valid":
        return WebhookHealth(name, True, bundle, "not-checked", endpoint, server_name, problem)
    if endpoint is None or server_name is None:
        return WebhookHealth(name, True, bundle, "not-checked", None, server_name, unreachable)
    state, detail = await _handshake(endpoint, server_name, pem)
    return WebhookHealth(name, True, bundle, state, endpoint, server_name, detail)
