"""`--self-signed`: the controller keeps its own CA and serving certificate.

    tls = SelfSignedCertificates(client, namespace="graceful-drain",
                                 secret_name="graceful-drain-webhook-tls",
                                 service_name="graceful-drain-webhook",
                                 webhook_configuration="graceful-drain")
    await tls.start()       # a component; `tls.context` serves the webhook, `tls.loaded` gates
                            # /readyz

Every replica runs this; the Secret is the single source of truth:
- absent: generate a CA and a serving certificate for `<service>.<namespace>.svc`, create the
  Secret; a 409 means another replica created it first: read and use theirs;
- present and fresh: use it (a second replica, a restart);
- due (two thirds of a lifetime gone), malformed, or for other names: renew and update the
  Secret with the resourceVersion it was read at; a 409 means another replica renewed it
  first: read theirs and judge again.
The certificate is loaded into one long-lived SSLContext (connections opened afterwards get
it), and `caBundle` is written into every webhook of the ValidatingWebhookConfiguration with a
JSON patch touching only `/webhooks/<i>/clientConfig/caBundle` (each guarded by a `test` of
the webhook's name), at the first load and whenever the CA changes, retried with back-off
until the configuration exists (it may be applied after the controller). It is not watched:
the shipped RBAC grants get and patch on it only, and `kubectl apply` of the manifests leaves
a caBundle it never set alone. A timer at the renewal time starts over.
"""

from __future__ import annotations

import asyncio
import random
import ssl
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.core_v1 import Secret
from lightkube.types import PatchType

from graceful_drain.controller.pki import (
    CA_VALIDITY,
    SERVING_VALIDITY,
    CertificateBundle,
    Fresh,
    assess,
    bundle_from_secret_data,
    renewed,
    service_dns_names,
)
from graceful_drain.controller.tls import server_context
from graceful_drain.kube.client import error_detail, http_status
from graceful_drain.logs import get_logger

HTTP_NOT_FOUND = 404
HTTP_CONFLICT = 409
MAX_SECRET_ROUNDS = 5  # create/update races lost in a row before giving up for this round
RETRY_BASE_SECONDS = 1.0
RETRY_MAX_SECONDS = 60.0
MAX_TIMER_SECONDS = 24 * 3600.0  # re-judge at least daily (wall-clock jumps, suspended VMs)
MANAGED_BY = {"app.kubernetes.io/managed-by": "graceful-drain"}

_log = get_logger("self-signed-tls")


def utc_now() -> datetime:
    return datetime.now(UTC)


def ca_bundle_patch(configuration: dict[str, Any], ca_bundle_b64: str) -> list[dict[str, Any]]:
    """JSON patch ops setting caBundle on every webhook of `configuration` that lacks it."""
    ops: list[dict[str, Any]] = []
    for index, webhook in enumerate(configuration.get("webhooks") or []):
        if (webhook.get("clientConfig") or {}).get("caBundle") == ca_bundle_b64:
            continue
        ops.append({"op": "test", "path": f"/webhooks/{index}/name", "value": webhook["name"]})
        ops.append(
            {"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle",
             "value": ca_bundle_b64}
        )  # fmt: skip
    return ops


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
        ca_lifetime: timedelta = CA_VALIDITY,
        serving_lifetime: timedelta = SERVING_VALIDITY,
        clock: Callable[[], datetime] = utc_now,
        rng: random.Random | None = None,
    ) -> None:
        self._client = client
        self.namespace = namespace
        self.secret_name = secret_name
        self.webhook_configuration = webhook_configuration
        self.dns_names = service_dns_names(service_name, namespace) + extra_hosts
        self._ca_lifetime = ca_lifetime
        self._serving_lifetime = serving_lifetime
        self._clock = clock
        self._rng = rng or random.Random()
        self._context = server_context()
        self._bundle: CertificateBundle | None = None
        self._bundle_changed = asyncio.Event()
        self._loaded = asyncio.Condition()
        self._tasks: list[asyncio.Task[None]] = []
        self.loads = 0  # certificates loaded into the context, the first one included
        self.secret_writes = 0  # Secrets this replica created or updated
        self.secret_conflicts = 0  # writes answered 409: another replica wrote first

    # --- what the webhook site reads ---------------------------------------------------------

    @property
    def context(self) -> ssl.SSLContext:
        return self._context

    @property
    def loaded(self) -> bool:
        return self._bundle is not None

    @property
    def bundle(self) -> CertificateBundle | None:
        return self._bundle

    async def wait_for_loads(self, count: int) -> None:
        """Until `count` certificates have been loaded (bound it with asyncio.timeout)."""
        async with self._loaded:
            await self._loaded.wait_for(lambda: self.loads >= count)

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """One attempt in line (so the site usually starts with a certificate), then the
        renewal timer and the caBundle upkeep in the background."""
        renew_in: float | None
        try:
            renew_in = await self.sync()
        except Exception as error:
            _log.warning("could not set up the serving certificate yet; retrying",
                         error=error_detail(error))  # fmt: skip
            renew_in = None
        self._tasks = [
            asyncio.create_task(self._keep_fresh(renew_in), name="self-signed-renewal"),
        ]
        if self.webhook_configuration is not None:
            self._tasks.append(
                asyncio.create_task(self._keep_ca_bundle(), name="self-signed-ca-bundle")
            )

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    # --- the certificate ---------------------------------------------------------------------

    async def sync(self) -> float:
        """Make sure the Secret holds a fresh bundle, load it; seconds until it is due."""
        bundle, assessment = await self._fresh_bundle()
        if bundle != self._bundle:
            self._load(bundle)
            async with self._loaded:
                self._loaded.notify_all()
        return max((assessment.renew_at - self._clock()).total_seconds(), 0.0)

    async def _fresh_bundle(self) -> tuple[CertificateBundle, Fresh]:
        for _ in range(MAX_SECRET_ROUNDS):
            now = self._clock()
            try:
                secret = await self._client.get(Secret, self.secret_name, namespace=self.namespace)
            except ApiError as error:
                if http_status(error) != HTTP_NOT_FOUND:
                    raise
                secret = None
            stored = None if secret is None else bundle_from_secret_data(secret.data)
            assessment = assess(stored, self.dns_names, now)
            if isinstance(assessment, Fresh):
                assert stored is not None  # assess() never calls a missing bundle fresh
                return stored, assessment
            _log.info("issuing certificates", why=assessment.why, secret=self.secret_name)
            bundle = renewed(
                stored, assessment, self.dns_names, now,
                ca_lifetime=self._ca_lifetime, serving_lifetime=self._serving_lifetime,
            )  # fmt: skip
            if await self._store(bundle, secret):
                fresh = assess(bundle, self.dns_names, now)
                assert isinstance(fresh, Fresh), fresh
                return bundle, fresh
        raise RuntimeError(
            f"lost {MAX_SECRET_ROUNDS} races in a row writing Secret "
            f"{self.namespace}/{self.secret_name}"
        )

    async def _store(self, bundle: CertificateBundle, current: Secret | None) -> bool:
        """Create or update the Secret; False if another replica wrote it first (409)."""
        try:
            if current is None:
                await self._client.create(
                    Secret(
                        metadata=ObjectMeta(
                            name=self.secret_name, namespace=self.namespace, labels=MANAGED_BY
                        ),
                        type="kubernetes.io/tls",
                        data=bundle.secret_data(),
                    )
                )
            else:
                metadata = current.metadata or ObjectMeta()
                await self._client.replace(
                    Secret(
                        metadata=ObjectMeta(
                            name=self.secret_name,
                            namespace=self.namespace,
                            resourceVersion=metadata.resourceVersion,
                            labels={**(metadata.labels or {}), **MANAGED_BY},
                            annotations=metadata.annotations,
                        ),
                        type=current.type or "kubernetes.io/tls",
                        data=bundle.secret_data(),
                    )
                )
        except ApiError as error:
            if http_status(error) == HTTP_CONFLICT:
                self.secret_conflicts += 1
                _log.info("another replica wrote the certificate Secret first; reading it")
                return False
            raise
        self.secret_writes += 1
        return True

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
        ca_changed = self._bundle is None or self._bundle.ca_bundle_pem != bundle.ca_bundle_pem
        self._bundle = bundle
        self.loads += 1
        if ca_changed:
            self._bundle_changed.set()
        _log.info("serving certificate loaded" if first else "serving certificate renewed",
                  dns_names=list(self.dns_names))  # fmt: skip

    async def _keep_fresh(self, renew_in: float | None) -> None:
        failures = 0 if renew_in is not None else 1
        delay = renew_in if renew_in is not None else RETRY_BASE_SECONDS
        while True:
            await asyncio.sleep(min(delay, MAX_TIMER_SECONDS))
            try:
                delay = await self.sync()
                failures = 0
            except Exception as error:
                failures += 1
                delay = min(RETRY_BASE_SECONDS * 2 ** (failures - 1), RETRY_MAX_SECONDS)
                _log.warning("certificate renewal failed; retrying", error=error_detail(error),
                             retry_in_seconds=delay)  # fmt: skip

    # --- the caBundle ------------------------------------------------------------------------

    async def publish_ca_bundle(self) -> bool:
        """Write caBundle where it differs. True if the configuration exists and now has it."""
        if self.webhook_configuration is None or self._bundle is None:
            return False
        try:
            configuration = await self._client.get(
                ValidatingWebhookConfiguration, self.webhook_configuration
            )
        except ApiError as error:
            if http_status(error) == HTTP_NOT_FOUND:
                _log.info("ValidatingWebhookConfiguration not found yet",
                          name=self.webhook_configuration)  # fmt: skip
                return False
            raise
        return await self._patch_ca_bundle(configuration.to_dict())

    async def _patch_ca_bundle(self, configuration: dict[str, Any]) -> bool:
        if self._bundle is None or self.webhook_configuration is None:
            return False
        ops = ca_bundle_patch(configuration, self._bundle.ca_bundle_b64)
        if not ops:
            return True
        await self._client.patch(
            ValidatingWebhookConfiguration, self.webhook_configuration, ops,
            patch_type=PatchType.JSON,
        )  # fmt: skip
        _log.info("caBundle written", configuration=self.webhook_configuration,
                  webhooks=len(ops) // 2)  # fmt: skip
        return True

    async def _keep_ca_bundle(self) -> None:
        """Publish the caBundle whenever the CA changes (first load included), retrying with
        back-off until it is written: the configuration may be applied after the controller."""
        while True:
            await self._bundle_changed.wait()
            self._bundle_changed.clear()
            failures = 0
            while not await self._try_publish():
                failures += 1
                delay = min(RETRY_BASE_SECONDS * 2 ** (failures - 1), RETRY_MAX_SECONDS)
                await asyncio.sleep(delay * (1 + self._rng.random() / 2))

    async def _try_publish(self) -> bool:
        try:
            return await self.publish_ca_bundle()
        except Exception as error:
            _log.warning("could not write the caBundle; retrying",
                         configuration=self.webhook_configuration,
                         error=error_detail(error))  # fmt: skip
            return False
