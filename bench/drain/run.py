"""Part 3: drains to completion on kubesim, with graceful-drain and without, against a PDB
`minAvailable: 1` and against a polling restart-on-cordon loop (with the PDBs); then the
unprotected drain and graceful-drain's on the real control plane, beside kubesim's.

One spawned process per (client, N) runs a fresh kubesim cluster through the four modes
(bench/drain/harness.py); the controller runs in a process of its own beside it. One more
spawned process runs a real control plane for every (client, N) (bench/drain/real.py).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.drain.compare import RealRun, build_comparison
from bench.drain.harness import Mode, RunResult, find_result
from bench.drain.karpenter import DISRUPTION_BOUND
from bench.drain.karpenter import TIMINGS as KARPENTER_TIMINGS
from bench.drain.karpenter_table import build_karpenter_table
from bench.drain.real_proc import RealOptions, RealResults, real_main
from bench.drain.series_proc import SeriesOptions, series_main
from bench.drain.timings import CLIENT_NAMES, REACTION_ALLOWANCE, DrainTimings
from bench.procs import Child, ChildFailed
from bench.report import Column, Table, fixed
from bench.stats import Bound, Target, evaluate
from realcluster.binaries import BinariesUnavailable, built_bin_dir, ensure_built

SERIES_TIMEOUT_PER_POD = 4.0
REAL_START_TIMEOUT = 300.0  # the cluster's components start one after another
REAL_SERIES_TIMEOUT = 240.0  # two drains, two webhook switches, a namespace deleted


@dataclass(frozen=True)
class RealProfile:
    clients: tuple[str, ...] = CLIENT_NAMES
    counts: tuple[int, ...] = (1, 10, 50)
    build: bool = True  # build the binaries when missing (minutes); False: skip the part
    skip: str | None = None  # why the real control plane is not run at all (--kubesim-only)
    # N of the real-Karpenter series (bench/drain/karpenter.py), after the others
    karpenter_counts: tuple[int, ...] = (10, 50)
    keep_logs: str | None = None  # a folder for the run's logs (--keep-logs); None: not kept


@dataclass(frozen=True)
class DrainProfile:
    clients: tuple[str, ...] = CLIENT_NAMES
    counts: tuple[int, ...] = (1, 10, 50)
    timings: DrainTimings = field(default_factory=DrainTimings)
    uvloop: bool = True
    real: RealProfile = field(default_factory=RealProfile)
    karpenter_only: bool = False  # only the real-Karpenter table (--karpenter-only)

    def without_real(self, why: str) -> DrainProfile:
        """The same profile, its real control plane's series left out for `why`."""
        return dataclasses.replace(self, real=dataclasses.replace(self.real, skip=why))

    def only_karpenter(self) -> DrainProfile:
        """The same profile with only the real-Karpenter series (no kubesim series, no
        other real series): its table alone."""
        real = dataclasses.replace(self.real, clients=())
        return dataclasses.replace(self, clients=(), real=real, karpenter_only=True)


def run(profile: DrainProfile) -> list[Table]:
    results: list[RunResult] = []
    for count in profile.counts:
        for client in profile.clients:
            options = SeriesOptions(client, count, profile.timings, profile.uvloop)
            child = Child(f"drain-{client}-{count}", series_main, options, daemon=False)
            try:
                results += child.receive(180.0 + count * SERIES_TIMEOUT_PER_POD)
            finally:
                child.finish(30.0)
    real = run_real(profile)
    karpenter = build_karpenter_table(real.karpenter, profile.real.karpenter_counts,
                                      KARPENTER_TIMINGS.readiness_delay,
                                      real.karpenter_not_run)  # fmt: skip
    if profile.karpenter_only:
        return [karpenter]
    comparison = build_comparison(results, real, profile.clients, profile.counts, profile.timings)
    return [*build_tables(results, profile), comparison, karpenter]


def _bin_dir(build: bool) -> str:
    if build:
        return str(ensure_built())
    built = built_bin_dir()
    if built is None:
        raise BinariesUnavailable("the real control plane's binaries are not built "
                                  "(realcluster/build)")  # fmt: skip
    return str(built)


def run_real(profile: DrainProfile) -> RealRun:
    """The real control plane's series, or why they did not run."""
    started = time.monotonic()
    real = profile.real
    if real.skip is not None:
        return RealRun(skipped=real.skip)
    try:
        options = RealOptions(_bin_dir(real.build), real.clients, real.counts, profile.timings,
                              profile.uvloop, real.karpenter_counts, real.keep_logs)  # fmt: skip
    except BinariesUnavailable as error:
        return RealRun(skipped=str(error).splitlines()[0])
    timeout = (
        REAL_START_TIMEOUT
        + sum(
            REAL_SERIES_TIMEOUT + count * SERIES_TIMEOUT_PER_POD
            for count in real.counts
            for _ in real.clients
        )
        + sum(REAL_SERIES_TIMEOUT + 2 * DISRUPTION_BOUND for _ in real.karpenter_counts)
    )
    child = Child("drain-real", real_main, options, daemon=False)
    try:
        received: RealResults = child.receive(timeout)
    except ChildFailed as error:
        return RealRun(skipped=f"failed: {str(error).splitlines()[0]}")
    finally:
        child.finish(60.0)
    return RealRun(tuple(received.results), None, received.start_seconds,
                   time.monotonic() - started, received.karpenter,
                   received.karpenter_skipped)  # fmt: skip


CONTROLLER_COLUMNS = [
    Column("client", "client"),
    Column("count", "N"),
    Column("floor", "floor R + retry s", fixed(2)),
    Column("target", "target s", fixed(2)),
    Column("drain", "drain s", fixed(2)),
    Column("surge", "last surge pod Ready s", fixed(2)),
    Column("after", "then drained in s", fixed(2)),
    Column("zero", "zero-Ready s (max)", fixed(2)),
    Column("rejections", "429s"),
    Column("cpu", "kubesim CPU s", fixed(2)),
]
ALTERNATIVE_COLUMNS = [
    Column("client", "client"),
    Column("count", "N"),
    Column("with_drain", "graceful-drain: drain s", fixed(2)),
    Column("none_drain", "unprotected: drain s", fixed(2)),
    Column("none_zero", "unprotected: zero-Ready s (max)", fixed(2)),
    Column("none_down", "unprotected: Deployments down"),
    Column("pdb", "PDB minAvailable 1"),
    Column("polling_drain", "PDB + restart loop: drain s", fixed(2)),
    Column("polling_zero", "PDB + restart loop: zero-Ready s", fixed(2)),
]


def _after_surge(result: RunResult | None) -> float | None:
    """The drain client's part: from the last surge pod Ready to the drain's end."""
    if result is None or result.duration is None or result.surge_ready_max is None:
        return None
    return result.duration - result.surge_ready_max


def _blocked_text(result: RunResult | None, window: float) -> str:
    if result is None:
        return "not run"
    if result.duration is None:
        return f"blocked (not drained after {window:g} s)"
    return f"drained in {result.duration:.2f} s"


def build_tables(results: Sequence[RunResult], profile: DrainProfile) -> list[Table]:
    timings = profile.timings
    with_controller = Table(
        "drain", "Drain to completion with graceful-drain (kubesim, scaled time)",
        CONTROLLER_COLUMNS,
    )  # fmt: skip
    alternatives = Table(
        "drain_alternatives", "Drain to completion: graceful-drain against the alternatives",
        ALTERNATIVE_COLUMNS,
    )  # fmt: skip
    for count in profile.counts:
        for client in profile.clients:
            controller = find_result(results, client, count, Mode.CONTROLLER)
            none = find_result(results, client, count, Mode.NONE)
            pdb = find_result(results, client, count, Mode.PDB)
            polling = find_result(results, client, count, Mode.POLLING)
            duration = None if controller is None else controller.duration
            with_controller.add(
                client=client,
                count=count,
                floor=timings.floor(client),
                target=timings.target(client),
                drain=duration,
                surge=None if controller is None else controller.surge_ready_max,
                after=_after_surge(controller),
                zero=None if controller is None else controller.zero_ready_max,
                rejections=None if controller is None else controller.rejections,
                cpu=None if controller is None else controller.cpu_seconds,
            )
            where = f"{client}, N={count}"
            limit = Target("drain with graceful-drain", Bound.AT_MOST,
                           round(timings.target(client), 2), " s")  # fmt: skip
            with_controller.verdicts.append(evaluate(limit, duration, where))
            outage = Target("seconds with zero Ready pods, with graceful-drain", Bound.AT_MOST, 0)
            with_controller.verdicts.append(
                evaluate(outage, None if controller is None else controller.zero_ready_max, where)
            )
            alternatives.add(
                client=client,
                count=count,
                with_drain=duration,
                none_drain=None if none is None else none.duration,
                none_zero=None if none is None else none.zero_ready_max,
                none_down=None if none is None else f"{none.outages}/{count}",
                pdb=_blocked_text(pdb, timings.blocked_window),
                polling_drain=None if polling is None else polling.duration,
                polling_zero=None if polling is None else polling.zero_ready_max,
            )
    scale = timings.scale
    with_controller.notes += [
        f"Time is scaled by {scale:g}: R = {timings.readiness_delay:g} s stands for "
        f"{timings.readiness_delay / scale:g} s, kubectl's 5 s retry is "
        f"{timings.retry_interval('kubectl'):g} s, Cluster Autoscaler's 10 s is "
        f"{timings.retry_interval('cluster-autoscaler'):g} s, Karpenter's back-off runs from "
        f"{timings.scaled(0.1):g} s to {timings.scaled(10):g} s (its retry interval once R has "
        f"passed: {timings.retry_interval('karpenter'):g} s). Divide a figure by {scale:g} for "
        "the real-cluster equivalent, less the simulator's own reaction time, which is not "
        "scaled.",
        f"Target: within R + one retry interval + {REACTION_ALLOWANCE:g} s of the floor "
        f"(the {REACTION_ALLOWANCE:g} s of reaction time unscaled, like the simulated control "
        "plane), and no second without a Ready pod.",
        "Each (client, N) is one fresh kubesim cluster: two nodes, the built-in controllers, "
        "the scheduler and a simulated kubelet per node in one process; the graceful-drain "
        "controller (webhook, cache, reconciler) in its own, registered with the shipped "
        "ValidatingWebhookConfiguration. N single-replica Deployments (maxSurge 1, "
        "maxUnavailable 0) run on node-a; node-b has room.",
        "'last surge pod Ready' is when the last Deployment had its replacement Ready beside "
        "the old pod, from the drain's start: the part of the drain the simulated cluster, "
        "not the drain client, is responsible for; 'then drained in' is the rest (the "
        "client's next retry, the old pod's exit and the client noticing it).",
        "'kubesim CPU s' is the CPU time of the process holding the simulated cluster (API "
        "server, controllers, scheduler, kubelets, with the drain client and the availability "
        "recorder) from the drain's start until every Deployment was Ready again: the cost of "
        "N rollouts, steadier than wall time on a shared machine.",
    ]
    alternatives.notes += [
        "Same clusters, four drains each in turn (each from a settled cluster, the previous "
        "drain's cordon and taints removed): PDB minAvailable 1 per Deployment; the same PDBs "
        "plus a loop restarting Deployments with pods on cordoned or drain-tainted nodes "
        f"every {timings.restart_period:g} s (the 60 s loop, scaled), its phase set so the "
        "drain starts half a period before its next tick (the average case); nothing; "
        "graceful-drain.",
        f"A PDB alone blocks the drain of a single-replica Deployment: it is watched for "
        f"{timings.blocked_window:g} s (60 s, scaled), then cut. The restart loop without a PDB "
        "would not help at all: the eviction goes through long before its next tick.",
    ]
    lagging = [
        (surge, result)
        for result in results
        if result.mode == Mode.CONTROLLER.value
        and (surge := result.surge_ready_max) is not None
        and surge > timings.readiness_delay + REACTION_ALLOWANCE
    ]
    if lagging:
        surge, worst = max(lagging, key=lambda pair: pair[0])
        with_controller.notes.append(
            f"Where a target is missed, look at the surge column: at {worst.client}, "
            f"N={worst.count} the last replacement was Ready {surge:.2f} s after the drain "
            f"began although R is {timings.readiness_delay:g} s: the N Deployments' rollouts "
            "queue up in the control plane (the unprotected drain's zero-Ready column shows the "
            "same lag for plain replacements). Whether that is kubesim's or any control "
            "plane's, the real control plane's table below says."
        )
    return [with_controller, alternatives]
