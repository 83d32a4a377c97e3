"""`--self-signed`: the controller keeps its own CA and serving certificate.

    tls = SelfSignedCertificates(client, namespace="graceful-drain",
                                 secret_name="graceful-drain-webhook-tls",
                                 service_name="graceful-drain-webhook",
                                 webhook_configuration="graceful-drain",
                                 mount_dir=Path("/var/run/graceful-drain/webhook-tls"))
    await tls.start()       # a component; `tls.context` serves the webhook, `tls.loaded` and
                            # `tls.ca_bundle_verified` gate /readyz

Every replica runs this; two Secrets are the single source of truth (pki.py): the serving
Secret `<secret_name>` (mounted by the pod) and the CA Secret `<secret_name>-ca` (never
mounted: the CA key stays out of the pod's filesystem).
- absent: generate a CA and a serving certificate for `<service>.<namespace>.svc`, create the
  CA Secret, then the serving Secret; a 409 means another replica wrote first: read theirs;
- present and fresh: use them (a second replica, a restart);
- due (two thirds of a lifetime gone), malformed, or for other names: renew and update with
  the resourceVersion read; a 409 means another replica renewed first: read and judge again.
Both Secrets are watched (by name), so a Secret deleted or re-created by hand is acted on
within seconds by every replica, not at the next renewal timer.

Cold start: the serving pair mounted from the Secret (an optional volume, `mount_dir`) is
loaded before anything else, so the webhook serves TLS even when the API server does not
answer yet (and the webhook's own `Reason.CACHE_COLD` then answers 429, not the API server's
"ignore").

The caBundle: the ValidatingWebhookConfiguration is watched (by name) and each of its
webhooks must trust the CAs of the Secret plus the CA this replica serves from. A JSON patch
touching only `/webhooks/<i>/clientConfig/caBundle` (guarded by a `test` of the webhook's
name and of the caBundle read) adds what is missing — at once, whenever the configuration is
re-created, edited, or the CA changes. A CA this replica stopped serving from is removed
`retire_after` seconds later (by this replica, once: another replica still serving from it
puts it back, and /readyz of a replica whose certificate the bundle no longer verifies
fails). Expired CAs are dropped. `ca_bundle_verified` (/readyz): every webhook's caBundle
verifies the certificate this replica serves.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import random
import ssl
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography import x509
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.core_v1 import Secret
from lightkube.types import PatchType

from graceful_drain.controller.tls.context import certificate_not_after, server_context
from graceful_drain.controller.tls.pki import (
    CA_KEY_KEY,
    CA_VALIDITY,
    SERVING_VALIDITY,
    CertificateBundle,
    Fresh,
    assess,
    bundle_from_secrets,
    certificates,
    fingerprint,
    issuer_in,
    merged_bundle,
    renewed,
    same_certificates,
    served_bundle_from_files,
    service_dns_names,
)
from graceful_drain.kube.backoff import Backoff
from graceful_drain.kube.client import RawApi, error_detail, http_status
from graceful_drain.kube.informer import DEFAULT_SILENCE_LIMIT_SECONDS, Informer, LightkubeListWatch
from graceful_drain.kube.meta import HTTP_CONFLICT, HTTP_NOT_FOUND, utc_now
from graceful_drain.logs import get_logger

MAX_SECRET_ROUNDS = 5  # create/update races lost in a row before giving up for this round
RETRY_BASE_SECONDS = 1.0
RETRY_MAX_SECONDS = 30.0
MAX_TIMER_SECONDS = 24 * 3600.0  # re-judge at least daily (wall-clock jumps, suspended VMs)
# Every replica sees a Secret change within seconds (a watch) and /readyz takes a replica the
# bundle no longer verifies out of the Service: a minute is ample for the old CA to retire.
RETIRE_AFTER_SECONDS = 60.0
MANAGED_BY = {"app.kubernetes.io/managed-by": "graceful-drain"}

_log = get_logger("self-signed-tls")


@dataclass(frozen=True, slots=True)
class WebhookCA:
    """One webhook of the configuration: its name and caBundle (base64, as stored)."""

    name: str
    ca_bundle_b64: str | None

    @property
    def ca_bundle_pem(self) -> bytes:
        try:
            return base64.b64decode(self.ca_bundle_b64 or "", validate=True)
        except (binascii.Error, ValueError):
            return b""


def webhook_cas(raw: Mapping[str, Any]) -> tuple[WebhookCA, ...]:
    """The informer's view of a ValidatingWebhookConfiguration."""
    hooks = raw.get("webhooks") or []
    return tuple(
        WebhookCA(str(hook.get("name", "")), (hook.get("clientConfig") or {}).get("caBundle"))
        for hook in hooks
        if isinstance(hook, Mapping)
    )


def secret_version(raw: Mapping[str, Any]) -> str:
    """The informer's view of a Secret: its resourceVersion only. The watch says when to
    sync; the keys are read by `sync` and never kept in a cache."""
    return str((raw.get("metadata") or {}).get("resourceVersion", ""))


def ca_bundle_ops(index: int, hook: WebhookCA, wanted_b64: str) -> list[dict[str, Any]]:
    """JSON patch ops setting webhook `index`'s caBundle, guarded by what was read."""
    path = f"/webhooks/{index}/clientConfig/caBundle"
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": f"/webhooks/{index}/name", "value": hook.name}
    ]
    if hook.ca_bundle_b64:
        ops.append({"op": "test", "path": path, "value": hook.ca_bundle_b64})
        ops.append({"op": "replace", "path": path, "value": wanted_b64})
    else:
        ops.append({"op": "add", "path": path, "value": wanted_b64})
    return ops


async def _wait(event: asyncio.Event, seconds: float | None) -> None:
    """Until `event` is set or `seconds` have passed (None: no timer)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()


class SelfSignedCertificates:
    name = "self-signed-tls"

    def __init__(
        self,
        client: AsyncClient,
        *,
        namespace: str,
        secret_name: str,
        service_name: str,
        webhook_configuration: str | None,
        extra_hosts: tuple[str, ...] = (),
        mount_dir: Path | None = None,
        retire_after: float = RETIRE_AFTER_SECONDS,
        silence_limit: float = DEFAULT_SILENCE_LIMIT_SECONDS,
        backoff: Callable[[], Backoff] = Backoff,
        ca_lifetime: timedelta = CA_VALIDITY,
        serving_lifetime: timedelta = SERVING_VALIDITY,
        clock: Callable[[], datetime] = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self._client = client
        self.namespace = namespace
        self.secret_name = secret_name
        self.ca_secret_name = f"{secret_name}-ca"
        self.webhook_configuration = webhook_configuration
        self.mount_dir = mount_dir
        self.dns_names = service_dns_names(service_name, namespace) + extra_hosts
        self.retire_after = retire_after
        self._ca_lifetime = ca_lifetime
        self._serving_lifetime = serving_lifetime
        self._clock = clock
        self._monotonic = monotonic
        self._rng = rng or random.Random()
        self._context = server_context()
        self._bundle: CertificateBundle | None = None
        self._serving_ca: x509.Certificate | None = None
        self._announced: x509.Certificate | None = None  # published, about to be served
        self._retired: dict[bytes, float] = {}  # CA fingerprint -> when this replica moved off
        self._removed: set[bytes] = set()  # CAs this replica already took out of the bundle
        self._secret_changed = asyncio.Event()
        self._ca_wanted_changed = asyncio.Event()
        self._loaded = asyncio.Condition()
        self._tasks: list[asyncio.Task[None]] = []
        raw = RawApi(client)

        def by_name(resource: Any, scope: str | None, name: str) -> LightkubeListWatch:
            return LightkubeListWatch(raw, resource, scope, field_selector=f"metadata.name={name}")

        self._secrets = [
            Informer(
                f"secret/{name}",
                by_name(Secret, namespace, name),
                secret_version,
                backoff=backoff(),
                silence_limit=silence_limit,
            )
            for name in (secret_name, self.ca_secret_name)
        ]
        for informer in self._secrets:
            informer.add_handler(lambda _: self._secret_changed.set())
        self._configurations: Informer[tuple[WebhookCA, ...]] | None = None
        if webhook_configuration is not None:
            self._configurations = Informer(
                f"validatingwebhookconfiguration/{webhook_configuration}",
                by_name(ValidatingWebhookConfiguration, None, webhook_configuration),
                webhook_cas, backoff=backoff(), silence_limit=silence_limit,
            )  # fmt: skip
            self._configurations.add_handler(lambda _: self._ca_wanted_changed.set())
        self.loads = 0  # certificates loaded into the context, the first one included
        self.secret_writes = 0  # write rounds (CA and/or serving Secret) this replica made
        self.secret_conflicts = 0  # writes answered 409: another replica wrote first
        self.ca_bundle_writes = 0  # caBundle patches this replica made

    # --- what the webhook site and /readyz read ----------------------------------------------

    @property
    def context(self) -> ssl.SSLContext:
        return self._context

    @property
    def loaded(self) -> bool:
        return self._bundle is not None

    @property
    def not_after(self) -> float | None:
        return None if self._bundle is None else certificate_not_after(self._bundle.cert_pem)

    @property
    def bundle(self) -> CertificateBundle | None:
        return self._bundle

    @property
    def ca_bundle_verified(self) -> bool:
        """Every webhook's published caBundle verifies the certificate served here (true while
        the configuration does not exist: nobody calls the webhook then)."""
        if self._bundle is None:
            return False
        if self._configurations is None or self.webhook_configuration is None:
            return True
        if not self._configurations.synced.is_set():
            return False
        hooks = self._configurations.get("", self.webhook_configuration)
        if hooks is None:
            return True
        cert = self._bundle.cert_pem
        return all(issuer_in(cert, hook.ca_bundle_pem) is not None for hook in hooks)

    @property
    def informers(self) -> list[Informer[Any]]:
        """The watches: the two Secrets, then the webhook configuration (if any)."""
        extra = [] if self._configurations is None else [self._configurations]
        return [*self._secrets, *extra]

    async def wait_for_ca_bundle(self, verified: bool = True) -> None:
        """Until `ca_bundle_verified` is `verified` (bound it with asyncio.timeout)."""
        if self._configurations is None:
            raise RuntimeError("no webhook configuration to watch")
        await self._configurations.wait_for(lambda: self.ca_bundle_verified == verified)

    async def wait_for_loads(self, count: int) -> None:
        """Until `count` certificates have been loaded (bound it with asyncio.timeout)."""
        async with self._loaded:
            await self._loaded.wait_for(lambda: self.loads >= count)

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """The mounted certificate first (no API call); else one attempt in line so the site
        usually starts with a certificate; then the watches, renewal and caBundle upkeep."""
        renew_in: float | None = None
        if not self._load_mounted():
            try:
                renew_in = await self.sync()
            except Exception as error:
                _log.warning("could not set up the serving certificate yet; retrying",
                             error=error_detail(error))  # fmt: skip
        self._tasks = [
            asyncio.create_task(informer.run(), name=f"informer-{informer.name}")
            for informer in self.informers
        ]
        self._tasks.append(
            asyncio.create_task(self._keep_fresh(renew_in), name="self-signed-renewal")
        )
        if self._configurations is not None:
            self._tasks.append(
                asyncio.create_task(self._keep_ca_bundle(), name="self-signed-ca-bundle")
            )

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    # --- the certificate ---------------------------------------------------------------------

    def _load_mounted(self) -> bool:
        if self.mount_dir is None:
            return False
        mounted = served_bundle_from_files(self.mount_dir)
        if mounted is None:
            return False
        try:
            self._load(mounted)
        except (ssl.SSLError, OSError, ValueError) as error:
            _log.warning("the mounted certificate does not load", dir=str(self.mount_dir),
                         error=error_detail(error))  # fmt: skip
            return False
        _log.info("serving the mounted certificate until the API server answers",
                  dir=str(self.mount_dir))  # fmt: skip
        return True

    async def sync(self) -> float:
        """Make sure the Secrets hold a fresh bundle, load it; seconds until it is due."""
        bundle, assessment = await self._fresh_bundle()
        current = self._bundle
        if current is None or (current.cert_pem, current.key_pem, current.ca_bundle_pem) != (
            bundle.cert_pem, bundle.key_pem, bundle.ca_bundle_pem,
        ):  # fmt: skip
            if current is not None:
                await self._announce(bundle)
            self._load(bundle)
            async with self._loaded:
                self._loaded.notify_all()
        else:
            self._bundle = bundle  # the same certificate, now with the CA key (after a mount)
        return max((assessment.renew_at - self._clock()).total_seconds(), 0.0)

    async def _get_secret(self, name: str) -> Secret | None:
        try:
            return await self._client.get(Secret, name, namespace=self.namespace)
        except ApiError as error:
            if http_status(error) != HTTP_NOT_FOUND:
                raise
            return None

    async def _fresh_bundle(self) -> tuple[CertificateBundle, Fresh]:
        for _ in range(MAX_SECRET_ROUNDS):
            now = self._clock()
            serving = await self._get_secret(self.secret_name)
            ca = await self._get_secret(self.ca_secret_name)
            serving_data = None if serving is None else serving.data
            stored = bundle_from_secrets(None if ca is None else ca.data, serving_data)
            legacy = CA_KEY_KEY in (serving_data or {})
            assessment = assess(stored, self.dns_names, now)
            if isinstance(assessment, Fresh) and ca is not None and not legacy:
                assert stored is not None  # assess() never calls a missing bundle fresh
                return stored, assessment
            if isinstance(assessment, Fresh):
                assert stored is not None
                _log.info("moving the CA key into its own Secret", secret=self.ca_secret_name)
                bundle = stored
            else:
                _log.info("issuing certificates", why=assessment.why, secret=self.secret_name)
                bundle = renewed(
                    stored, assessment, self.dns_names, now,
                    ca_lifetime=self._ca_lifetime, serving_lifetime=self._serving_lifetime,
                )  # fmt: skip
            if await self._store(bundle, ca, serving):
                fresh = assess(bundle, self.dns_names, now)
                assert isinstance(fresh, Fresh), fresh
                return bundle, fresh
        raise RuntimeError(
            f"lost {MAX_SECRET_ROUNDS} races in a row writing Secrets "
            f"{self.namespace}/{self.ca_secret_name} and {self.secret_name}"
        )

    async def _store(
        self, bundle: CertificateBundle, ca: Secret | None, serving: Secret | None
    ) -> bool:
        """Write the CA Secret (when it changes), then the serving Secret; False if another
        replica wrote one of them first (409). A crash in between leaves a serving
        certificate the CA does not sign: the next round re-issues it."""
        try:
            ca_data = bundle.ca_secret_data()
            if ca is None or dict(ca.data or {}) != ca_data:
                await self._write(self.ca_secret_name, ca, "Opaque", ca_data)
            serving_data = bundle.serving_secret_data()
            if serving is None or dict(serving.data or {}) != serving_data:
                await self._write(self.secret_name, serving, "kubernetes.io/tls", serving_data)
        except ApiError as error:
            if http_status(error) == HTTP_CONFLICT:
                self.secret_conflicts += 1
                _log.info("another replica wrote the certificate Secrets first; reading them")
                return False
            raise
        self.secret_writes += 1
        return True

    async def _write(
        self, name: str, current: Secret | None, kind: str, data: dict[str, str]
    ) -> None:
        if current is None:
            await self._client.create(
                Secret(
                    metadata=ObjectMeta(name=name, namespace=self.namespace, labels=MANAGED_BY),
                    type=kind,
                    data=data,
                )
            )
            return
        metadata = current.metadata or ObjectMeta()
        await self._client.replace(
            Secret(
                metadata=ObjectMeta(
                    name=name,
                    namespace=self.namespace,
                    resourceVersion=metadata.resourceVersion,
                    labels={**(metadata.labels or {}), **MANAGED_BY},
                    annotations=metadata.annotations,
                ),
                type=current.type or kind,
                data=data,
            )
        )

    async def _announce(self, bundle: CertificateBundle) -> None:
        """Publish the CA of `bundle` before serving from it, so no API server call in between
        meets a certificate the caBundle does not verify. Best effort: a failure here only
        reopens that short window; the keeper loop retries."""
        self._announced = issuer_in(bundle.cert_pem, bundle.ca_bundle_pem)
        try:
            await self.publish_ca_bundle()
        except Exception as error:
            _log.warning("could not publish the new CA before serving from it",
                         error=error_detail(error))  # fmt: skip

    def _load(self, bundle: CertificateBundle) -> None:
        # load_cert_chain reads files only: a private directory that lives for one call.
        with tempfile.TemporaryDirectory(prefix="graceful-drain-tls-") as directory:
            cert_file, key_file = Path(directory) / "tls.crt", Path(directory) / "tls.key"
            cert_file.write_bytes(bundle.cert_pem)
            key_file.touch(mode=0o600)
            key_file.write_bytes(bundle.key_pem)
            server_context().load_cert_chain(cert_file, key_file)  # trial: never half-load
            self._context.load_cert_chain(cert_file, key_file)
        first = self._bundle is None
        self._bundle = bundle
        self._serve_from(issuer_in(bundle.cert_pem, bundle.ca_bundle_pem))
        self.loads += 1
        self._ca_wanted_changed.set()
        _log.info("serving certificate loaded" if first else "serving certificate renewed",
                  dns_names=list(self.dns_names))  # fmt: skip

    def _serve_from(self, ca: x509.Certificate | None) -> None:
        previous = self._serving_ca
        if previous is not None and (ca is None or fingerprint(ca) != fingerprint(previous)):
            self._retired[fingerprint(previous)] = self._monotonic()
        if ca is not None:
            self._retired.pop(fingerprint(ca), None)
            self._removed.discard(fingerprint(ca))
        self._serving_ca = ca
        self._announced = None

    async def _keep_fresh(self, renew_in: float | None) -> None:
        backoff = self._retry_backoff()
        delay = renew_in if renew_in is not None else 0.0
        while True:
            await _wait(self._secret_changed, min(delay, MAX_TIMER_SECONDS))
            self._secret_changed.clear()
            try:
                delay = await self.sync()
                backoff.reset()
            except Exception as error:
                delay = backoff.next_delay()
                _log.warning("certificate renewal failed; retrying", error=error_detail(error),
                             retry_in_seconds=delay)  # fmt: skip

    # --- the caBundle ------------------------------------------------------------------------

    def _removable(self) -> set[bytes]:
        now = self._monotonic()
        return {
            key
            for key, since in self._retired.items()
            if now - since >= self.retire_after and key not in self._removed
        }

    def _next_retirement_in(self) -> float | None:
        pending = [since for key, since in self._retired.items() if key not in self._removed]
        if not pending:
            return None
        return max(0.0, min(pending) + self.retire_after - self._monotonic())

    def wanted_ca_bundle(self, present_pem: bytes) -> bytes:
        """What one webhook's caBundle should hold now, given what it holds."""
        assert self._bundle is not None
        required = certificates(self._bundle.ca_bundle_pem)
        for ca in (self._serving_ca, self._announced):
            if ca is not None:
                required.append(ca)
        return merged_bundle(present_pem, required, self._removable(), self._clock())

    async def publish_ca_bundle(self) -> bool:
        """Patch every webhook whose caBundle lacks a CA it needs (or holds one to retire).
        True when nothing is left to do (the configuration absent included)."""
        configurations, name = self._configurations, self.webhook_configuration
        if self._bundle is None or configurations is None or name is None:
            return False
        if not configurations.synced.is_set():
            return False
        hooks = configurations.get("", name)
        if hooks is None:
            return True  # the watch calls again once it exists
        removable = self._removable()
        ops: list[dict[str, Any]] = []
        for index, hook in enumerate(hooks):
            present = hook.ca_bundle_pem
            wanted = self.wanted_ca_bundle(present)
            if present and same_certificates(wanted, present):
                continue
            ops += ca_bundle_ops(index, hook, base64.b64encode(wanted).decode("ascii"))
        if ops:
            await self._client.patch(
                ValidatingWebhookConfiguration, name, ops, patch_type=PatchType.JSON
            )
            self.ca_bundle_writes += 1
            _log.info("caBundle written", configuration=name, webhooks=len(hooks))
        for key in removable:
            self._removed.add(key)
            self._retired.pop(key, None)
        return True

    async def _keep_ca_bundle(self) -> None:
        """Publish whenever the configuration or the wanted CAs change, or a retired CA is
        due; a failed patch is retried with back-off, or at once on the next change."""
        backoff = self._retry_backoff()
        failed = False
        while True:
            timeout = backoff.next_delay() if failed else self._next_retirement_in()
            await _wait(self._ca_wanted_changed, timeout)
            self._ca_wanted_changed.clear()
            failed = not await self._try_publish()
            if not failed:
                backoff.reset()

    def _retry_backoff(self) -> Backoff:
        """A failed renewal or caBundle write waits 1 s, 2 s, ... up to 30 s, jittered."""
        return Backoff(RETRY_BASE_SECONDS, RETRY_MAX_SECONDS, rng=self._rng)

    async def _try_publish(self) -> bool:
        try:
            return await self.publish_ca_bundle()
        except Exception as error:
            _log.warning("could not write the caBundle; retrying",
                         configuration=self.webhook_configuration,
                         error=error_detail(error))  # fmt: skip
            return False
