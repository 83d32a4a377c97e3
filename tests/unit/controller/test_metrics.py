"""controller/serving/metrics.py: every labelled series exists from start-up, values read at scrape
time, and the served certificate's expiry as the TLS components report it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from graceful_drain.controller.decision.reasons import DENYING_REASONS, Decision, Reason
from graceful_drain.controller.serving.metrics import ADMISSION_BUCKETS, NAMESPACE, Metrics
from graceful_drain.controller.tls.context import ReloadingTLS
from graceful_drain.controller.tls.pki import new_ca, new_serving

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def samples(metrics: Metrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    found = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def test_every_decision_series_exists_before_the_first_decision() -> None:
    series = samples(Metrics(), "graceful_drain_decisions_total")
    assert series == {
        (("allowed", "false" if reason in DENYING_REASONS else "true"), ("reason", reason.value)): 0
        for reason in Reason
    }


def test_a_decision_counts_in_its_pre_created_series() -> None:
    metrics = Metrics()
    decision = Decision(False, Reason.ROLLOUT_REQUESTED, "m")
    metrics.record_decision(decision, 0.001)
    series = samples(metrics, "graceful_drain_decisions_total")
    assert series[(("allowed", "false"), ("reason", "rollout-requested"))] == 1
    assert len(series) == len(Reason)


def test_tracked_values_are_read_at_every_scrape() -> None:
    metrics = Metrics()
    counts: dict[tuple[str, ...], float] = {("pods",): 1.0}
    expiry: list[float | None] = [None]
    metrics.track("cache_lists", "h", lambda: counts, kind="counter", labels=["resource"])
    metrics.track("certificate_expiry_timestamp_seconds", "h", lambda: expiry[0])
    assert samples(metrics, "graceful_drain_certificate_expiry_timestamp_seconds") == {}
    counts[("pods",)] = 3.0
    expiry[0] = 1234.0
    assert samples(metrics, "graceful_drain_cache_lists_total") == {(("resource", "pods"),): 3}
    assert samples(metrics, "graceful_drain_certificate_expiry_timestamp_seconds") == {(): 1234}


def test_build_info_starts_at_one() -> None:
    metrics = Metrics()
    [(labels, value)] = samples(metrics, "graceful_drain_build_info").items()
    assert value == 1 and labels[0][0] == "version"


def test_files_tls_reports_the_served_certificate_expiry(tmp_path: Path) -> None:
    ca_cert, ca_key = new_ca(NOW)
    lifetime = timedelta(days=30)
    cert, key = new_serving(ca_cert, ca_key, ("svc",), NOW, lifetime)
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    tls = ReloadingTLS(tmp_path / "tls.crt", tmp_path / "tls.key")
    assert tls.not_after is None
    assert tls.reload_if_changed()
    assert tls.not_after is not None
    assert datetime.fromtimestamp(tls.not_after, UTC) > NOW + lifetime - timedelta(days=1)


@pytest.mark.parametrize(
    "seconds",
    [[], [0.0005], [0.0004, 0.0005, 0.00051, 0.003, 5.0, 5.1, 0.25, 0.0], [0.002] * 7],
    ids=["none", "on-a-bound", "spread", "repeated"],
)
def test_admission_series_render_as_prometheus_client_counter_and_histogram(
    seconds: list[float],
) -> None:
    """The webhook's series are plain numbers rendered at scrape time: the same samples as
    prometheus_client's own Counter and Histogram given the same updates (but the _created
    timestamps)."""
    metrics = Metrics()
    registry = CollectorRegistry()
    counter = Counter("decisions", "d", ["allowed", "reason"], namespace=NAMESPACE,
                      registry=registry)  # fmt: skip
    for reason in Reason:
        counter.labels(allowed="false" if reason in DENYING_REASONS else "true",
                       reason=reason.value)  # fmt: skip
    histogram = Histogram("admission_duration_seconds", "h", namespace=NAMESPACE,
                          buckets=ADMISSION_BUCKETS, registry=registry)  # fmt: skip
    decisions = [Decision(True, Reason.SURGE_READY, "m"), Decision(False, Reason.DRY_RUN, "m")]
    for index, value in enumerate(seconds):
        decision = decisions[index % 2]
        metrics.record_decision(decision, value)
        counter.labels(allowed=str(decision.allowed).lower(), reason=decision.reason.value).inc()
        histogram.observe(value)

    def rendered(text: bytes) -> list[tuple[str, dict[str, str], float]]:
        return [
            (sample.name, sample.labels, sample.value)
            for family in text_string_to_metric_families(text.decode())
            for sample in family.samples
            if not sample.name.endswith("_created")
            and sample.name.startswith((f"{NAMESPACE}_decisions", f"{NAMESPACE}_admission"))
        ]

    assert rendered(metrics.exposition()) == rendered(generate_latest(registry))
