"""The chart's monitoring against a running controller (kubesim, no Go needed): every metric
its Grafana dashboard and Prometheus alerts query is on /metrics from start-up, before any
drain, and the scrape-time values say what they mean. The real control plane's chart test
(test_helm_install_real.py) checks the same after a real drain."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.kube.timefmt import format_rfc3339
from kubesim.sim import KubeSim
from tests.unit.chart.monitoring import missing_metrics

from .conftest import DEADLINE, WebhookCerts, running_controller
from .drain_workloads import web


def values(exposition: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
    }


async def test_every_queried_metric_is_exported_from_start_up(
    sim: KubeSim, certs: WebhookCerts
) -> None:
    async with running_controller(sim, certs, leader_elect=False) as app:
        async with asyncio.timeout(DEADLINE):
            await app.cache.wait_synced()
        url = f"http://127.0.0.1:{app.health_site.port}/metrics"
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            exposition = await response.text()

    assert missing_metrics(exposition) == {}
    seen = values(exposition)
    assert seen[("graceful_drain_leader", ())] == 1  # no election: this replica reconciles
    assert seen[("graceful_drain_rollout_timeout_seconds", ())] == 600
    assert seen[("graceful_drain_oldest_drain_age_seconds", ())] == 0
    assert seen[("graceful_drain_certificate_expiry_timestamp_seconds", ())] > time.time()
    for resource in ("pods", "replicasets", "deployments"):
        assert seen[("graceful_drain_cache_lists_total", (("resource", resource),))] >= 1
        assert (
            seen[("graceful_drain_cache_list_watch_errors_total", (("resource", resource),))] == 0
        )
    for outcome in ("created", "aggregated", "failed", "dropped"):
        assert ("graceful_drain_events_total", (("outcome", outcome),)) in seen
    reconciler = ("controller", "reconciler")
    for result in ("success", "error", "requeue", "requeue_after"):  # controller-runtime's
        assert ("graceful_drain_reconcile_total", (reconciler, ("result", result))) in seen
    assert seen[("graceful_drain_reconcile_errors_total", (reconciler,))] == 0
    assert seen[("graceful_drain_terminal_reconcile_errors_total", (reconciler,))] == 0


async def test_the_oldest_drain_age_counts_from_its_stamp(
    sim: KubeSim, certs: WebhookCerts
) -> None:
    """A Deployment stamped 90 s ago whose rollout has not completed (no Deployment controller
    runs here): the drain in progress is at least 90 s old."""
    stamped = datetime.now(UTC) - timedelta(seconds=90)
    manifest = web("web")
    manifest["metadata"]["namespace"] = "default"
    manifest["metadata"]["annotations"] = {RESTARTED_AT_ANNOTATION: format_rfc3339(stamped)}
    sim.create(manifest)
    async with running_controller(sim, certs, leader_elect=False) as app:
        async with asyncio.timeout(DEADLINE):
            await app.cache.wait_synced()
        url = f"http://127.0.0.1:{app.health_site.port}/metrics"
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            seen = values(await response.text())

    assert seen[("graceful_drain_drains_in_progress", ())] == 1
    assert seen[("graceful_drain_oldest_drain_age_seconds", ())] >= 90
