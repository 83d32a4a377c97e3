"""Part 2: resident memory and time to a synced cache for growing pod counts, from kubesim.

One kubesim process is seeded up to each size in turn (directly through `sim.create`, no
HTTP); for each size a fresh process syncs the controller's `ClusterCache` from it over HTTPS
(lightkube, pages of 500, as in production) and reports its RSS growth and time to synced.
Memory per cached pod is the least-squares slope of RSS over the pod count, so the fixed cost
of the process, the client and the few owners cancels out.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.memory.cache_proc import SyncOptions, SyncResult, sync_main
from bench.memory.kubesim_proc import SeedOptions, kubesim_main
from bench.procs import Child
from bench.report import Column, Table, fixed
from bench.stats import Bound, Target, evaluate, slope

PER_POD_TARGET = Target("RSS per cached pod", Bound.BELOW, 2048, " bytes")
SEED_SECONDS_PER_POD = 0.01  # generous bound on seeding time (about 1 ms per pod when idle)
SYNC_SECONDS_PER_POD = 0.005


@dataclass(frozen=True)
class MemoryProfile:
    sizes: tuple[int, ...] = (1_000, 10_000, 50_000)
    namespaces: int = 20
    uvloop: bool = True


COLUMNS = [
    Column("pods", "pods"),
    Column("cached", "objects cached (pods/RS/Deploy)"),
    Column("seconds", "time to synced s", fixed(2)),
    Column("cpu", "cache CPU s", fixed(2)),
    Column("rss_delta", "RSS delta MiB", fixed(1)),
    Column("per_pod", "RSS delta / pod bytes", fixed(0)),
]


def run(profile: MemoryProfile) -> Table:
    results: list[SyncResult] = []
    seeding: list[float] = []
    sim = Child("kubesim", kubesim_main, SeedOptions(profile.namespaces, profile.uvloop))
    try:
        kubeconfig = sim.receive(60.0)
        for size in profile.sizes:
            _, _, seconds = sim.ask(("seed", size), 60.0 + size * SEED_SECONDS_PER_POD)
            seeding.append(seconds)
            timeout = 60.0 + size * SYNC_SECONDS_PER_POD
            cache = Child(f"cache-{size}", sync_main, SyncOptions(kubeconfig, timeout))
            try:
                results.append(cache.receive(timeout + 30.0))
            finally:
                cache.finish()
        sim.ask("stop", 30.0)
    finally:
        sim.finish()
    return build_table(profile, results, seeding)


def build_table(profile: MemoryProfile, results: list[SyncResult],
                seeding: list[float]) -> Table:  # fmt: skip
    table = Table("memory", "Cache memory and time to synced, listed from kubesim", COLUMNS)
    for result in results:
        delta = result.rss_after - result.rss_before
        table.add(
            pods=result.pods,
            cached=f"{result.pods:,} / {result.replicasets} / {result.deployments}",
            seconds=result.seconds,
            cpu=result.cpu_seconds,
            rss_delta=delta / 2**20,
            per_pod=delta / result.pods if result.pods else None,
        )
    per_pod = slope([(r.pods, r.rss_after - r.rss_before) for r in results])
    where = "slope of RSS over pods, " + " → ".join(f"{r.pods:,}" for r in results)
    table.verdicts.append(evaluate(PER_POD_TARGET, per_pod, where))
    table.notes += [
        "Each size is synced by a fresh process (RSS measured after imports and client set-up, "
        "then after sync and a full GC). kubesim runs in another process, seeded through "
        f"`sim.create` (no HTTP) in {sum(seeding):.0f} s; "
        f"{profile.namespaces} namespaces, one Deployment and ReplicaSet each, pods of about "
        "3 KiB of JSON (kubesim keeps no managedFields).",
        "Time to synced includes kubesim serving the pages over HTTPS from another process; "
        "the cache's own cost is its CPU column.",
    ]
    if per_pod is not None and not PER_POD_TARGET.met_by(per_pod):
        table.notes.append(
            "Target missed: RSS growth includes allocator slack and the decode garbage the "
            "process keeps in its free lists; see the decode table for the bytes tracemalloc "
            "attributes to each cached PodInfo."
        )
    return table
