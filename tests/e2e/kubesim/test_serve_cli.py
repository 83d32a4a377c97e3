"""`kubesim serve` as a user runs it: a subprocess that prints one line saying what it started
(ending with its kubeconfig), used by kubectl."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from realcluster.cluster import wait_until
from realcluster.processes import Child
from tests.e2e.kubesim.newcomer import run_session

pytestmark = pytest.mark.e2e
SRC = Path(__file__).parents[3] / "packages" / "kubesim" / "src"


@contextmanager
def kubesim_serve(tmp_path: Path, *args: str) -> Iterator[tuple[Path, str]]:
    """`kubesim serve ARGS` in its own process: (kubeconfig, the line it printed)."""
    kubeconfig = tmp_path / "kubesim.kubeconfig"
    argv = [sys.executable, "-m", "kubesim", "serve", "--kubeconfig", str(kubeconfig), *args]
    child = Child("kubesim", argv, tmp_path / "kubesim.log")
    try:
        wait_until("kubesim serve", lambda: f"kubeconfig: {kubeconfig}" in child.log_tail(),
                   60, child)  # fmt: skip
        started = [line for line in child.log_tail().splitlines() if "kubeconfig:" in line]
        yield kubeconfig, started[0]
    finally:
        child.stop()


async def test_serve_alone_is_a_cluster_for_the_newcomer_session(tmp_path: Path) -> None:
    """README's "explore a cluster yourself": `kubesim serve`, then kubectl's everyday
    commands. Every one succeeds, and `rollout status` completes."""
    with kubesim_serve(tmp_path) as (kubeconfig, started):
        assert started.startswith("kubesim: serving https://127.0.0.1:")
        assert started.endswith(
            ": a cluster: the API server, 2 Ready nodes (node-1, node-2), the scheduler, "
            "controllers deployment, replicaset, statefulset, daemonset, job, cronjob, disruption, "
            f"endpoints, serviceaccount, node-lifecycle; kubeconfig: {kubeconfig}"
        )
        steps = await run_session(kubeconfig, "default")
    assert [step.code for step in steps] == [0] * len(steps), "\n".join(map(str, steps))
    by_command = {" ".join(step.command.split()[:2]): step.outcome for step in steps}
    assert by_command["create deployment"] == ("deployment.apps/web created",)
    assert by_command["create job"] == ("job.batch/hello created",)
    assert by_command["expose deployment"] == ("service/web exposed",)
    assert by_command["rollout status"] == ('deployment "web" successfully rolled out',)
    assert "Normal ScalingReplicaSet Deployment" in by_command["get events"]


@pytest.mark.parametrize(
    ("args", "started", "nodes"),
    [
        (["--nodes", "3"], ": a cluster: the API server, 3 Ready nodes (node-1, node-2, node-3)",
         ["node/node-1", "node/node-2", "node/node-3"]),
        (["--bare"], ": the API server alone (--bare: no controllers, scheduler or nodes)", []),
    ],
)  # fmt: skip
def test_serve_nodes_and_bare(
    tmp_path: Path, args: list[str], started: str, nodes: list[str]
) -> None:
    with kubesim_serve(tmp_path, *args) as (kubeconfig, line):
        assert started in line
        got = subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), "get", "nodes", "-o", "name"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert got.returncode == 0, got.stderr
        assert got.stdout.split() == nodes


def test_serve_bare_prints_its_line_and_kubectl_can_use_it(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3] / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubesim", "serve", "--bare", "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        printed = proc.stdout.readline().strip()
        assert printed.endswith(f"; kubeconfig: {kubeconfig}")
        result = subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), "get", "namespaces", "-o", "name"],
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
