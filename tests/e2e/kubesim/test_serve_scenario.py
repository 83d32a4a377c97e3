"""`kubesim serve --scenario FILE` as a user runs it: a live cluster kubectl can use."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).parents[3]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubesim", "serve", *args],
        capture_output=True, text=True, env=ENV, timeout=60,
    )  # fmt: skip


def test_a_missing_scenario_file_exits_2(tmp_path: Path) -> None:
    result = serve("--scenario", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2
    assert result.stderr == f"kubesim: scenario file not found: {tmp_path / 'nope.yaml'}\n"
    assert result.stdout == ""


def test_an_invalid_scenario_exits_2_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: [{name: a, capacity: {gpu: 1}}]\n")
    result = serve("--scenario", str(bad))
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"kubesim: invalid scenario: {bad}: nodes[0].capacity.gpu: unknown resource"
    )


def test_setup_only_needs_a_scenario() -> None:
    result = serve("--setup-only")
    assert result.returncode == 2
    assert "--setup-only needs --scenario" in result.stderr


def test_serve_sets_up_the_eviction_dance_for_kubectl(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubesim", "serve", "--kubeconfig", str(kubeconfig),
         "--scenario", str(REPO / "scenarios" / "eviction-dance.yaml"), "--setup-only"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("kubesim: serving https://127.0.0.1:")
        assert "scenario eviction-dance, a cluster: the API server, 2 Ready nodes" in line
        assert line.endswith(f"; kubeconfig: {kubeconfig}")

        def kubectl(*args: str) -> str:
            done = subprocess.run(
                ["kubectl", "--kubeconfig", str(kubeconfig), *args],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            return done.stdout

        assert kubectl("get", "nodes", "-o", "name").split() == ["node/node-a", "node/node-b"]
        status = kubectl("rollout", "status", "deployment/web", "--timeout=50s")
        assert 'deployment "web" successfully rolled out' in status
        placed = kubectl("get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].spec.nodeName}")
        assert placed == "node-a"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
