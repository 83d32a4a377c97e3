"""`kubesim serve` as a user runs it: a subprocess that prints its kubeconfig, used by kubectl."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_serve_prints_kubeconfig_and_kubectl_can_use_it(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3] / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubesim", "serve", "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        printed = proc.stdout.readline().strip()
        assert printed == str(kubeconfig)
        result = subprocess.run(
            ["kubectl", "--kubeconfig", printed, "get", "namespaces", "-o", "name"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert "namespace/kube-system" in result.stdout.split()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_serve_rejects_a_bad_port(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3] / "src")}
    result = subprocess.run(
        [sys.executable, "-m", "kubesim", "serve", "--port", "70000"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--port must be between 0 and 65535" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "--host must be a loopback address"),
        (["--host", "192.0.2.1"], "--host must be a loopback address"),
        (["--kubeconfig", "no/such/folder/kubeconfig"], "does not exist"),
    ],
)
def test_serve_refuses_a_non_loopback_host_and_a_missing_kubeconfig_folder(
    tmp_path: Path, args: list[str], message: str
) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3] / "src")}
    result = subprocess.run(
        [sys.executable, "-m", "kubesim", "serve", *args],
        capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert message in result.stderr
    assert not (tmp_path / "no").exists()  # nothing created
