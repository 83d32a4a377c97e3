"""One controller process: the pieces, wired, started in order and stopped in reverse.

    app = ControllerApp(config)            # or ControllerApp(config, client=..., tls=...)
    app.add_component(extra)               # anything with `name`, `async start()`, `async stop()`
    app.readiness.add("something", ...)    # extra /readyz checks
    await app.run(stop_event)

Components, in start order: the health site (so /healthz answers from the first moment), the
informer cache, the event recorder, the TLS source (certificate files, or the self-managed CA
with --self-signed), the webhook site, then the reconciler, or with --leader-elect the Lease
elector that runs the reconciler only while this replica leads (the webhook serves on every
replica). Added components start after them and stop before them. /readyz fails until every
cache has synced and TLS is loaded, whenever a cache has not heard from the API server for
longer than its `stale_after` (a silent watch whose re-list failed too), and again from the
moment shutdown begins.

The webhook hands DrainEvents the GracefulDrainStarted / GracefulDrainWaiting events and the
Warnings of `Reason.CANNOT_SURGE`, `Reason.CANNOT_PROTECT` and
`Reason.ENABLED_ANNOTATION_INVALID` (GracefulDrainCannotSurge, GracefulDrainCannotProtect,
GracefulDrainInvalidAnnotation); the reconciler writes GracefulDrainCompleted and
GracefulDrainTimeout.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import socket
import ssl
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, cast

from aiohttp import web
from lightkube import AsyncClient

from graceful_drain import __version__
from graceful_drain.controller.cache.cluster import ClusterCache
from graceful_drain.controller.decision.model import ObjectRef
from graceful_drain.controller.reconcile.bypass import BypassWatcher
from graceful_drain.controller.reconcile.reconciler import Reconciler
from graceful_drain.controller.serving.admission import MAX_REVIEW_BYTES
from graceful_drain.controller.serving.connections import ConnectionGuard
from graceful_drain.controller.serving.http import BodyHandler, WebhookServer
from graceful_drain.controller.serving.metrics import Metrics, Readiness, health_app
from graceful_drain.controller.serving.webhook import WEBHOOK_PATH, EvictionWebhook
from graceful_drain.controller.settings import ControllerConfig
from graceful_drain.controller.tls.certs import SelfSignedCertificates
from graceful_drain.controller.tls.context import ReloadingTLS, ServingTLS
from graceful_drain.controller.writes.events import DrainEvents
from graceful_drain.controller.writes.patcher import LightkubeDeploymentPatcher
from graceful_drain.errors import ConfigError
from graceful_drain.kube.backoff import Backoff
from graceful_drain.kube.client import create_client, load_config
from graceful_drain.kube.events import EventRecorder
from graceful_drain.kube.informer import DEFAULT_SILENCE_LIMIT_SECONDS
from graceful_drain.kube.lease import LeaderElector
from graceful_drain.kube.meta import utc_now
from graceful_drain.logs import configure_logging, get_logger

SHUTDOWN_TIMEOUT_SECONDS = 5.0  # in-flight admission requests get this long to finish
DEFAULT_CONTROLLER_NAMESPACE = "graceful-drain"
SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
POD_NAME_VARIABLE = "POD_NAME"  # the Downward API's metadata.name

_log = get_logger("app")


class Component(Protocol):
    """A long-running part of the process."""

    @property
    def name(self) -> str: ...

    async def start(self) -> None:
        """Begin work and return promptly (spawn tasks for loops)."""

    async def stop(self) -> None:
        """Stop work and release resources; called once, after a successful start."""


class TLSComponent(ServingTLS, Component, Protocol):
    """A certificate source that is also started and stopped (files, or the self-managed CA)."""


def _by_resource(counts: Mapping[str, int]) -> dict[tuple[str, ...], float]:
    return {(resource,): float(count) for resource, count in counts.items()}


class HttpSite:
    """An aiohttp application served on host:port, HTTPS when given an SSL context (the health
    site; the webhook has a server of its own, see `webhook_site`)."""

    def __init__(
        self,
        name: str,
        app: web.Application,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.name = name
        self._app = app
        self._host = host
        self._port = port
        self._ssl = ssl_context
        self._runner: web.AppRunner | None = None

    @property
    def port(self) -> int:
        """The bound port (useful when configured as 0)."""
        if self._runner is None:
            return self._port
        for address in self._runner.addresses:
            return int(address[1])
        return self._port

    async def start(self) -> None:
        self._runner = web.AppRunner(
            self._app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_SECONDS
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port, ssl_context=self._ssl)
        await site.start()
        _log.info("listening", site=self.name, host=self._host, port=self.port,
                  tls=self._ssl is not None)  # fmt: skip

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def webhook_site(
    routes: Mapping[str, BodyHandler],
    host: str,
    port: int,
    ssl_context: ssl.SSLContext,
    guard: ConnectionGuard | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> WebhookServer:
    """The webhook's HTTPS site as the controller serves it: POST on `routes` (the controller's
    one is `{WEBHOOK_PATH: EvictionWebhook.answer}`), behind a `ConnectionGuard`, its
    requests' arrivals read on `clock` (the webhook's budgets count from them). The
    benchmark serves its webhook through this very function."""
    return WebhookServer(
        "webhook", routes, host, port, ssl_context, guard,
        max_body=MAX_REVIEW_BYTES, shutdown_timeout=SHUTDOWN_TIMEOUT_SECONDS, clock=clock,
    )  # fmt: skip


class ControllerApp:
    def __init__(
        self,
        config: ControllerConfig,
        *,
        client: AsyncClient | None = None,
        tls: TLSComponent | None = None,
        cache_backoff: Callable[[], Backoff] = Backoff,
        identity: str | None = None,
        watch_silence_limit: float = DEFAULT_SILENCE_LIMIT_SECONDS,
        connection_guard: ConnectionGuard | None = None,
        self_signed_options: Mapping[str, Any] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._watch_silence_limit = watch_silence_limit
        self._cache_backoff = cache_backoff
        self._self_signed_options = dict(self_signed_options or {})  # e.g. retire_after
        self.identity = identity or controller_identity()
        self.namespace = config.controller_namespace or in_cluster_namespace()
        # Certificate files are checked before any client exists: a bad path is a config error.
        from_files = None if tls is not None or config.self_signed else _tls_from_files(config)
        self._owns_client = client is None
        self.client = client or create_client(config.kubeconfig, config.kube_context)
        self.tls: TLSComponent = tls or from_files or self._self_signed()
        self.metrics = Metrics()
        self.readiness = Readiness()
        self._wire_drain(config, monotonic)
        self.health_site = HttpSite(
            "health", health_app(self.metrics, self.readiness), config.bind_address,
            config.metrics_port,
        )  # fmt: skip
        self.webhook_site = webhook_site(
            {WEBHOOK_PATH: self.webhook.answer}, config.bind_address, config.webhook_port,
            self.tls.context, connection_guard, monotonic,
        )  # fmt: skip
        self._track_metrics()
        self._track_readiness()
        self.components: list[Component] = [
            self.health_site, self.cache, self.recorder, self.tls, self.webhook_site,
            self.elector or self.reconciler,
        ]  # fmt: skip
        self._started: list[Component] = []

    def _wire_drain(self, config: ControllerConfig, monotonic: Callable[[], float]) -> None:
        """The cache and what reads and writes through it: the events, the webhook, the
        reconciler (behind its elector with leader election) and the bypass watcher."""
        self.cache = ClusterCache(
            self.client,
            namespaces=config.namespaces,
            enabled_annotation=config.enabled_annotation,
            backoff=self._cache_backoff,
            silence_limit=self._watch_silence_limit,
        )
        self.metrics.track_cache_sync(self.cache.sync_status)
        self.metrics.track_cache_staleness(
            self.cache.staleness_status, self.cache.silent_watch_counts
        )
        self.recorder = EventRecorder(self.client, instance=self.identity)
        self.events = DrainEvents(
            self.recorder, uid_of=self._deployment_uid, node_events=not config.namespaces
        )
        self.webhook = EvictionWebhook(
            self.cache,
            LightkubeDeploymentPatcher(self.client),
            config=config.decision_config(),
            metrics=self.metrics,
            events=self.events,
            deadlines=self.cache.node_deadline,
            monotonic=monotonic,
        )
        self.reconciler = Reconciler(
            self.cache.deployments,
            LightkubeDeploymentPatcher(self.client),
            self.events,
            rollout_timeout=config.rollout_timeout,
            metrics=self.metrics,
            ledger_pod_uid=lambda: self.cache.ledger_pod_uid,
        )
        # Reports held pods deleted without their eviction, on the replica that reconciles.
        self.bypass = BypassWatcher(
            self.cache, self.events, self.metrics, active=lambda: self.reconciler.running
        )
        self.cache.pods.add_handler(self.bypass.on_pod_change)
        self.elector: LeaderElector | None = None
        if config.leader_elect:
            self.elector = LeaderElector(
                self.client, namespace=self.namespace, name=config.lease_name,
                identity=self.identity, leading=self.reconciler,
            )  # fmt: skip

    def _track_readiness(self) -> None:
        """What /readyz waits for (docs/operations.md)."""
        self.readiness.add("caches-synced", lambda: self.cache.synced)
        self.readiness.add("caches-fresh", lambda: self.cache.fresh)
        self.readiness.add("tls-loaded", lambda: self.tls.loaded)
        if isinstance(self.tls, SelfSignedCertificates):
            tls = self.tls
            self.readiness.add("ca-bundle-verified", lambda: tls.ca_bundle_verified)

    def _track_metrics(self) -> None:
        """The values /metrics reads at scrape time (docs/operations.md, "Metrics")."""
        track = self.metrics.track
        self.metrics.rollout_timeout.set(self.config.rollout_timeout.total_seconds())
        track("certificate_expiry_timestamp_seconds",
              "When the webhook's serving certificate expires (Unix seconds)",
              lambda: self.tls.not_after)  # fmt: skip
        track("leader", "1 while this replica runs the reconciler (holds the Lease), else 0",
              lambda: 1.0 if self.reconciler.running else 0.0)  # fmt: skip
        track("oldest_drain_age_seconds",
              "Age of the oldest drain in progress (restarted-at without completed-at); 0: none",
              self._oldest_drain_age)  # fmt: skip
        track("cache_lists", "Complete lists by the informers of the resource: one at start, "
              "then one per re-list", lambda: _by_resource(self.cache.list_counts()),
              kind="counter", labels=["resource"])  # fmt: skip
        track("cache_list_watch_errors", "Failed list or watch requests of the resource "
              "(each retried with back-off)",
              lambda: _by_resource(self.cache.list_watch_error_counts()),
              kind="counter", labels=["resource"])  # fmt: skip
        # controller-runtime's reconcile_total{controller, result}, reconcile_errors_total and
        # terminal_reconcile_errors_total, from the reconcile loop's counts (kube/loop.py).
        counts, controller = self.reconciler.counts, self.reconciler.name
        track("reconcile", "Reconciles by controller and result: success (done), error (it "
              "raised), requeue (again after the key's back-off), requeue_after (again at a "
              "deadline)", lambda: {(controller, outcome.value): float(count)
                                    for outcome, count in counts.outcomes.items()},
              kind="counter", labels=["controller", "result"])  # fmt: skip
        track("reconcile_errors", "Reconciles that raised: retried with back-off, or terminal",
              lambda: {(controller,): float(counts.errors)},
              kind="counter", labels=["controller"])  # fmt: skip
        track("terminal_reconcile_errors", "Reconciles that raised a terminal error (retrying "
              "cannot help): not retried until the object changes or its deadline",
              lambda: {(controller,): float(counts.terminal_errors)},
              kind="counter", labels=["controller"])  # fmt: skip
        track("events", "Kubernetes Events by outcome: created, aggregated (folded into an "
              "existing Event), failed (refused or unreachable API), dropped (queue full)",
              self._event_outcomes, kind="counter", labels=["outcome"])  # fmt: skip
        track("webhook_connections", "Connections open on the webhook port",
              lambda: float(self.webhook_site.guard.stats.open))  # fmt: skip
        track("webhook_connections_closed", "Webhook connections the server closed by why: "
              "read-timeout (a request not whole within the read deadline), idle (keep-alive "
              "unused for its timeout), evicted (room made under the cap), refused (the cap "
              "reached with every connection answering)",
              self._connections_closed, kind="counter", labels=["why"])  # fmt: skip

    def _connections_closed(self) -> dict[tuple[str, ...], float]:
        stats = self.webhook_site.guard.stats
        return {("read-timeout",): float(stats.timed_out), ("idle",): float(stats.idle_closed),
                ("evicted",): float(stats.evicted), ("refused",): float(stats.refused)}  # fmt: skip

    def _oldest_drain_age(self) -> float:
        now = utc_now()
        started = [
            d.restarted_at for d in self.cache.deployments.items()
            if d.restarted_at is not None and d.completed_at_raw is None
        ]  # fmt: skip
        return max(((now - when).total_seconds() for when in started), default=0.0)

    def _event_outcomes(self) -> dict[tuple[str, ...], float]:
        stats = self.recorder.stats
        return {
            ("created",): stats.created, ("aggregated",): stats.aggregated,
            ("failed",): stats.failed, ("dropped",): stats.dropped,
        }  # fmt: skip

    def _self_signed(self) -> TLSComponent:
        return SelfSignedCertificates(
            self.client,
            namespace=self.namespace,
            secret_name=self.config.self_signed_secret,
            service_name=self.config.service_name,
            webhook_configuration=self.config.webhook_configuration,
            extra_hosts=self.config.self_signed_hosts,
            mount_dir=self.config.self_signed_mount,
            silence_limit=self._watch_silence_limit,
            backoff=self._cache_backoff,
            **self._self_signed_options,
        )

    def _deployment_uid(self, ref: ObjectRef) -> str | None:
        deployment = self.cache.deployment(ref.namespace, ref.name)
        return None if deployment is None else deployment.uid

    def add_component(self, component: Component) -> None:
        """Start `component` after the core ones (call before `start`)."""
        self.components.append(component)

    async def start(self) -> None:
        """Start every component in order; if one fails, stop those already started."""
        try:
            for component in self.components:
                await component.start()
                self._started.append(component)
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        self.readiness.shutting_down = True
        while self._started:
            component = self._started.pop()
            try:
                await component.stop()
            except Exception as error:
                _log.error("component failed to stop", component=component.name, error=str(error))
        if self._owns_client:
            await self.client.close()
            self._owns_client = False

    async def run(self, stop: asyncio.Event) -> None:
        await self.start()
        _log.info("controller started", webhook_port=self.webhook_site.port,
                  metrics_port=self.health_site.port)  # fmt: skip
        try:
            await stop.wait()
            _log.info("shutting down")
        finally:
            await self.stop()


def preflight(config: ControllerConfig) -> None:
    """What can be refused before the process starts serving. Raises ConfigError."""
    if not config.self_signed:
        _tls_from_files(config)
    try:
        load_config(config.kubeconfig, config.kube_context)
    except Exception as error:  # lightkube ConfigError, YAML errors, missing keys...
        raise ConfigError(
            "cannot load the Kubernetes client configuration (--kubeconfig, --context, or the "
            f"in-cluster service account): {type(error).__name__}: {error}"
        ) from None


def _tls_from_files(config: ControllerConfig) -> TLSComponent:
    if config.tls_cert_file is None or config.tls_key_file is None:
        raise ConfigError("the webhook needs --tls-cert-file and --tls-key-file, or --self-signed")
    reloading = ReloadingTLS(
        config.tls_cert_file,
        config.tls_key_file,
        interval=config.tls_reload_interval.total_seconds(),
    )
    return cast(TLSComponent, reloading)


def controller_identity() -> str:
    """This replica's name in the Lease and in events: the pod name (Downward API), else
    `<hostname>_<uuid>` as client-go's leader election suggests."""
    pod = os.environ.get(POD_NAME_VARIABLE, "").strip()
    return pod or f"{socket.gethostname()}_{uuid.uuid4()}"


def in_cluster_namespace(path: Path = SERVICE_ACCOUNT_NAMESPACE_FILE) -> str:
    """The service account's namespace in a pod, else DEFAULT_CONTROLLER_NAMESPACE."""
    try:
        return path.read_text().strip() or DEFAULT_CONTROLLER_NAMESPACE
    except OSError:
        return DEFAULT_CONTROLLER_NAMESPACE


async def serve(config: ControllerConfig) -> int:
    """Run until SIGTERM or SIGINT; 0 on a clean shutdown, 1 if the controller failed."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        app = ControllerApp(config)
        await app.run(stop)
    except ConfigError:
        raise
    except Exception as error:
        _log.error("controller failed", error=str(error), exc_info=error)
        return 1
    return 0


def raise_open_file_limit() -> tuple[int, int]:
    """Raise the soft limit on open files to the hard one (many containers start at a soft
    1,024), logging both; (soft, hard) as they are after. The webhook port holds up to
    `DEFAULT_MAX_CONNECTIONS` connections plus one accept backlog (docs/reliability.md)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    raised = soft
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            raised = hard
        except (ValueError, OSError) as error:  # an infinite hard limit above nr_open
            _log.warning("cannot raise the open-file limit", soft=soft, hard=hard,
                         error=str(error))  # fmt: skip
    _log.info("open-file limit", soft=raised, hard=hard, soft_at_start=soft)
    return raised, hard


def run_controller(config: ControllerConfig) -> int:
    """The process entry point: logging, the open-file limit, then one event loop (uvloop
    where available)."""
    configure_logging(config.log_format, config.log_level)
    _log.info("configuration", version=__version__, **config.log_fields())
    raise_open_file_limit()
    try:
        import uvloop
    except ImportError:
        return asyncio.run(serve(config))
    return cast(int, uvloop.run(serve(config)))
