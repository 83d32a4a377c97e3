"""Prometheus metrics (a private registry) and the plain-HTTP /metrics, /healthz, /readyz site.

Who updates what:
- the webhook: decisions_total, admission_duration_seconds, and rollouts_started_total after
  a successful restarted-at stamp (N replicas stamp at most once per rollout: the stamp is an
  optimistic-concurrency patch);
- the reconciler: rollouts_completed_total, rollouts_timed_out_total,
  rollout_duration_seconds, drains_in_progress;
- cache_synced{resource} is read from the cache at scrape time (`track_cache_sync`), and so
  are cache_staleness_seconds{resource} and cache_silent_watches_total{resource}
  (`track_cache_staleness`);
- `track` publishes other values read at scrape time (app.py wires them): the serving
  certificate's expiry, leadership, the oldest drain in progress, informer lists and
  list/watch errors, event writes by outcome, the reconcile loop's outcomes
  (reconcile_total{controller, result}, reconcile_errors_total{controller},
  terminal_reconcile_errors_total{controller}, as controller-runtime names them).

Every labelled series is created at start-up (decisions for every reason, with the outcome
that reason always has), so a query or an alert never meets a missing series. The webhook's two
series are counted in plain numbers (`_AdmissionCollector`) and rendered at scrape time exactly
as prometheus_client's Counter and Histogram render theirs (`_total` and `_created` samples,
cumulative buckets): those take a lock per update, twice per admission, which the one event
loop that updates them has no use for.

/healthz answers 200 while the process serves at all. /readyz answers 200 only when every
readiness check passes (caches synced and fresh, TLS loaded, and whatever components add), else 503
listing the failing checks.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from graceful_drain import __version__
from graceful_drain.controller.decision.reasons import DENYING_REASONS, Decision, Reason

NAMESPACE = "graceful_drain"
# An admission answer should take milliseconds; the API server gives up after timeoutSeconds 5.
ADMISSION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
# Rollouts take seconds to minutes; rolloutTimeout defaults to 10 minutes.
ROLLOUT_BUCKETS = (5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 450, 600, 900, 1800)


class _CacheSyncCollector(Collector):
    def __init__(self, status: Callable[[], Mapping[str, bool]]) -> None:
        self._status = status

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            f"{NAMESPACE}_cache_synced",
            "1 when the informer cache of the resource has completed its initial list",
            labels=["resource"],
        )
        for resource, synced in sorted(self._status().items()):
            family.add_metric([resource], 1.0 if synced else 0.0)
        yield family


class _CacheStalenessCollector(Collector):
    def __init__(
        self, staleness: Callable[[], Mapping[str, float]], silent: Callable[[], Mapping[str, int]]
    ) -> None:
        self._staleness = staleness
        self._silent = silent

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            f"{NAMESPACE}_cache_staleness_seconds",
            "Seconds since the informers of the resource last heard from the API server "
            "(a list, an event, a bookmark); +Inf before the first list",
            labels=["resource"],
        )
        for resource, seconds in sorted(self._staleness().items()):
            family.add_metric([resource], seconds)
        yield family
        silent = CounterMetricFamily(
            f"{NAMESPACE}_cache_silent_watches",
            "Watches abandoned as silent (half-open connections), each followed by a re-list",
            labels=["resource"],
        )
        for resource, count in sorted(self._silent().items()):
            silent.add_metric([resource], float(count))
        yield silent


class _AdmissionCollector(Collector):
    """decisions_total{allowed, reason} and admission_duration_seconds, counted in plain
    numbers by `record` (only ever called from the event loop) and exposed at scrape time."""

    def __init__(self) -> None:
        created = time.time()
        # One series per reason with the outcome it always has (reasons.DENYING_REASONS);
        # another outcome gets its own series when first counted.
        self.decisions: dict[tuple[bool, Reason], int] = {
            (reason not in DENYING_REASONS, reason): 0 for reason in Reason
        }
        self._decisions_created = dict.fromkeys(self.decisions, created)
        self._bounds = (*ADMISSION_BUCKETS, math.inf)
        # the le labels as prometheus_client writes them (its floatToGoString, for these bounds)
        self._le = [repr(float(bound)) for bound in ADMISSION_BUCKETS] + ["+Inf"]
        self._buckets = [0] * len(self._bounds)  # per bucket, not cumulative
        self._sum = 0.0
        self._duration_created = created

    def record(self, allowed: bool, reason: Reason, seconds: float) -> None:
        key = (allowed, reason)
        count = self.decisions.get(key)
        if count is None:  # an outcome its reason never has: counted all the same
            count = 0
            self._decisions_created[key] = time.time()
        self.decisions[key] = count + 1
        self._buckets[bisect_left(self._bounds, seconds)] += 1  # as Histogram: value <= bound
        self._sum += seconds

    def collect(self) -> Iterator[Metric]:
        decisions = CounterMetricFamily(
            f"{NAMESPACE}_decisions",
            "Eviction admission decisions by outcome and reason",
            labels=["allowed", "reason"],
        )
        for (allowed, reason), count in list(self.decisions.items()):
            decisions.add_metric(
                ["true" if allowed else "false", reason.value],
                float(count),
                created=self._decisions_created[allowed, reason],
            )
        yield decisions
        duration = HistogramMetricFamily(
            f"{NAMESPACE}_admission_duration_seconds",
            "Time to answer one eviction AdmissionReview, from its arrival",
        )
        cumulative = list(accumulate(self._buckets))
        duration.add_metric(
            [],
            [(le, float(count)) for le, count in zip(self._le, cumulative, strict=True)],
            self._sum,
        )  # fmt: skip
        duration.add_sample(
            f"{NAMESPACE}_admission_duration_seconds_created", {}, self._duration_created
        )
        yield duration


# A value read at scrape time: unlabelled (a float, None when unknown) or by label values.
Reading = Callable[[], float | Mapping[tuple[str, ...], float] | None]


class _ReadingCollector(Collector):
    def __init__(
        self, name: str, documentation: str, kind: str, labels: Sequence[str], read: Reading
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
        self._labels = list(labels)
        self._read = read

    def collect(self) -> Iterator[Metric]:
        family = self._family(self._name, self._documentation, labels=self._labels)
        value = self._read()
        if isinstance(value, Mapping):
            for label_values, number in sorted(value.items()):
                family.add_metric(list(label_values), number)
        elif value is not None:
            family.add_metric([], value)
        yield family


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self._admissions = _AdmissionCollector()
        r.register(self._admissions)
        self.rollouts_started = Counter(
            "rollouts_started",
            "Rollouts requested by stamping restarted-at on a Deployment",
            namespace=NAMESPACE,
            registry=r,
        )
        self.rollouts_completed = Counter(
            "rollouts_completed",
            "Requested rollouts that completed",
            namespace=NAMESPACE,
            registry=r,
        )
        self.rollouts_timed_out = Counter(
            "rollouts_timed_out",
            "Requested rollouts abandoned after rolloutTimeout",
            namespace=NAMESPACE,
            registry=r,
        )
        self.rollout_duration = Histogram(
            "rollout_duration_seconds",
            "From restarted-at to the completed (or abandoned) rollout",
            namespace=NAMESPACE,
            buckets=ROLLOUT_BUCKETS,
            registry=r,
        )
        self.drains_in_progress = Gauge(
            "drains_in_progress",
            "Deployments carrying restarted-at: rollouts requested and not yet finished",
            namespace=NAMESPACE,
            registry=r,
        )
        self.bypassed = Counter(
            "bypassed",
            "Pods whose eviction graceful-drain held that were deleted without it before a "
            "replacement was Ready (controller/reconcile/bypass.py): outages it could not prevent",
            namespace=NAMESPACE,
            registry=r,
        )
        self.rollout_timeout = Gauge(
            "rollout_timeout_seconds",
            "The configured --rollout-timeout",
            namespace=NAMESPACE,
            registry=r,
        )
        Gauge(
            "build_info",
            "Always 1; the running graceful-drain version as a label",
            ["version"],
            namespace=NAMESPACE,
            registry=r,
        ).labels(version=__version__).set(1)

    def record_decision(self, decision: Decision, seconds: float) -> None:
        self._admissions.record(decision.allowed, decision.reason, seconds)

    def record_bypassed(self) -> None:
        self.bypassed.inc()

    def record_rollout_completed(self, seconds: float) -> None:
        self.rollouts_completed.inc()
        self.rollout_duration.observe(seconds)

    def record_rollout_timed_out(self, seconds: float) -> None:
        self.rollouts_timed_out.inc()
        self.rollout_duration.observe(seconds)

    def set_drains_in_progress(self, count: int) -> None:
        self.drains_in_progress.set(count)

    def track_cache_sync(self, status: Callable[[], Mapping[str, bool]]) -> None:
        """Publish cache_synced{resource} from `status()` at every scrape."""
        self.registry.register(_CacheSyncCollector(status))

    def track_cache_staleness(
        self, staleness: Callable[[], Mapping[str, float]], silent: Callable[[], Mapping[str, int]]
    ) -> None:
        """Publish cache_staleness_seconds{resource} and cache_silent_watches_total{resource}."""
        self.registry.register(_CacheStalenessCollector(staleness, silent))

    def track(
        self, name: str, documentation: str, read: Reading, *, kind: str = "gauge",
        labels: Sequence[str] = (),
    ) -> None:  # fmt: skip
        """Publish graceful_drain_<name> from `read()` at every scrape (a counter's name
        without its _total)."""
        self.registry.register(
            _ReadingCollector(f"{NAMESPACE}_{name}", documentation, kind, labels, read)
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


ReadinessCheck = Callable[[], bool]


@dataclass
class Readiness:
    """Named checks that must all pass for /readyz; components add their own."""

    checks: dict[str, ReadinessCheck] = field(default_factory=dict)
    shutting_down: bool = False

    def add(self, name: str, check: ReadinessCheck) -> None:
        self.checks[name] = check

    def failing(self) -> list[str]:
        failed = ["shutting-down"] if self.shutting_down else []
        for name, check in self.checks.items():
            try:
                ok = check()
            except Exception:
                ok = False
            if not ok:
                failed.append(name)
        return failed


def health_app(metrics: Metrics, readiness: Readiness) -> web.Application:
    async def serve_metrics(_: web.Request) -> web.Response:
        response = web.Response(body=metrics.exposition())
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        failing = readiness.failing()
        if failing:
            return web.Response(status=503, text="not ready: " + ", ".join(failing) + "\n")
        return web.Response(text="ok\n")

    app = web.Application()
    app.router.add_get("/metrics", serve_metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app
