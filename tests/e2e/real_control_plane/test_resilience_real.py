"""What only a real server does to the controller's informers mid-drain: kube-apiserver
restarts, and etcd has compacted the revision the watches resume from (410 Gone)."""

from __future__ import annotations

import asyncio
import json

import pytest

from kubesim.recorder import AvailabilityRecorder
from realcluster.cluster import RealCluster
from tests.e2e.controller.drain_cluster import KubectlRun

from .harness import (
    KUBECTL_DRAIN_TIMEOUT,
    Installation,
    kubectl,
    until,
    web,
)

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]

DRAIN_ATTEMPTS = 3  # kubectl drain stops on a refused connection; an operator runs it again


async def drain_until_done(
    cluster: RealCluster, node: str, api_up: asyncio.Event
) -> list[KubectlRun]:
    """`kubectl drain` until it succeeds; after a failure, again once the API is back."""
    runs = []
    for _ in range(DRAIN_ATTEMPTS):
        await api_up.wait()
        run = await kubectl(cluster.kubeconfig_path, "drain", node, "--ignore-daemonsets",
                            f"--timeout={KUBECTL_DRAIN_TIMEOUT}", check=False)  # fmt: skip
        runs.append(run)
        if run.code == 0:
            break
    return runs


async def test_a_drain_survives_an_apiserver_restart_over_compacted_history(
    installation: Installation, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder,
) -> None:  # fmt: skip
    manifest = web(namespace, ready_delay="10s")
    await kubectl(real_cluster.kubeconfig_path, "apply", "-f", "-", stdin=json.dumps(manifest))
    await until(recorder, lambda: recorder.ready("web", namespace) == 1)
    replica = await installation.start_controller()
    try:
        recorder.mark_drain_started("node-a", "kubectl")
        api_up = asyncio.Event()
        api_up.set()
        draining = asyncio.create_task(drain_until_done(real_cluster, "node-a", api_up))
        # graceful-drain's rollout has started; its surge pod needs 10 s to be Ready.
        await until(recorder, lambda: len(recorder.timeline("web", namespace).rollouts()) == 2)
        api_up.clear()
        await asyncio.to_thread(real_cluster.stop_apiserver)
        # While it is down, history moves on and is compacted: every watch's resourceVersion
        # is now older than what etcd keeps, so resuming it is answered 410 Gone.
        revision = real_cluster.etcd_put("/graceful-drain-e2e/probe", namespace)
        assert real_cluster.compact_etcd() >= revision
        await asyncio.to_thread(real_cluster.start_apiserver)
        api_up.set()
        runs = await draining
        recorder.mark("drain-finished", node="node-a")
        await until(recorder, lambda: recorder.ready("web", namespace) == 1)
    finally:
        replica.stop()

    assert runs[-1].code == 0, [run.stderr for run in runs]
    start, _ = recorder.drain_window("node-a")
    timeline = recorder.timeline("web", namespace)
    assert timeline.zero_ready_seconds(start, recorder.clock()) == 0
    assert len(timeline.rollouts()) == 2  # one restart, not one per reconnect
    messages = [line.get("msg") or line.get("event") for line in replica.log_lines()]
    assert "watch expired, re-listing" in messages
