"""The PromQL reading in monitoring.py finds exactly the metric names of a query; every query
of the dashboard and the alerts reads graceful-drain metrics only. (That each of those
metrics exists on a running controller's /metrics is checked on the real control plane:
tests/e2e/real_control_plane/test_helm_install_real.py.)"""

from __future__ import annotations

import pytest

from tests.unit.chart.monitoring import (
    alert_expressions,
    dashboard_queries,
    metric_names,
    missing_metrics,
)


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("absent(graceful_drain_build_info)", {"graceful_drain_build_info"}),
        (
            'sum by (reason, allowed) (rate(graceful_drain_decisions_total{reason=~"a|b"}'
            "[$__rate_interval])) > 0",
            {"graceful_drain_decisions_total"},
        ),
        (
            "histogram_quantile(0.99, sum by (le) (rate(x_bucket[5m]))) > 2.5",
            {"x_bucket"},
        ),
        ("min(a) - time() < 7 * 86400", {"a"}),
        ("max(a) > 0.8 * max(b) offset 1h", {"a", "b"}),
        ("a and on(pod) b", {"a", "b"}),
        ("1e3 * up", {"up"}),
    ],
)
def test_metric_names_reads_the_selected_metrics(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_every_query_reads_graceful_drain_metrics() -> None:
    queries = dashboard_queries() + alert_expressions()
    assert len(queries) > 20
    for expr in queries:
        names = metric_names(expr)
        assert names, expr
        assert all(name.startswith("graceful_drain_") for name in names), expr


def test_missing_metrics_names_what_an_exposition_lacks() -> None:
    exposition = '# HELP x\ngraceful_drain_build_info{version="1"} 1.0\n'
    missing = missing_metrics(exposition)
    only_build_info = [e for e in alert_expressions() if metric_names(e) == {
        "graceful_drain_build_info"}]  # fmt: skip
    assert only_build_info and not set(only_build_info) & set(missing)
    assert missing["sum by (cluster, namespace, job) (graceful_drain_leader) == 0"] == {
        "graceful_drain_leader"
    }
