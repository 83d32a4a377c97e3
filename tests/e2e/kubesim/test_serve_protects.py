"""The path a new user explores, with the real binaries only: `kubesim serve --scenario`,
`kubectl apply -k deploy/`, `graceful-drain controller` as a process, real `kubectl drain`.
The pod is protected because `--route-service` sends the webhook's Service to the
controller's port; without it, every ignored webhook call is logged by kubesim."""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kubesim.client import KubeClient
from kubesim.recorder import AvailabilityRecorder
from realcluster.cluster import free_port, wait_until
from realcluster.processes import Child
from tests.conftest import run_kubectl
from tests.e2e.controller.replica import container_invocation

pytestmark = pytest.mark.e2e

REPO = Path(__file__).parents[3]
SCENARIO = REPO / "scenarios" / "eviction-dance.yaml"
SERVICE = "graceful-drain/graceful-drain-webhook"
BOUND = 120.0


def serve(tmp_path: Path, *routes: str) -> Child:
    kubeconfig = tmp_path / "kubesim.kubeconfig"
    argv = [sys.executable, "-m", "kubesim", "serve", "--scenario", str(SCENARIO),
            "--setup-only", f"--kubeconfig={kubeconfig}", *routes]  # fmt: skip
    child = Child("kubesim", argv, tmp_path / "kubesim.log",
                  env={**os.environ, "PYTHONPATH": str(REPO / "src")})  # fmt: skip
    wait_until("kubesim serve", lambda: str(kubeconfig) in child.log_tail(), 60, child)
    return child


def client_for(kubeconfig: Path) -> KubeClient:
    document = yaml.safe_load(kubeconfig.read_text())
    cluster = document["clusters"][0]["cluster"]
    return KubeClient(cluster["server"], document["users"][0]["user"]["token"],
                      base64.b64decode(cluster["certificate-authority-data"]))  # fmt: skip


def start_controller(tmp_path: Path, kubeconfig: Path, webhook_port: int) -> Child:
    """`graceful-drain controller` as the applied Deployment runs it, on loopback, under a
    token of its ServiceAccount."""
    deployment = yaml.safe_load(run_kubectl(
        kubeconfig, "get", "deployment", "graceful-drain", "-n", "graceful-drain", "-o", "yaml"
    ).stdout)  # fmt: skip
    args, env, _ = container_invocation(deployment, "graceful-drain-0")
    token = run_kubectl(kubeconfig, "create", "token", "graceful-drain", "-n", "graceful-drain")
    document = yaml.safe_load(kubeconfig.read_text())
    document["users"][0]["user"]["token"] = token.stdout.strip()
    controller_kubeconfig = tmp_path / "controller.kubeconfig"
    controller_kubeconfig.write_text(yaml.safe_dump(document))
    metrics_port = free_port()
    argv = [
        sys.executable,
        "-m",
        "graceful_drain.cli",
        "controller",
        *args,
        "--bind-address",
        "127.0.0.1",
        "--webhook-port",
        str(webhook_port),
        "--metrics-port",
        str(metrics_port),
        "--kubeconfig",
        str(controller_kubeconfig),
    ]
    child = Child("controller", argv, tmp_path / "controller.log",
                  env={**os.environ, "PYTHONPATH": str(REPO / "src"), **env})  # fmt: skip

    def ready() -> bool:
        import urllib.request

        try:
            url = f"http://127.0.0.1:{metrics_port}/readyz"
            with urllib.request.urlopen(url, timeout=2) as answer:
                return int(answer.status) == 200
        except OSError:
            return False

    wait_until("the controller's /readyz", ready, 60, child)
    return child


@pytest.fixture
def stopped() -> Iterator[list[Child]]:
    children: list[Child] = []
    yield children
    for child in reversed(children):
        child.stop()


async def test_serve_routes_the_webhook_service_so_kubectl_drain_is_protected(
    tmp_path: Path, stopped: list[Child]
) -> None:
    webhook_port = free_port()
    stopped.append(serve(tmp_path, "--route-service", f"{SERVICE}={webhook_port}"))
    kubeconfig = tmp_path / "kubesim.kubeconfig"
    run_kubectl(kubeconfig, "apply", "-k", str(REPO / "deploy"))
    stopped.append(start_controller(tmp_path, kubeconfig, webhook_port))
    client = client_for(kubeconfig)
    async with AvailabilityRecorder(client, namespace="default") as recorder:
        async with asyncio.timeout(BOUND):
            await recorder.wait_until(lambda: recorder.ready("web") == 1)
        start = recorder.mark_drain_started("node-a", "kubectl").at
        drained = await asyncio.to_thread(
            run_kubectl, kubeconfig, "drain", "node-a", "--ignore-daemonsets",
            "--delete-emptydir-data", "--timeout=90s", timeout=BOUND,
        )  # fmt: skip
        async with asyncio.timeout(BOUND):
            await recorder.wait_until(lambda: recorder.ready("web") == 1)
        timeline = recorder.timeline("web")
        zero_ready = timeline.zero_ready_seconds(start, recorder.clock())
        rollouts = timeline.rollouts(start, recorder.clock())
    await client.close()

    assert "(will retry after 5s): admission webhook" in drained.stderr
    assert "graceful-drain: waiting for a replacement of Deployment default/web" in (drained.stderr)
    assert drained.stdout.splitlines()[-1] == "node/node-a drained"
    assert zero_ready == 0
    assert len(rollouts) == 1


def test_without_a_route_every_ignored_webhook_call_is_logged(
    tmp_path: Path, stopped: list[Child]
) -> None:
    server = serve(tmp_path)
    stopped.append(server)
    kubeconfig = tmp_path / "kubesim.kubeconfig"
    run_kubectl(kubeconfig, "apply", "-k", str(REPO / "deploy"))
    # Both controller pods Ready first, or the drain meets their PDB (maxUnavailable 1) and
    # retries for that reason instead.
    run_kubectl(kubeconfig, "rollout", "status", "deployment/graceful-drain", "-n",
                "graceful-drain", "--timeout=60s", timeout=BOUND)  # fmt: skip
    drained = run_kubectl(kubeconfig, "drain", "node-a", "--ignore-daemonsets",
                          "--delete-emptydir-data", "--timeout=60s", timeout=BOUND)  # fmt: skip

    assert "will retry" not in drained.stderr
    assert "Failed calling webhook, failing open eviction.graceful-drain.stonal.com" in (
        server.log_tail(20_000)
    )
