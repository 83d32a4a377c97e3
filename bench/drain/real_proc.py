"""The real control plane in its own process for the whole run: a `RealCluster` in a temporary
folder, the graceful-drain controller in a process of its own against it, every (client, N)
series on it in turn (see real.py), then real Karpenter started on it for the Karpenter
series (karpenter.py). Everything stops when the process ends."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from bench.drain.controller import ControllerOptions, ControllerReady, controller_main
from bench.drain.harness import RunResult
from bench.drain.karpenter import TIMINGS as KARPENTER_TIMINGS
from bench.drain.karpenter import run_karpenter_series
from bench.drain.karpenter_table import KarpenterRun
from bench.drain.real import run_real_series
from bench.drain.series_proc import CONTROLLER_START_TIMEOUT
from bench.drain.timings import DrainTimings
from bench.procs import Child, run_child
from graceful_drain.logs import configure_logging
from realcluster.addons import Karpenter
from realcluster.cluster import ClusterError, RealCluster


@dataclass(frozen=True)
class RealOptions:
    bin_dir: str
    clients: tuple[str, ...]
    counts: tuple[int, ...]
    timings: DrainTimings
    uvloop: bool = True
    karpenter_counts: tuple[int, ...] = ()  # N of the real-Karpenter series; () for none
    # A folder that keeps the run's logs: each controller's (at info), and the cluster's
    # (kube-apiserver and the other components, Karpenter, the audit log). None: not kept.
    keep_logs: str | None = None

    def controller_log(self, name: str) -> str | None:
        return None if self.keep_logs is None else str(Path(self.keep_logs) / f"{name}.log")


@dataclass(frozen=True)
class RealResults:
    results: list[RunResult]
    start_seconds: float  # the cluster's start and the controller's sync
    karpenter: tuple[KarpenterRun, ...] = ()
    karpenter_skipped: str | None = None  # why the Karpenter series did not run


@contextlib.asynccontextmanager
async def _controller(cluster: RealCluster, rollout_timeout: float, uvloop: bool,
                      log_file: str | None = None,
                      ) -> AsyncIterator[tuple[ControllerReady, int]]:  # fmt: skip
    """The graceful-drain controller in a process of its own, against `cluster`, until the
    block ends: its ports and CA, and its pid (for its CPU and RSS)."""
    controller = Child(
        "controller-real",
        controller_main,
        ControllerOptions(str(cluster.kubeconfig_path), rollout_timeout, uvloop, log_file),
    )
    try:
        ready: ControllerReady = await asyncio.to_thread(
            controller.receive, CONTROLLER_START_TIMEOUT
        )
        assert controller.process.pid is not None
        yield ready, controller.process.pid
        await asyncio.to_thread(controller.ask, "stop", 30.0)
    finally:
        await asyncio.to_thread(controller.finish)


async def _run(connection: Connection, options: RealOptions) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-realcluster-") as workdir:
        started = time.monotonic()
        with RealCluster(Path(workdir), Path(options.bin_dir)) as cluster:
            try:
                async with _controller(
                    cluster,
                    options.timings.rollout_timeout,
                    options.uvloop,
                    options.controller_log("controller"),
                ) as (ready, _):
                    start_seconds = time.monotonic() - started
                    results = await run_real_series(
                        cluster, options.clients, options.counts, options.timings, ready
                    )
                karpenter, skipped = await _karpenter_series(cluster, options)
            finally:
                if options.keep_logs is not None:
                    _keep_logs(Path(workdir), Path(options.keep_logs))
    connection.send(RealResults(results, start_seconds, tuple(karpenter), skipped))


def _keep_logs(workdir: Path, keep: Path) -> None:
    """The cluster's logs (each component's, Karpenter's, the audit log) copied to `keep`."""
    for log in sorted(workdir.glob("*.log")):
        shutil.copyfile(log, keep / log.name)


async def _karpenter_series(
    cluster: RealCluster, options: RealOptions
) -> tuple[list[KarpenterRun], str | None]:
    """Real Karpenter started on the cluster and the Karpenter series run; or why not.

    They run in real time, so under a controller of their own with the unscaled
    rolloutTimeout (600 s): with the scaled one (60 s), the restarted-at that the first
    disruption's rollout left (kept for the old pod's grace period) could be past it when
    the second one's evictions come, and the escape hatch would let them through."""
    if not options.karpenter_counts:
        return [], "no N asked for"
    bin_dir = Path(options.bin_dir)
    if not (bin_dir / "karpenter").exists():
        return [], f"Karpenter is not built in {bin_dir} (realcluster/build)"
    try:
        karpenter = await asyncio.to_thread(Karpenter(cluster, bin_dir).start)
    except ClusterError as error:
        return [], f"Karpenter did not start: {str(error).splitlines()[0]}"
    try:
        async with _controller(cluster, KARPENTER_TIMINGS.rollout_timeout, options.uvloop,
                               options.controller_log("controller-karpenter")
                               ) as (ready, pid):  # fmt: skip
            runs = await run_karpenter_series(cluster, karpenter, options.karpenter_counts,
                                              ready, pid)  # fmt: skip
    finally:
        await asyncio.to_thread(karpenter.stop)
    return runs, None


def real_main(connection: Connection, options: RealOptions) -> None:
    """Process entry point (spawned)."""
    configure_logging("json", "warning", stream=open(os.devnull, "w"))  # noqa: SIM115
    run_child(connection, _run(connection, options), uvloop=options.uvloop)
