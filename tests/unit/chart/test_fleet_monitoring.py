"""Monitoring for fleets: the dashboard's cluster, namespace and job variables filter every
query; every alert keeps the labels that identify its installation and links a runbook
section of docs/operations.md that exists. (promtool's cases, prometheus-rules.test.yaml,
prove each alert fires for one installation and not for another.)"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest

from tests.unit.chart.monitoring import (
    aggregations_dropping,
    alert_rules,
    dashboard_queries,
    unfiltered_selectors,
    variable_names,
)
from tests.unit.chart.rendered import CHART

OPERATIONS = CHART.parents[1] / "docs" / "operations.md"
RUNBOOK_PAGE = "https://github.com/stonal/graceful-drain/blob/main/docs/operations.md"
ALERT_NAMES = [rule["alert"] for rule in alert_rules()]


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a document's headings: lower case, punctuation but hyphens
    dropped, spaces as hyphens."""
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", markdown, re.MULTILINE):
        text = re.sub(r"[^\w\- ]", "", heading.lower().replace("`", ""))
        anchors.add(text.replace(" ", "-"))
    return anchors


def test_the_dashboard_has_the_fleet_variables() -> None:
    assert {"cluster", "namespace", "job"} <= set(variable_names())


def test_no_dashboard_query_is_unfiltered() -> None:
    queries = dashboard_queries()
    assert len(queries) > 15
    assert {expr: unfiltered_selectors(expr) for expr in queries
            if unfiltered_selectors(expr)} == {}  # fmt: skip


@pytest.mark.parametrize(
    ("expr", "unfiltered"),
    [
        ("count(graceful_drain_build_info)", ["graceful_drain_build_info"]),
        ('sum(rate(graceful_drain_x{namespace=~"$namespace", job=~"$job"}[5m]))',
         ['graceful_drain_x{namespace=~"$namespace", job=~"$job"}']),
        ('max(graceful_drain_a{$cluster_label=~"$cluster", namespace=~"$namespace", '
         'job=~"$job", reason="x"}) / max(graceful_drain_b)', ["graceful_drain_b"]),
        ('graceful_drain_a{$cluster_label=~"$cluster",namespace=~"$namespace",job=~"$job"}', []),
    ],
)  # fmt: skip
def test_unfiltered_selectors_finds_each_selector_missing_a_variable(
    expr: str, unfiltered: list[str]
) -> None:
    assert unfiltered_selectors(expr) == unfiltered


@pytest.mark.parametrize("rule", alert_rules(), ids=ALERT_NAMES)
def test_every_alert_keeps_the_labels_of_its_installation(rule: dict[str, str]) -> None:
    assert aggregations_dropping(rule["expr"]) == []


@pytest.mark.parametrize(
    ("expr", "dropping"),
    [
        ("absent(graceful_drain_build_info)", ["absent("]),
        ("sum(graceful_drain_leader) == 0", ["sum("]),
        ("sum by (namespace) (graceful_drain_leader) == 0", ["sum by (namespace) ("]),
        ("max without (pod) (a) > 1", ["max without (pod) ("]),
        ("sum by (cluster, namespace, job, le) (rate(a[5m]))", []),
    ],
)
def test_aggregations_dropping_finds_a_lost_label(expr: str, dropping: list[str]) -> None:
    assert aggregations_dropping(expr) == dropping


@pytest.mark.parametrize("rule", alert_rules(), ids=ALERT_NAMES)
def test_every_alert_links_a_runbook_section_that_exists(rule: dict[str, dict[str, str]]) -> None:
    url = urlsplit(rule["annotations"]["runbook_url"])
    assert f"{url.scheme}://{url.netloc}{url.path}" == RUNBOOK_PAGE
    assert url.fragment in heading_anchors(OPERATIONS.read_text())
    assert url.fragment == str(rule["alert"]).lower()


def test_heading_anchors_reads_github_anchors() -> None:
    assert heading_anchors("## Alerts and dashboard\n### `GracefulDrainNoLeader`\n") == {
        "alerts-and-dashboard", "gracefuldrainnoleader"
    }  # fmt: skip
