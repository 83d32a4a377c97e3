"""Controller processes for the fault suite: `graceful-drain controller` started as the
applied Deployment runs it (its arguments and environment, the ServiceAccount's kubeconfig),
its JSON log read as it comes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from tests.e2e.controller.drain_cluster import DrainCluster
from tests.e2e.controller.installed import NAMESPACE
from tests.e2e.controller.replica import container_invocation
from tests.e2e.faults.suite import RIGHT_ALLOWS

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


async def start_process(
    cluster: DrainCluster, pod_name: str, *, soft_open_files: int | None = None
) -> tuple[ControllerProcess, int]:
    """One controller process as the applied Deployment runs it; (process, webhook port).
    `soft_open_files`: its soft RLIMIT_NOFILE at start (a container runtime's default)."""
    args, env, _ = container_invocation(await cluster.applied_controller_deployment(), pod_name)

    def limit_open_files() -> None:
        if soft_open_files is not None:
            _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft_open_files, hard))

    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "graceful_drain.cli", "controller", *args,
        "--bind-address", "127.0.0.1", "--webhook-port", "0", "--metrics-port", "0",
        "--kubeconfig", str(cluster.controller_kubeconfig),
        "--self-signed-mount", str(cluster.workdir / "no-mount"),
        env={**os.environ, **env, "PYTHONPATH": str(SRC), "GRACEFUL_DRAIN_LOG_FORMAT": "json"},
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, preexec_fn=limit_open_files,
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
