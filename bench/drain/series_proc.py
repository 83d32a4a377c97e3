"""One kubesim cluster in its own process for one drain client and one N, with the
graceful-drain controller in a process of its own beside it (see harness.py)."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from multiprocessing.connection import Connection

from bench.drain.controller import ControllerOptions, ControllerReady, controller_main
from bench.drain.harness import RunResult, run_series
from bench.drain.timings import DrainTimings
from bench.procs import Child, run_child
from graceful_drain.logs import configure_logging
from kubesim.sim import KubeSim

CONTROLLER_START_TIMEOUT = 90.0


@dataclass(frozen=True)
class SeriesOptions:
    client: str
    count: int
    timings: DrainTimings
    uvloop: bool = True


async def _series(connection: Connection, options: SeriesOptions) -> None:
    async with KubeSim() as sim:
        controller = Child(
            f"controller-{options.client}-{options.count}",
            controller_main,
            ControllerOptions(str(sim.kubeconfig_path), options.timings.rollout_timeout),
        )
        try:
            ready: ControllerReady = await asyncio.to_thread(
                controller.receive, CONTROLLER_START_TIMEOUT
            )
            results: list[RunResult] = await run_series(
                sim, options.client, options.count, options.timings, ready
            )
            await asyncio.to_thread(controller.ask, "stop", 30.0)
        finally:
            await asyncio.to_thread(controller.finish)
    connection.send(results)


def series_main(connection: Connection, options: SeriesOptions) -> None:
    """Process entry point (spawned)."""
    configure_logging("json", "warning", stream=open(os.devnull, "w"))  # noqa: SIM115
    run_child(connection, _series(connection, options), uvloop=options.uvloop)
