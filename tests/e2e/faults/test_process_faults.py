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
import contextlib
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubesim.sim import KubeSim
from tests.e2e.controller.drain_cluster import DrainCluster, drain_cluster
from tests.e2e.controller.drain_workloads import template_restarted_at
from tests.e2e.controller.installed import NAMESPACE
from tests.e2e.controller.replica import container_invocation
from tests.e2e.faults.suite import (
    DRAIN_BOUND,
    READY_DELAY,
    RIGHT_ALLOWS,
    ROWS,
    FaultRow,
    ProtectedDrain,
)

pytestmark = pytest.mark.e2e

SRC = Path(__file__).resolve().parents[3] / "src"
BOUND = 30.0


@dataclass
class ControllerProcess:
    pod_name: str
    process: asyncio.subprocess.Process
    metrics_port: int | None = None
    logs: list[dict[str, Any]] = field(default_factory=list)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _reader: asyncio.Task[None] | None = None

    def start_reading(self) -> None:
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict):
                    async with self._changed:
                        self.logs.append(record)
                        self._changed.notify_all()
        async with self._changed:
            self._changed.notify_all()

    async def until_log(self, message: str) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            return next((r for r in self.logs if r.get("msg") == message), None)

        async with self._changed:
            await self._changed.wait_for(
                lambda: found() is not None or self.process.returncode is not None
            )
        record = found()
        assert record is not None, f"{self.pod_name} exited before logging {message!r}"
        return record

    async def right_allows(self) -> float:
        """Its allow decisions for the reasons that are right for a protected pod (/metrics);
        0 once it is gone (a killed process's count went with it, before its kill)."""
        if self.process.returncode is not None or self.metrics_port is None:
            return 0.0
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        try:
            async with aiohttp.ClientSession() as session, session.get(url) as response:
                text = await response.text()
        except aiohttp.ClientError:
            return 0.0
        total = 0.0
        for reason in RIGHT_ALLOWS:
            prefix = f'graceful_drain_decisions_total{{allowed="true",reason="{reason}"}} '
            for line in text.splitlines():
                if line.startswith(prefix):
                    total += float(line.removeprefix(prefix))
        return total

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(BOUND):
                    await self.process.wait()
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)


async def start_process(cluster: DrainCluster, pod_name: str) -> tuple[ControllerProcess, int]:
    """One controller process as the applied Deployment runs it; (process, webhook port)."""
    args, env, _ = container_invocation(await cluster.applied_controller_deployment(), pod_name)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "graceful_drain.cli", "controller", *args,
        "--bind-address", "127.0.0.1", "--webhook-port", "0", "--metrics-port", "0",
        "--kubeconfig", str(cluster.controller_kubeconfig),
        "--self-signed-mount", str(cluster.workdir / "no-mount"),
        env={**os.environ, **env, "PYTHONPATH": str(SRC), "GRACEFUL_DRAIN_LOG_FORMAT": "json"},
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    controller = ControllerProcess(pod_name, process)
    controller.start_reading()
    async with asyncio.timeout(BOUND):
        started = await controller.until_log("controller started")
    controller.metrics_port = int(started["metrics_port"])
    return controller, int(started["webhook_port"])


def route(cluster: DrainCluster, port: int) -> None:
    cluster.sim.webhook_services.register(NAMESPACE, "graceful-drain-webhook", 443,
                                          "127.0.0.1", port)  # fmt: skip


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
