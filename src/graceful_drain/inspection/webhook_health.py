"""Does the webhook protect evictions: is it registered on pods/eviction, does the address the
API server dials answer with a certificate its caBundle verifies, and does it answer an
AdmissionReview?

The API server calls a `service` clientConfig at `https://NAME.NAMESPACE.svc:PORT/PATH` and
verifies the served certificate against the caBundle for that name. The same handshake is
made here: to a `url` clientConfig directly, or to `--webhook-address HOST:PORT` (e.g. a
`kubectl port-forward` of the Service), as a Service is only reachable inside the cluster;
then a dry-run AdmissionReview (the decision table's `dry-run`: allowed, no side
effects) must come back answered. A Service that cannot be reached from here is judged by
what the API server would find behind it: the Service, its port, and a ready endpoint.

`protection` sums it up: `unprotected` when the API server's call cannot succeed (with
`failurePolicy: Ignore` every eviction then goes through unchecked), `protected` when the
handshake verified and the review was answered, `unverified` when nothing says either.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import ssl
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import aiohttp
from cryptography import x509

from graceful_drain.inspection.selectors import selector_matches

HANDSHAKE_TIMEOUT_SECONDS = 5.0
REVIEW_TIMEOUT_SECONDS = 10.0  # the API server's own ceiling for timeoutSeconds is 30
PROBE_USERNAME = "graceful-drain webhook check"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # EndpointSlice -> its Service
DEFAULT_FAILURE_POLICY = "Fail"  # admissionregistration/v1's default

CaBundleState = Literal["valid", "missing", "invalid"]
CertificateState = Literal["verified", "failed", "unreachable", "not-checked"]
AnswerState = Literal["answered", "no-answer", "not-checked"]
Protection = Literal["protected", "unprotected", "unverified"]


@dataclass(frozen=True, slots=True)
class WebhookHealth:
    configuration: str
    registered: bool  # the configuration exists and has a webhook on pods/eviction CREATE
    ca_bundle: CaBundleState
    certificate: CertificateState
    endpoint: str | None  # host:port the handshake went to
    server_name: str | None  # the name the certificate must carry
    detail: str
    answer: AnswerState = "not-checked"  # a dry-run AdmissionReview came back answered
    failure_policy: str = DEFAULT_FAILURE_POLICY
    # Why the API server's call cannot reach a serving webhook, found without a handshake
    # (no Service, no ready endpoint, an objectSelector no Eviction carries), or None.
    problem: str | None = None

    @property
    def protection(self) -> Protection:
        if (
            not self.registered
            or self.ca_bundle != "valid"
            or self.certificate in ("failed", "unreachable")
            or self.answer == "no-answer"
            or self.problem is not None
        ):
            return "unprotected"
        if self.certificate == "verified" and self.answer == "answered":
            return "protected"
        return "unverified"

    @property
    def healthy(self) -> bool:
        return self.protection == "protected"

    @property
    def consequence(self) -> str:
        """What an unprotected webhook means for a drain, by its failurePolicy."""
        if self.protection != "unprotected":
            return ""
        if not self.registered:
            return "no webhook reviews evictions: every eviction goes through unchecked"
        if self.failure_policy == "Ignore":
            return (
                "failurePolicy Ignore: the API server lets every eviction through unchecked, "
                "the last Ready pod included"
            )
        return (
            f"failurePolicy {self.failure_policy}: the API server refuses every eviction it "
            "sends to the webhook; the drain will not complete"
        )


@dataclass(frozen=True, slots=True)
class ServiceBackend:
    """What the API server finds behind a `service` clientConfig: the Service (None: not
    found) and its EndpointSlices (None: they could not be read)."""

    service: Mapping[str, Any] | None
    endpoint_slices: Sequence[Mapping[str, Any]] | None


def _covers_pod_evictions(rule: Mapping[str, Any]) -> bool:
    def has(field: str, value: str) -> bool:
        values = rule.get(field) or []
        return value in values or "*" in values

    resources = rule.get("resources") or []
    return (
        has("operations", "CREATE")
        and has("apiGroups", "")
        and has("apiVersions", "v1")
        and rule.get("scope", "*") in ("*", "Namespaced")
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


def _object_selector_problem(webhook: Mapping[str, Any]) -> str | None:
    """An objectSelector is matched against the Eviction's own labels, which a drain's
    Eviction does not carry: one that needs a label skips every eviction."""
    selector = webhook.get("objectSelector")
    if selector_matches(selector, {}, empty_matches_all=True):
        return None
    return (
        "its objectSelector needs labels a drain's Eviction does not carry: "
        "the API server never sends it an eviction"
    )


def service_problem(client_config: Mapping[str, Any], backend: ServiceBackend) -> str | None:
    """Why the API server cannot reach a serving replica behind a `service` clientConfig."""
    service = client_config.get("service") or {}
    ref = f"{service.get('namespace', '')}/{service.get('name', '')}"
    if backend.service is None:
        return f"Service {ref} not found: the API server has nowhere to send the review"
    spec = backend.service.get("spec") or {}
    if spec.get("type") == "ExternalName":
        return None  # resolved by DNS: nothing here to check
    port = int(service.get("port") or 443)
    ports = [p for p in spec.get("ports") or [] if int(p.get("port") or 0) == port]
    if not ports:
        return f"Service {ref} has no port {port}"
    if backend.endpoint_slices is None:
        return None  # unreadable: cannot tell
    name = str(ports[0].get("name") or "")
    for endpoint_slice in backend.endpoint_slices:
        if not any(str(p.get("name") or "") == name for p in endpoint_slice.get("ports") or []):
            continue
        for endpoint in endpoint_slice.get("endpoints") or []:
            # discovery/v1: a nil `ready` is to be read as ready.
            if (endpoint.get("conditions") or {}).get("ready") is not False:
                return None
    return f"Service {ref} has no ready endpoint: no replica of the webhook is serving"


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


def probe_review(uid: str) -> dict[str, Any]:
    """A dry-run AdmissionReview of an eviction, as the API server sends one for
    `kubectl drain --dry-run=server`: the webhook allows it with no side effects."""
    return {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid, "operation": "CREATE", "dryRun": True,
            "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction", "namespace": "default", "name": "graceful-drain-check",
            "userInfo": {"username": PROBE_USERNAME},
            "object": {"apiVersion": "policy/v1", "kind": "Eviction",
                       "metadata": {"name": "graceful-drain-check", "namespace": "default"},
                       "deleteOptions": {"dryRun": ["All"]}},
        },
    }  # fmt: skip


def _path(client_config: Mapping[str, Any]) -> str:
    url = client_config.get("url")
    if url:
        parts = urlsplit(str(url))
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return str((client_config.get("service") or {}).get("path") or "/")


async def _review(
    endpoint: str, server_name: str, ca_pem: str, path: str
) -> tuple[AnswerState, str]:
    """POST a dry-run AdmissionReview over the verified TLS: is it answered for its uid?"""
    uid = str(uuid.uuid4())
    context = ssl.create_default_context(cadata=ca_pem)
    timeout = aiohttp.ClientTimeout(total=REVIEW_TIMEOUT_SECONDS)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(
                f"https://{endpoint}{path}", json=probe_review(uid), ssl=context,
                server_hostname=server_name,
            ) as reply,
        ):  # fmt: skip
            body = await reply.read()
    except (aiohttp.ClientError, OSError, TimeoutError) as error:
        return "no-answer", f"a dry-run AdmissionReview to {endpoint}{path} failed: " + (
            str(error) or type(error).__name__
        )
    answered = reply.status == 200
    try:
        response = json.loads(body).get("response") or {}
        answered = answered and response.get("uid") == uid and "allowed" in response
    except (ValueError, AttributeError):
        answered = False
    if not answered:
        return "no-answer", (
            f"{endpoint}{path} did not answer a dry-run AdmissionReview "
            f"(HTTP {reply.status}: {body[:200].decode(errors='replace')})"
        )
    return "answered", f"{endpoint}{path} answers AdmissionReviews"


async def webhook_health(
    name: str,
    configuration: Mapping[str, Any] | None,
    address: str | None,
    backend: ServiceBackend | None = None,
) -> WebhookHealth:
    """`backend`: what is behind a `service` clientConfig (None: not read)."""
    webhook = eviction_webhook(configuration)
    if webhook is None:
        detail = (
            f"ValidatingWebhookConfiguration {name} not found"
            if configuration is None
            else f"ValidatingWebhookConfiguration {name} has no webhook on CREATE pods/eviction"
        )
        return WebhookHealth(name, False, "missing", "not-checked", None, None, detail)
    client_config = webhook.get("clientConfig") or {}
    policy = str(webhook.get("failurePolicy") or DEFAULT_FAILURE_POLICY)
    problem = _object_selector_problem(webhook)
    if problem is None and backend is not None and client_config.get("service"):
        problem = service_problem(client_config, backend)
    bundle, pem, bundle_problem = _ca_bundle(client_config)
    endpoint, server_name, unreachable = _target(client_config, address)

    def health(certificate: CertificateState, detail: str, answer: AnswerState = "not-checked",
               at: str | None = endpoint) -> WebhookHealth:  # fmt: skip
        if problem is not None:
            detail = f"{problem}; {detail}"
        return WebhookHealth(name, True, bundle, certificate, at, server_name, detail, answer,
                             policy, problem)  # fmt: skip

    if bundle != "valid":
        return health("not-checked", bundle_problem)
    if endpoint is None or server_name is None:
        return health("not-checked", unreachable, at=None)
    state, detail = await _handshake(endpoint, server_name, pem)
    if state != "verified":
        return health(state, detail)
    answer, answered = await _review(endpoint, server_name, pem, _path(client_config))
    return health(state, f"{detail}; {answered}", answer)
