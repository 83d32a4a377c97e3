"""docs/operations.md names every Event reason and every metric the code emits.

Both lists come from the code: the Event reasons are the GracefulDrain* constants of
graceful_drain.kube.events (the controller's EventRecorder writes only those; its Warning
reasons are WARNING_EVENT_REASON's values) and the termination detector's
recording.REASON; the metrics are every Prometheus metric the source declares (Counter,
Gauge, Histogram, a *MetricFamily in a collector, or `Metrics.track`), found by reading the
source, with the name as /metrics shows it (counters end in _total).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from graceful_drain.controller.serving.metrics import NAMESPACE
from graceful_drain.controller.writes import events
from graceful_drain.termination import recording

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "src" / "graceful_drain"
OPERATIONS = REPO / "docs" / "operations.md"
COUNTERS = {"Counter", "CounterMetricFamily"}
DECLARATIONS = COUNTERS | {"Gauge", "Histogram", "Summary", "GaugeMetricFamily",
                           "HistogramMetricFamily", "track"}  # fmt: skip


def event_reasons() -> set[str]:
    constants = {
        value for value in vars(events).values()
        if isinstance(value, str) and value.startswith("GracefulDrain")
    }  # fmt: skip
    assert set(events.WARNING_EVENT_REASON.values()) <= constants
    return constants | {recording.REASON}


def _called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _literal_name(node: ast.expr) -> str | None:
    """ "decisions", or f"{NAMESPACE}_cache_synced" read as "cache_synced"."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        tail = "".join(str(p.value) for p in node.values if isinstance(p, ast.Constant))
        return tail.removeprefix("_")
    return None


def declared_metrics() -> Iterator[str]:
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call) or _called_name(node) not in DECLARATIONS:
                continue
            if not node.args or (name := _literal_name(node.args[0])) is None:
                continue
            kind = next((k.value for k in node.keywords if k.arg == "kind"), None)
            counter = _called_name(node) in COUNTERS or (
                isinstance(kind, ast.Constant) and kind.value == "counter"
            )
            yield f"{NAMESPACE}_{name}" + ("_total" if counter else "")


def test_the_code_declares_the_metrics_this_test_expects_to_find() -> None:
    found = set(declared_metrics())
    assert {
        "graceful_drain_decisions_total", "graceful_drain_admission_duration_seconds",
        "graceful_drain_cache_synced", "graceful_drain_certificate_expiry_timestamp_seconds",
        "graceful_drain_events_total", "graceful_drain_cache_silent_watches_total",
    } <= found  # fmt: skip
    assert len(found) >= 19


def test_every_event_reason_is_documented() -> None:
    text = OPERATIONS.read_text()
    assert sorted(r for r in event_reasons() if f"`{r}`" not in text) == []


def test_every_metric_is_documented() -> None:
    text = OPERATIONS.read_text()
    assert sorted(m for m in set(declared_metrics()) if f"`{m}" not in text) == []
