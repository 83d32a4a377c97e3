"""Fault rows that need the controller as its own process: kill -9 mid-drain.

Two `graceful-drain controller` processes run as the shipped Deployment invokes them (its
arguments and environment, the ServiceAccount's kubeconfig). The leader is killed with
SIGKILL while a drain is held and restarted under the same pod name, as the kubelet restarts
a container; the webhook Service is pointed at the other process at the moment of the kill
(endpoint removal on a real cluster takes about a second, during which the API server's
calls to the dead pod fail and are ignored: a second replica is what covers a crash).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kubesim.sim import KubeSim
from tests.e2e.controller.drain_cluster import drain_cluster
from tests.e2e.controller.drain_workloads import template_restarted_at
from tests.e2e.faults.processes import BOUND, route, start_process
from tests.e2e.faults.suite import DRAIN_BOUND, READY_DELAY, ROWS, FaultRow, ProtectedDrain

pytestmark = pytest.mark.e2e


async def test_kill_9_mid_drain_then_restart(sim: KubeSim, tmp_path: Path) -> None:
    async with drain_cluster(sim, tmp_path) as cluster:
        a, a_port = await start_process(cluster, "graceful-drain-0")
        processes = [a]
        try:
            async with asyncio.timeout(BOUND):
                await a.until_log("became leader")
            b, b_port = await start_process(cluster, "graceful-drain-1")
            processes.append(b)
            await cluster.until_ca_bundle_published()
            route(cluster, a_port)
            await cluster.create_web(ready_delay=READY_DELAY)
            [pod] = await cluster.pods("web")
            await cluster.admin.patch(f"/api/v1/nodes/{pod['spec']['nodeName']}",
                                      {"spec": {"unschedulable": True}})  # fmt: skip

            async def right_allows() -> float:
                return sum([await p.right_allows() for p in processes])

            drain = ProtectedDrain(cluster.admin, pod["metadata"]["name"], [], right_allows)
            task = asyncio.create_task(drain.run())
            async with asyncio.timeout(DRAIN_BOUND):
                await drain.until(lambda answers: any(x.code == 429 for x in answers))
            drain.fault_on = True
            a.process.kill()  # SIGKILL: no Lease release, no goodbye
            route(cluster, b_port)
            await a.process.wait()
            killed = time.monotonic()
            restarted, _ = await start_process(cluster, "graceful-drain-0")
            processes.append(restarted)
            async with asyncio.timeout(BOUND):
                await restarted.until_log("became leader")  # its own Lease: no wait
                await cluster.until_deployment(lambda d: template_restarted_at(d) is not None)
            recovery = time.monotonic() - killed
            drain.fault_on = False
            async with asyncio.timeout(DRAIN_BOUND):
                await task
            survived = restarted.process.returncode is None and b.process.returncode is None
        finally:
            for process in processes:
                await process.stop()
    row = FaultRow(
        "kill -9 of the leader mid-drain, restarted (2 processes)", survived,
        drain.wrongly_allowed(during=True), drain.wrongly_allowed(during=False), recovery,
        BOUND, "real processes; the Service re-pointed at the other one at the kill",
    )  # fmt: skip
    ROWS.append(row)
    assert row.survived and row.wrongly_allowed_during == row.wrongly_allowed_after == 0, row
    assert restarted.process.returncode == 0  # stopped cleanly by SIGTERM at the end
