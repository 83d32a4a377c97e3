"""The real control plane in its own process for the whole run: a `RealCluster` in a temporary
folder, the graceful-drain controller in a process of its own against it, and every
(client, N) series on it in turn (see real.py). Everything stops when the process ends."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from bench.drain.controller import ControllerOptions, ControllerReady, controller_main
from bench.drain.harness import RunResult
from bench.drain.real import run_real_series
from bench.drain.series_proc import CONTROLLER_START_TIMEOUT
from bench.drain.timings import DrainTimings
from bench.procs import Child, run_child
from graceful_drain.logs import configure_logging
from realcluster.cluster import RealCluster


@dataclass(frozen=True)
class RealOptions:
    bin_dir: str
    clients: tuple[str, ...]
    counts: tuple[int, ...]
    timings: DrainTimings
    uvloop: bool = True


@dataclass(frozen=True)
class RealResults:
    results: list[RunResult]
    start_seconds: float  # the cluster's start and the controller's sync


async def _run(connection: Connection, options: RealOptions) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-realcluster-") as workdir:
        started = time.monotonic()
        with RealCluster(Path(workdir), Path(options.bin_dir)) as cluster:
            controller = Child(
                "controller-real",
                controller_main,
                ControllerOptions(
                    str(cluster.kubeconfig_path), options.timings.rollout_timeout, options.uvloop
                ),
            )
            try:
                ready: ControllerReady = await asyncio.to_thread(
                    controller.receive, CONTROLLER_START_TIMEOUT
                )
                start_seconds = time.monotonic() - started
                results = await run_real_series(
                    cluster, options.clients, options.counts, options.timings, ready
                )
                await asyncio.to_thread(controller.ask, "stop", 30.0)
            finally:
                await asyncio.to_thread(controller.finish)
    connection.send(RealResults(results, start_seconds))


def real_main(connection: Connection, options: RealOptions) -> None:
    """Process entry point (spawned)."""
    configure_logging("json", "warning", stream=open(os.devnull, "w"))  # noqa: SIM115
    run_child(connection, _run(connection, options), uvloop=options.uvloop)
