"""The queries the chart's monitoring ships (Grafana dashboard, Prometheus alerts) and the
metric names each one reads, for the test that scrapes a running controller's /metrics."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from tests.unit.chart.rendered import CHART

DASHBOARD = CHART / "files" / "grafana-dashboard.json"
RULES = CHART / "files" / "prometheus-rules.yaml"

# Words of PromQL that are not metric names (keywords, modifiers; functions and aggregations
# are recognised by the parenthesis that follows them).
_KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
     "and", "or", "unless", "inf", "nan"}
)  # fmt: skip
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_RANGE = re.compile(r"\[[^\]]*\]")
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*(?=\s*(\(?))")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (Grafana's $__ variables aside)."""
    text = expr.replace("$__rate_interval", "5m")
    text = _STRING.sub('""', text)
    text = _MATCHERS.sub("", text)
    text = _GROUPING.sub("", text)
    text = _RANGE.sub("", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        word, call = match.group(0), match.group(1)
        if call or word.lower() in _KEYWORDS:
            continue
        start = match.start()
        if start and (text[start - 1].isdigit() or text[start - 1] == "."):
            continue  # a unit or exponent of a number (5m, 1e3)
        names.add(word)
    return names


def dashboard_queries() -> list[str]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def alert_expressions() -> list[str]:
    rules = yaml.safe_load(RULES.read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def exported_series_names(exposition: str) -> set[str]:
    """Every sample name in a Prometheus text exposition (histogram _bucket/_sum/_count and
    counter _total samples included as written)."""
    names = set()
    for line in exposition.splitlines():
        if line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def missing_metrics(exposition: str) -> dict[str, set[str]]:
    """Query -> the metric names it reads that the exposition does not have."""
    exported = exported_series_names(exposition)
    missing = {}
    for expr in dashboard_queries() + alert_expressions():
        absent = {name for name in metric_names(expr) if name not in exported}
        if absent:
            missing[expr] = absent
    return missing


# The dashboard's fleet variables: every series selector of every query carries these.
DASHBOARD_FILTERS = ('$cluster_label=~"$cluster"', 'namespace=~"$namespace"', 'job=~"$job"')
# Labels every alert keeps, so that an alert names the installation it is about.
ALERT_LABELS = ("cluster", "namespace", "job")
_AGGREGATION = re.compile(
    r"\b(sum|count|min|max|avg|stddev|stdvar|topk|bottomk|quantile|group|count_values)\s*"
    r"(?:(by|without)\s*\(([^)]*)\)\s*)?\("
)


def unfiltered_selectors(expr: str, filters: tuple[str, ...] = DASHBOARD_FILTERS) -> list[str]:
    """The series selectors of `expr` (a metric name and its matchers) lacking any of
    `filters`."""
    unfiltered = []
    for name in sorted(metric_names(expr)):
        for match in re.finditer(rf"\b{re.escape(name)}\b(\{{[^}}]*\}})?", expr):
            matchers = {m.strip() for m in (match.group(1) or "{}")[1:-1].split(",")}
            if not set(filters) <= matchers:
                unfiltered.append(match.group(0))
    return unfiltered


def aggregations_dropping(expr: str, labels: tuple[str, ...] = ALERT_LABELS) -> list[str]:
    """The aggregations of `expr` whose result loses any of `labels` (no `by` naming them all,
    or `without`), and any absent(), whose result has no labels at all."""
    dropping = [m.group(0) for m in _AGGREGATION.finditer(expr)
                if m.group(2) != "by" or not set(labels) <= {
                    label.strip() for label in m.group(3).split(",")}]  # fmt: skip
    return dropping + re.findall(r"\babsent(?:_over_time)?\s*\(", expr)


def variable_names() -> list[str]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return [variable["name"] for variable in dashboard["templating"]["list"]]


def alert_rules() -> list[dict[str, Any]]:
    rules = yaml.safe_load(RULES.read_text())
    return [rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule]
