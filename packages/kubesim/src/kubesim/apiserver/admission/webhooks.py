"""Validating admission webhooks, dispatched the way kube-apiserver does it.

`ValidatingWebhookDispatcher` is an `ApiServer` admitter: for every CREATE,
UPDATE, DELETE or CONNECT (subresources included) it reads the
ValidatingWebhookConfigurations from the store, picks the webhooks whose rules
and selectors match (`admission.rules`), and calls them concurrently over HTTPS
with an `admission.k8s.io` AdmissionReview (`admission.review`), verifying the
server certificate against `clientConfig.caBundle`. After
staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/validating/dispatcher.go.

`clientConfig.service` is resolved through a `ServiceResolver` (loopback
addresses only); the newest calls (`CALLS_KEPT`) are recorded in `dispatcher.calls` for
tests.
Not implemented: matchConditions (ignored: the webhook is called), warnings
(recorded, not sent to the client as Warning headers), audit annotations.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import ipaddress
import logging
import ssl
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from kubesim import jsoncodec
from kubesim.apiserver import event_versions
from kubesim.apiserver.admission.review import (
    InvalidResponse,
    StatusError,
    build_review,
    calling_error,
    denial,
    dry_run_unsupported,
    http_error_reason,
    internal_error,
    operation_options,
    review_version,
    verify_response,
)
from kubesim.apiserver.admission.rules import (
    NAMESPACES,
    AdmissionRequestAttributes,
    Equivalent,
    GroupVersionKind,
    GroupVersionResource,
    Invocation,
    is_exempt,
    should_call,
)
from kubesim.apiserver.errors import ApiError
from kubesim.apiserver.registry import Registry
from kubesim.apiserver.resources import ResourceType
from kubesim.apiserver.server import AdmissionAttributes
from kubesim.types import Obj

_log = logging.getLogger("kubesim.admission")
WEBHOOK_CONFIGURATIONS = ("admissionregistration.k8s.io", "validatingwebhookconfigurations")
DEFAULT_TIMEOUT_SECONDS = 10
MAX_TIMEOUT_SECONDS = 30
USER_AGENT = "kube-apiserver-admission"


class ServiceResolver:
    """Where `clientConfig.service` (namespace, name, port) really listens, on loopback: one
    endpoint, or several taken in turn, one per webhook call (a Service with several ready
    endpoints, whose calls kube-proxy spreads over them)."""

    def __init__(self) -> None:
        self._endpoints: dict[tuple[str, str, int], list[tuple[str, int]]] = {}
        self._turn: dict[tuple[str, str, int], int] = {}

    def register(self, namespace: str, name: str, port: int, host: str, real_port: int) -> None:
        self.register_endpoints(namespace, name, port, host, [real_port])

    def register_endpoints(
        self, namespace: str, name: str, port: int, host: str, real_ports: list[int]
    ) -> None:
        """Several endpoints: each call goes to the next one in order (round robin)."""
        if not _is_loopback(host):
            raise ValueError(f"kubesim resolves webhook services to loopback only, not {host!r}")
        if not real_ports:
            raise ValueError("a Service needs at least one endpoint")
        key = (namespace, name, port)
        self._endpoints[key] = [(host, real_port) for real_port in real_ports]
        self._turn[key] = 0

    def unregister(self, namespace: str, name: str, port: int) -> None:
        self._endpoints.pop((namespace, name, port), None)
        self._turn.pop((namespace, name, port), None)

    def resolve(self, namespace: str, name: str, port: int) -> tuple[str, int]:
        """Raises LookupError with the message the cluster-IP resolver gives."""
        key = (namespace, name, port)
        found = self._endpoints.get(key)
        if found is not None:
            turn = self._turn[key]
            self._turn[key] = turn + 1
            return found[turn % len(found)]
        if any(ns == namespace and n == name for ns, n, _ in self._endpoints):
            raise LookupError(f'no service port {port} found for service "{name}"')
        raise LookupError(f'service "{name}" not found')


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class WebhookCall:
    """One webhook call, as the dispatcher saw it."""

    configuration: str
    webhook: str
    url: str
    review: Obj | None  # the AdmissionReview sent (None: never sent)
    dry_run: bool
    http_status: int | None = None
    response: Any = None  # the decoded answer
    # allowed | denied | call-error (failurePolicy Fail) | ignored (failurePolicy Ignore)
    # | dry-run-unsupported
    outcome: str = ""
    error: str = ""
    warnings: list[str] = field(default_factory=list)


class _CallError(Exception):
    """webhookutil.ErrCallingWebhook: the webhook could not be asked, or answered nonsense."""


@dataclass(frozen=True, slots=True)
class _Target:
    url: str  # as upstream prints it, with ?timeout=
    connect_url: str  # where kubesim actually connects
    server_hostname: str | None
    host_header: str | None


# Enough for any test to read back; a long `kubesim serve` with a webhook must not keep every
# AdmissionReview it ever sent.
CALLS_KEPT = 10_000


class ValidatingWebhookDispatcher:
    def __init__(self, registry: Registry, services: ServiceResolver) -> None:
        self.registry = registry
        self.resources = registry.resources
        self.store = registry.store
        self.services = services
        self.calls: deque[WebhookCall] = deque(maxlen=CALLS_KEPT)
        self._session: aiohttp.ClientSession | None = None
        self._ssl_contexts: dict[str, ssl.SSLContext] = {}
        self._equivalents_of: object = None  # the resource types the cache below is for
        self._equivalents_cache: dict[tuple[object, ...], list[Equivalent]] = {}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # admitter entry point

    async def __call__(self, attrs: AdmissionAttributes) -> None:
        request = request_attributes(attrs)
        if is_exempt(request.kind):
            return
        invocations: list[tuple[str, Invocation]] = []
        equivalents = self._equivalents(attrs.rt, attrs.subresource)
        for config in self.store.list(WEBHOOK_CONFIGURATIONS):
            for hook in config.get("webhooks") or []:
                invocation = should_call(hook, request, equivalents, self._namespace_labels)
                if invocation is not None:
                    invocations.append((config["metadata"]["name"], invocation))
        if not invocations:
            return
        errors: list[ApiError] = []  # in completion order, as upstream's error channel

        async def call(config_name: str, invocation: Invocation) -> None:
            error = await self._call_hook(config_name, invocation, request, attrs)
            if error is not None:
                errors.append(error)

        await asyncio.gather(*(call(name, inv) for name, inv in invocations))
        if errors:
            raise errors[0]

    # lookups

    def _namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        ns = self.store.get(("", "namespaces"), "", namespace)
        if ns is None:
            return None
        labels: Mapping[str, str] = ns["metadata"].get("labels") or {}
        return labels

    def _equivalents(self, rt: ResourceType, subresource: str) -> list[Equivalent]:
        """The resources stored as `rt` is, with the kind of `subresource` in each; kept until
        the set of resource types changes (a CRD)."""
        types = self.resources.types
        if types is not self._equivalents_of:
            self._equivalents_of, self._equivalents_cache = types, {}
        key = (rt.storage_key, rt.group, rt.version, rt.plural, subresource)
        cached = self._equivalents_cache.get(key)
        if cached is None:
            cached = self._equivalents_cache[key] = self._find_equivalents(rt, subresource)
        return cached

    def _find_equivalents(self, rt: ResourceType, subresource: str) -> list[Equivalent]:
        out: list[Equivalent] = []
        for other in self.resources.types:
            if other.virtual or other.storage_key != rt.storage_key:
                continue
            kind = kind_for(other, subresource)
            if kind is not None:
                resource = GroupVersionResource(other.group, other.version, other.plural)
                out.append((resource, kind))
        return out

    # one webhook

    async def _call_hook(
        self,
        config_name: str,
        invocation: Invocation,
        request: AdmissionRequestAttributes,
        attrs: AdmissionAttributes,
    ) -> ApiError | None:
        hook = invocation.webhook
        name = invocation.name
        record = WebhookCall(config_name, name, "", None, attrs.dry_run)
        self.calls.append(record)
        ignore_failures = hook.get("failurePolicy", "Fail") == "Ignore"
        try:
            self._check_side_effects(hook, attrs.dry_run)
            result = await self._post(hook, invocation, request, attrs, record)
        except _CallError as err:
            record.error = calling_error(name, str(err))
            record.outcome = "ignored" if ignore_failures else "call-error"
            if ignore_failures:  # as kube-apiserver logs it: nothing else tells the user
                _log.warning("Failed calling webhook, failing open %s: %s", name, record.error)
            return None if ignore_failures else internal_error(record.error)
        except ApiError as err:
            record.error = err.message
            record.outcome = "dry-run-unsupported"
            return err
        if result.allowed:
            record.outcome = "allowed"
            return None
        record.outcome = "denied"
        rejection: StatusError = denial(name, result.result)
        record.error = rejection.message
        return rejection

    def _check_side_effects(self, hook: Mapping[str, Any], dry_run: bool) -> None:
        if not dry_run:
            return
        side_effects = hook.get("sideEffects")
        if side_effects is None:
            raise _CallError("Webhook SideEffects is nil")
        if side_effects not in ("None", "NoneOnDryRun"):
            raise dry_run_unsupported(str(hook.get("name", "")))

    async def _post(
        self,
        hook: Mapping[str, Any],
        invocation: Invocation,
        request: AdmissionRequestAttributes,
        attrs: AdmissionAttributes,
        record: WebhookCall,
    ) -> Any:
        try:
            version = review_version(hook)
        except InvalidResponse as err:
            raise _CallError(str(err)) from None
        uid = str(uuid.uuid4())
        review = build_review(
            uid=uid, version=version, invocation=invocation, attrs=request, user=attrs.user,
            dry_run=attrs.dry_run,
            options=operation_options(attrs.operation, attrs.options, attrs.dry_run),
            versioned_object=self._versioned(attrs.object, invocation, attrs),
            versioned_old_object=self._versioned(attrs.old_object, invocation, attrs),
        )  # fmt: skip
        record.review = review
        timeout = _timeout_seconds(hook)
        client_config: Mapping[str, Any] = hook.get("clientConfig") or {}
        target = self._target(client_config, timeout)
        record.url = target.url
        context = self._ssl_context(client_config)
        body = jsoncodec.dumps(review)
        status, raw = await self._send(target, context, body, timeout)
        record.http_status = status
        if not 200 <= status <= 206:
            raise _CallError(f"failed to call webhook: {http_error_reason(status, raw)}")
        try:
            answer = jsoncodec.loads(raw)
        except ValueError as err:
            raise _CallError(
                f"failed to call webhook: couldn't get version/kind; json parse error: {err}"
            ) from None
        record.response = answer
        try:
            result = verify_response(uid, version, answer)
        except InvalidResponse as err:
            raise _CallError(f"received invalid webhook response: {err}") from None
        record.warnings = result.warnings
        return result

    async def _send(
        self, target: _Target, context: ssl.SSLContext, body: bytes, seconds: int
    ) -> tuple[int, bytes]:
        session = self._client()
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, */*",
            "User-Agent": USER_AGENT,
        }
        if target.host_header is not None:
            headers["Host"] = target.host_header
        try:
            async with asyncio.timeout(seconds):
                async with session.post(
                    target.connect_url, data=body, headers=headers, ssl=context,
                    server_hostname=target.server_hostname,
                ) as response:  # fmt: skip
                    return response.status, await response.read()
        except TimeoutError:
            raise _CallError(
                f'failed to call webhook: Post "{target.url}": context deadline exceeded'
            ) from None
        except aiohttp.ClientConnectorCertificateError as err:
            raise _CallError(
                f'failed to call webhook: Post "{target.url}": tls: failed to verify '
                f"certificate: x509: {_x509_text(err.certificate_error)}"
            ) from None
        except aiohttp.ClientConnectorError as err:
            raise _CallError(
                f'failed to call webhook: Post "{target.url}": dial tcp {err.host}:{err.port}: '
                f"connect: {_errno_text(err.os_error)}"
            ) from None
        except (aiohttp.ClientError, OSError) as err:
            raise _CallError(f'failed to call webhook: Post "{target.url}": {err}') from None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(auto_decompress=False)
        return self._session

    def _target(self, client_config: Mapping[str, Any], timeout: int) -> _Target:
        query = f"?timeout={timeout}s"
        service = client_config.get("service")
        if isinstance(service, dict):
            namespace, name = str(service.get("namespace", "")), str(service.get("name", ""))
            port = int(service.get("port") or 443)
            path = str(service.get("path") or "/")
            server_name = f"{name}.{namespace}.svc"
            url = f"https://{server_name}:{port}{path}{query}"
            try:
                host, real_port = self.services.resolve(namespace, name, port)
            except LookupError as err:
                raise _CallError(f'failed to call webhook: Post "{url}": {err}') from None
            return _Target(url, f"https://{_url_host(host)}:{real_port}{path}{query}",
                           server_name, f"{server_name}:{port}")  # fmt: skip
        raw_url = client_config.get("url")
        if not isinstance(raw_url, str) or not raw_url:
            raise _CallError("invalid webhook client config: neither url nor service is set")
        parts = urlsplit(raw_url)
        path = parts.path or "/"
        url = f"{parts.scheme}://{parts.netloc}{path}{query}"
        if parts.scheme != "https":
            raise _CallError(f'failed to call webhook: Post "{url}": unsupported scheme')
        if not _is_loopback(parts.hostname or ""):
            raise _CallError(
                f'failed to call webhook: Post "{url}": kubesim calls loopback webhooks only'
            )
        return _Target(url, url, None, None)

    def _ssl_context(self, client_config: Mapping[str, Any]) -> ssl.SSLContext:
        bundle = str(client_config.get("caBundle") or "")
        context = self._ssl_contexts.get(bundle)
        if context is not None:
            return context
        if bundle:
            try:
                pem = base64.b64decode(bundle, validate=True).decode()
                context = ssl.create_default_context(cadata=pem)
            except (binascii.Error, UnicodeDecodeError, ssl.SSLError, ValueError) as err:
                raise _CallError(f"failed to load caBundle: {err}") from None
        else:
            context = ssl.create_default_context()
        self._ssl_contexts[bundle] = context
        return context

    def _versioned(
        self, obj: Obj | None, invocation: Invocation, attrs: AdmissionAttributes
    ) -> Obj | None:
        """The object as the invocation's kind and version (storage form is core/v1)."""
        if obj is None:
            return None
        if attrs.kind is None and invocation.kind.group == "events.k8s.io":
            return event_versions.to_events_v1(obj)
        return obj


def kind_for(rt: ResourceType, subresource: str) -> GroupVersionKind | None:
    """EquivalentResourceMapper.KindFor: the kind a resource (or subresource) serves."""
    if not subresource:
        return GroupVersionKind(rt.group, rt.version, rt.kind)
    if rt.kind == "Namespace" and subresource == "finalize":
        return GroupVersionKind("", "v1", "Namespace")
    sub = rt.subresource(subresource)
    if sub is None:
        return None
    group = sub.group if sub.group is not None else rt.group
    return GroupVersionKind(group, sub.version or rt.version, sub.kind)


def request_attributes(attrs: AdmissionAttributes) -> AdmissionRequestAttributes:
    rt = attrs.requested or attrs.rt
    resource = GroupVersionResource(rt.group, rt.version, rt.plural)
    if attrs.kind is not None:
        kind = GroupVersionKind(attrs.kind_group or "", attrs.kind_version or "", attrs.kind)
    else:
        kind = kind_for(rt, attrs.subresource) or GroupVersionKind(rt.group, rt.version, rt.kind)
    namespace = attrs.namespace
    if resource == NAMESPACES and attrs.operation != "CREATE":
        # RequestInfo puts a Namespace's own name in the namespace of requests about it.
        namespace = attrs.name
    return AdmissionRequestAttributes(resource, attrs.subresource, kind, attrs.operation, namespace,
                             attrs.name, attrs.object, attrs.old_object)  # fmt: skip


def _timeout_seconds(hook: Mapping[str, Any]) -> int:
    value = hook.get("timeoutSeconds")
    if not isinstance(value, int) or isinstance(value, bool):
        return DEFAULT_TIMEOUT_SECONDS
    return min(max(value, 1), MAX_TIMEOUT_SECONDS)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _x509_text(err: Exception) -> str:
    """Go's crypto/x509 wording for the verification failures webhooks commonly hit."""
    code = getattr(err, "verify_code", None)
    if code in (2, 19, 20, 21):  # no issuer / self-signed in chain / local issuer / leaf
        return "certificate signed by unknown authority"
    if code == 10:
        return "certificate has expired or is not yet valid"
    if code == 62:
        return "certificate is not valid for the requested host name"
    return str(getattr(err, "verify_message", "") or err)


def _errno_text(err: OSError) -> str:
    if isinstance(err, ConnectionRefusedError):
        return "connection refused"
    return err.strerror.lower() if err.strerror else str(err)


__all__ = [
    "ServiceResolver",
    "ValidatingWebhookDispatcher",
    "WebhookCall",
    "kind_for",
    "request_attributes",
]
