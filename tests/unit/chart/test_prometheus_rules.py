"""The chart's alerts pass `promtool check rules` and their `promtool test rules` cases
(prometheus-rules.test.yaml, beside this file).

promtool comes from Debian's prometheus package, which .ci/run installs when it is missing;
elsewhere these tests skip with one line when it is not on PATH, and with
REQUIRE_REAL_CLUSTER=1 (CI) they fail instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import REQUIRE_REAL_CLUSTER
from tests.unit.chart.rendered import CHART, template

RULES = CHART / "files" / "prometheus-rules.yaml"
RULE_TESTS = Path(__file__).with_name("prometheus-rules.test.yaml")
PROMTOOL_TIMEOUT = 120


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    if binary is None:
        message = "promtool is not on PATH (Debian: apt-get install prometheus)"
        if os.environ.get(REQUIRE_REAL_CLUSTER) == "1":
            pytest.fail(f"{REQUIRE_REAL_CLUSTER}=1: {message}")
        pytest.skip(message)
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=PROMTOOL_TIMEOUT)


def test_promtool_check_rules_passes() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_test_rules_passes() -> None:
    result = promtool("test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_test_case() -> None:
    alerts = {
        rule["alert"]
        for group in yaml.safe_load(RULES.read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    tested = {
        case["alertname"]
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
        if case["exp_alerts"]
    }
    assert alerts == tested


def test_the_chart_ships_the_same_rules() -> None:
    [rule] = [
        item
        for item in template({"prometheusRule": {"enabled": True}})
        if item["kind"] == "PrometheusRule"
    ]
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
