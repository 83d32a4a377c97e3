"""One fresh process that syncs the controller's `ClusterCache` from kubesim and measures it.

RSS is read after every import and the client are set up (the baseline) and again once the
cache has synced and a full garbage collection has run: the difference is what the cached
objects cost this process, allocator slack included.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from bench.procs import rss_bytes, run_child

try:
    from graceful_drain.controller.cache.cluster import ClusterCache
except ImportError:  # a --baseline commit from before kube/ became generic (b67cf4e: issue 14's)
    from graceful_drain.kube.cache import ClusterCache  # type: ignore[attr-defined,no-redef]
from graceful_drain.kube.client import create_client
from graceful_drain.logs import configure_logging


@dataclass(frozen=True)
class SyncOptions:
    kubeconfig: str
    timeout: float
    uvloop: bool = True


@dataclass(frozen=True)
class SyncResult:
    pods: int
    replicasets: int
    deployments: int
    rss_before: int  # bytes
    rss_after: int  # bytes
    seconds: float  # start() to every informer synced
    cpu_seconds: float  # this process's CPU time over the same span


async def _sync(connection: Connection, options: SyncOptions) -> None:
    client = create_client(Path(options.kubeconfig))
    cache = ClusterCache(client)
    gc.collect()
    rss_before = rss_bytes()
    started, cpu_started = time.perf_counter(), time.process_time()
    await cache.start()
    try:
        async with asyncio.timeout(options.timeout):
            await cache.wait_synced()
        seconds = time.perf_counter() - started
        cpu_seconds = time.process_time() - cpu_started
        gc.collect()
        result = SyncResult(
            pods=len(cache.pods),
            replicasets=len(cache.replicasets),
            deployments=len(cache.deployments),
            rss_before=rss_before,
            rss_after=rss_bytes(),
            seconds=seconds,
            cpu_seconds=cpu_seconds,
        )
    finally:
        await cache.stop()
        await client.close()
    connection.send(result)


def sync_main(connection: Connection, options: SyncOptions) -> None:
    """Process entry point (spawned)."""
    configure_logging("json", "warning", stream=open(os.devnull, "w"))  # noqa: SIM115
    run_child(connection, _sync(connection, options), uvloop=options.uvloop)
