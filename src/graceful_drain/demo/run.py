"""One demo run, both runs with --compare, and the `graceful-drain demo` subcommand.

Each run gets a fresh in-process cluster: kubesim with two nodes, its built-in controllers,
scheduler and kubelets; with the controller, a ControllerApp in this process whose webhook is
registered through the shipped ValidatingWebhookConfiguration and served over TLS. The drain
client acts as its upstream counterpart does, with its upstream timings (kubectl retries a
refused eviction every 5s, Cluster Autoscaler every 10s, Karpenter backs off from 100ms).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TextIO, cast

from graceful_drain.controller.app import ControllerApp
from graceful_drain.controller.settings import ControllerConfig
from graceful_drain.controller.writes.events import DRAIN_COMPLETED, DRAIN_TIMEOUT
from graceful_drain.kube.backoff import Backoff
from graceful_drain.logs import configure_logging
from kubesim.client import KubeClient, resource_path
from kubesim.cluster.cluster import Cluster
from kubesim.drain import CLIENTS, DrainClient
from kubesim.recorder import AvailabilityRecorder
from kubesim.scenario_runner import DRAIN_IDENTITIES
from kubesim.sim import KubeSim

from . import workload
from .live import LiveTimeline
from .observe import DeploymentEvents, EvictionRecordingClient, PodDepartures
from .options import DemoOptions, resolve_demo_options
from .registration import (
    CONTROLLER_NAMESPACE,
    SERVICE,
    SERVICE_PORT,
    issue_webhook_tls,
    webhook_configuration,
)
from .report import Figures, figures, json_document, summary_lines
from .timeline import RunRecord

Clock = Callable[[], float]

# Bounds on each phase, so the demo always ends (well under a minute with --compare).
READY_BUDGET_SECONDS = 20.0
DRAIN_BUDGET_SECONDS = 40.0
SETTLE_BUDGET_SECONDS = 10.0
# Short enough that a rollout that cannot finish shows the escape hatch within the drain budget.
ROLLOUT_TIMEOUT = timedelta(seconds=30)
DRAIN_ENDED = frozenset({DRAIN_COMPLETED, DRAIN_TIMEOUT})  # the reconciler's last word
EXIT_DRAIN_INCOMPLETE = 1

WEBHOOK_CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


class DemoError(RuntimeError):
    """The demo's cluster did not reach the state a run needs."""


def controller_config(kubeconfig: Path, cert_file: Path, key_file: Path) -> ControllerConfig:
    return ControllerConfig(
        rollout_timeout=ROLLOUT_TIMEOUT,
        bind_address="127.0.0.1",
        webhook_port=0,
        metrics_port=0,
        tls_cert_file=cert_file,
        tls_key_file=key_file,
        log_level="warning",
        kubeconfig=kubeconfig,
    )


async def _install_controller(
    sim: KubeSim, admin: KubeClient, stack: contextlib.AsyncExitStack, workdir: Path
) -> ControllerApp:
    """The controller in this process, reachable as deploy/ makes it: Service + webhook config."""
    tls = issue_webhook_tls(workdir)
    app = ControllerApp(
        controller_config(sim.kubeconfig_path, tls.cert_file, tls.key_file),
        cache_backoff=lambda: Backoff(0.05, 1.0),
    )
    await app.start()
    stack.push_async_callback(app.stop)
    async with asyncio.timeout(READY_BUDGET_SECONDS):
        await app.cache.wait_synced()
    await admin.create(
        resource_path("v1", "namespaces"),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CONTROLLER_NAMESPACE}},
    )
    sim.webhook_services.register(
        CONTROLLER_NAMESPACE, SERVICE, SERVICE_PORT, "127.0.0.1", app.webhook_site.port
    )
    await admin.create(WEBHOOK_CONFIGURATIONS, webhook_configuration(tls.ca_pem))
    return app


def _drain_client(
    sim: KubeSim, name: str, clock: Clock
) -> tuple[DrainClient, EvictionRecordingClient]:
    user, groups, agent = DRAIN_IDENTITIES[name]
    client = EvictionRecordingClient(
        sim.url, sim.user_token(user, groups), sim.ca_pem, user_agent=agent, clock=clock
    )
    parameters: dict[str, Any] = {"clock": clock}
    if name == "kubectl":  # as `kubectl drain --ignore-daemonsets --delete-emptydir-data`
        parameters |= {"ignore_daemonsets": True, "delete_emptydir_data": True}
    cls: Any = CLIENTS[name]
    return cast(DrainClient, cls(client, **parameters)), client


@dataclass(frozen=True)
class _Watched:
    """One run's cluster and what watches it."""

    sim: KubeSim
    admin: KubeClient
    recorder: AvailabilityRecorder
    events: DeploymentEvents
    pods: PodDepartures


async def _watched_cluster(
    stack: contextlib.AsyncExitStack, workdir: Path, clock: Clock, *, with_controller: bool
) -> _Watched:
    """kubesim with its nodes and built-in controllers, what the run records started, and with
    the controller graceful-drain installed; `stack` stops them all."""
    namespace, name = workload.NAMESPACE, workload.DEPLOYMENT
    sim = await stack.enter_async_context(KubeSim(kubeconfig_path=workdir / "kubeconfig"))
    await stack.enter_async_context(Cluster(sim, nodes=workload.nodes()))
    admin = KubeClient(sim.url, sim.admin_token, sim.ca_pem, user_agent="graceful-drain-demo")
    stack.push_async_callback(admin.close)
    recorder = await stack.enter_async_context(
        AvailabilityRecorder(admin, namespace=namespace, clock=clock)
    )
    events = DeploymentEvents(admin, namespace, name, clock=clock)
    pods = PodDepartures(admin, namespace, clock=clock)
    for observer in (events, pods):
        await observer.start()
        stack.push_async_callback(observer.stop)
    if with_controller:
        await _install_controller(sim, admin, stack, workdir)
    return _Watched(sim, admin, recorder, events, pods)


async def _deploy(watched: _Watched, options: DemoOptions) -> None:
    """The demo's Deployment, created and Ready (else DemoError, after READY_BUDGET_SECONDS)."""
    namespace, name = workload.NAMESPACE, workload.DEPLOYMENT
    recorder = watched.recorder
    await watched.admin.create(
        resource_path("apps/v1", "deployments", namespace),
        workload.deployment(options.ready_delay),
    )
    try:
        async with asyncio.timeout(READY_BUDGET_SECONDS):
            await recorder.wait_until(lambda: recorder.ready(name, namespace) >= 1)
    except TimeoutError:
        raise DemoError(f"Deployment {namespace}/{name} did not become Ready") from None


async def _settle(watched: _Watched, *, with_controller: bool) -> None:
    """Wait, at most SETTLE_BUDGET_SECONDS, for the Deployment to be Ready again and, with the
    controller, for its drain to be reported ended: the outage a drain causes can outlast it."""
    namespace, name = workload.NAMESPACE, workload.DEPLOYMENT
    recorder, events = watched.recorder, watched.events
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(SETTLE_BUDGET_SECONDS):
            await recorder.wait_until(lambda: recorder.ready(name, namespace) >= 1)
            if with_controller:
                await events.wait_until(lambda: bool(DRAIN_ENDED & set(events.reasons())))


async def run_once(
    options: DemoOptions, *, with_controller: bool, workdir: Path, clock: Clock = time.monotonic,
    out: TextIO | None = None,
) -> RunRecord:  # fmt: skip
    """Build the cluster, drain node-a once, and return what was seen; with `out`, print the
    timeline there as it happens."""
    namespace, name = workload.NAMESPACE, workload.DEPLOYMENT
    async with contextlib.AsyncExitStack() as stack:
        watched = await _watched_cluster(stack, workdir, clock, with_controller=with_controller)
        recorder, events, pods = watched.recorder, watched.events, watched.pods
        await _deploy(watched, options)

        drain, drain_api = _drain_client(watched.sim, options.client, clock)
        stack.push_async_callback(drain_api.close)
        started = recorder.mark_drain_started(workload.DRAINED_NODE, options.client).at
        finished: float | None = None
        error: str | None = None

        def observed(settled: float) -> RunRecord:
            seen = recorder.timeline(name, namespace)
            return RunRecord(
                client=options.client,
                node=workload.DRAINED_NODE,
                deployment=f"{namespace}/{name}",
                with_controller=with_controller,
                started=started,
                finished=finished,
                error=error,
                settled=settled,
                evictions=tuple(drain_api.evictions),
                ready=seen.samples,
                replicasets=seen.replicasets,
                events=tuple(events.seen),
                pods=tuple(pods.seen),
            )

        live = None if out is None else LiveTimeline(out, observed, clock)
        printing = None if live is None else asyncio.create_task(live.run(), name="demo-live")
        try:
            async with asyncio.timeout(DRAIN_BUDGET_SECONDS):
                result = await drain.drain(workload.DRAINED_NODE)
            finished = recorder.mark_drain_finished(result).at
            if not result.drained:
                error = result.error or "the node was not drained"
        except TimeoutError:
            pass

        await _settle(watched, with_controller=with_controller)
        if printing is not None:
            printing.cancel()
            await asyncio.gather(printing, return_exceptions=True)
        record = observed(clock())
        if live is not None:
            live.finish(record)
        return record


def _header(options: DemoOptions) -> list[str]:
    ready = workload.seconds_text(options.ready_delay.total_seconds())
    return [
        "graceful-drain demo: kubesim in this process, nodes node-a and node-b; Deployment "
        f"{workload.NAMESPACE}/{workload.DEPLOYMENT} has 1 replica (maxSurge 1, maxUnavailable 0)",
        f"on {workload.DRAINED_NODE}, Ready {ready} after it starts; "
        f"a {options.client}-style client drains {workload.DRAINED_NODE}.",
    ]


def _print_title(out: TextIO, with_controller: bool) -> None:
    title = (
        "with the graceful-drain controller"
        if with_controller
        else ("without the controller (the same drain, nothing installed)")
    )
    print(f"\n{title}", file=out)
    out.flush()


async def demo(options: DemoOptions, out: TextIO) -> int:
    """Run the demo, print it to `out`; 0 when every drain completed."""
    if not options.json:
        print("\n".join(_header(options)), file=out)
    results: list[Figures] = []
    with tempfile.TemporaryDirectory(prefix="graceful-drain-demo-") as tmp:
        plan = [True, False] if options.compare else [True]
        for with_controller in plan:
            workdir = Path(tmp) / ("with" if with_controller else "without")
            workdir.mkdir()
            if not options.json:
                _print_title(out, with_controller)
            record = await run_once(
                options, with_controller=with_controller, workdir=workdir,
                out=None if options.json else out,
            )  # fmt: skip
            results.append(figures(record))
    without = results[1] if len(results) > 1 else None
    if options.json:
        print(json.dumps(json_document(options.client, results[0], without)), file=out)
    else:
        print("", file=out)
        print("\n".join(summary_lines(results[0], without)), file=out)
    return 0 if all(result.drain_completed for result in results) else EXIT_DRAIN_INCOMPLETE


def run(args: argparse.Namespace) -> int:
    """The subcommand: validate the flags (ConfigError: exit 2), then one event loop."""
    options = resolve_demo_options(args)
    configure_logging("console", "warning")
    try:
        return asyncio.run(demo(options, sys.stdout))
    except DemoError as error:
        print(f"graceful-drain demo: {error}", file=sys.stderr)
        return EXIT_DRAIN_INCOMPLETE
