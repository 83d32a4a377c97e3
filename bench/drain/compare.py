"""Part 3's drains on the real control plane beside kubesim's, and whose the lag at the
largest N is. Pure: results in, a table out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.drain.harness import Mode, RunResult, find_result
from bench.drain.karpenter_table import KarpenterRun
from bench.drain.timings import REACTION_ALLOWANCE, DrainTimings
from bench.report import Cell, Column, Table, fixed

KUBESIM = "kubesim"
REAL = "real"


@dataclass(frozen=True)
class RealRun:
    """The real control plane's part of the run, or why it did not run."""

    results: tuple[RunResult, ...] = ()
    skipped: str | None = None  # no Go, no binaries, or the reason it failed
    start_seconds: float | None = None  # the cluster's start and the controller's sync
    seconds: float | None = None  # the whole part, start and stop included
    karpenter: tuple[KarpenterRun, ...] = ()  # the real-Karpenter series (karpenter.py)
    karpenter_skipped: str | None = None  # why they did not run (None: they did)

    @property
    def karpenter_not_run(self) -> str | None:
        """Why the Karpenter table is empty: the whole part's reason, or its own."""
        return self.skipped if self.skipped is not None else self.karpenter_skipped


COLUMNS = [
    Column("client", "client"),
    Column("count", "N"),
    Column("plane", "control plane"),
    Column("drain", "graceful-drain: drain s", fixed(2)),
    Column("surge", "last surge pod Ready s", fixed(2)),
    Column("zero", "graceful-drain: zero-Ready s (max)", fixed(2)),
    Column("none_drain", "unprotected: drain s", fixed(2)),
    Column("none_zero", "unprotected: zero-Ready s (max)", fixed(2)),
    Column("none_down", "unprotected: Deployments down"),
]


def _row(plane: str, client: str, count: int, results: Sequence[RunResult]) -> dict[str, Cell]:
    controller = find_result(results, client, count, Mode.CONTROLLER)
    none = find_result(results, client, count, Mode.NONE)
    return {
        "client": client,
        "count": count,
        "plane": plane,
        "drain": None if controller is None else controller.duration,
        "surge": None if controller is None else controller.surge_ready_max,
        "zero": None if controller is None else controller.zero_ready_max,
        "none_drain": None if none is None else none.duration,
        "none_zero": None if none is None else none.zero_ready_max,
        "none_down": None if none is None else f"{none.outages}/{count}",
    }


def slowest_surge(results: Sequence[RunResult], count: int) -> tuple[str, float] | None:
    """The client whose last surge pod was Ready latest at `count`, with graceful-drain."""
    surges = [
        (result.client, surge)
        for result in results
        if result.mode == Mode.CONTROLLER.value
        and result.count == count
        and (surge := result.surge_ready_max) is not None
    ]
    return max(surges, key=lambda pair: pair[1], default=None)


def longest_unprotected_outage(results: Sequence[RunResult], count: int) -> float | None:
    outages = [r.zero_ready_max for r in results if r.mode == Mode.NONE.value and r.count == count]
    return max(outages, default=None)


def lag_attribution(kubesim: Sequence[RunResult], real: RealRun, count: int,
                    timings: DrainTimings) -> str:  # fmt: skip
    """Whose the lag is at `count`: the last surge pod's readiness on each control plane,
    judged against R + the reaction allowance (a replacement needs R, the cluster reacts)."""
    if real.skipped is not None:
        return f"Whose the lag at N={count} is cannot be said from this run: {real.skipped}."
    on_kubesim, on_real = slowest_surge(kubesim, count), slowest_surge(real.results, count)
    if on_kubesim is None or on_real is None:
        return f"Whose the lag at N={count} is cannot be said: a control plane has no figure."
    allowance = timings.readiness_delay + REACTION_ALLOWANCE
    (kubesim_client, kubesim_s), (real_client, real_s) = on_kubesim, on_real
    figures = (
        f"the last surge pod was Ready {real_s:.2f} s after the drain began on the real control "
        f"plane ({real_client}), {kubesim_s:.2f} s on kubesim ({kubesim_client}), against "
        f"R + {REACTION_ALLOWANCE:g} s = {allowance:.2f} s"
    )
    if kubesim_s > allowance >= real_s:
        verdict = f"At N={count} the lag is kubesim's: {figures}."
    elif kubesim_s > allowance and real_s >= kubesim_s:
        verdict = (
            f"At N={count} the lag is not kubesim's: the real control plane lags as much "
            f"or more — {figures}."
        )
    elif kubesim_s > allowance:
        verdict = (
            f"At N={count} the lag is partly kubesim's: the real control plane lags too, "
            f"less — {figures}; kubesim adds {kubesim_s - real_s:.2f} s."
        )
    elif real_s > allowance:
        verdict = f"At N={count} only the real control plane lags: {figures}."
    else:
        verdict = f"At N={count} neither control plane lags: {figures}."
    kubesim_out = longest_unprotected_outage(kubesim, count)
    real_out = longest_unprotected_outage(real.results, count)
    if kubesim_out is not None and real_out is not None:
        verdict += (
            f" Unprotected, a Deployment went without a Ready pod for up to {real_out:.2f} s on "
            f"the real control plane and {kubesim_out:.2f} s on kubesim: the time its "
            "replacement took to be Ready, the same rollout seen without graceful-drain."
        )
    return verdict


def build_comparison(kubesim: Sequence[RunResult], real: RealRun, clients: Sequence[str],
                     counts: Sequence[int], timings: DrainTimings) -> Table:  # fmt: skip
    table = Table(
        "drain_real", "Drain to completion: the real control plane beside kubesim (scaled time)",
        COLUMNS,
    )  # fmt: skip
    for count in counts:
        for client in clients:
            table.add(**_row(KUBESIM, client, count, kubesim))
            if real.skipped is None:
                table.add(**_row(REAL, client, count, real.results))
    if real.skipped is not None:
        table.notes.append(f"Real control plane: not run — {real.skipped}.")
    else:
        took = "" if real.seconds is None else f"; the part took {real.seconds:.0f} s"
        start = "" if real.start_seconds is None else (
            f" (its start and the controller's sync: {real.start_seconds:.0f} s)"
        )  # fmt: skip
        table.notes.append(
            "Real control plane: etcd, kube-apiserver, kube-controller-manager and "
            "kube-scheduler v1.34 (realcluster/: upstream default workers and client rate "
            "limits) with kwok nodes reading the same "
            "readiness-delay annotation as kubesim's kubelets; one cluster for the whole part"
            f"{start}{took}. Each (client, N) gets a namespace of its own with the same N "
            "Deployments on node-a, drained twice from a settled cluster: unprotected (no "
            "webhook), then with graceful-drain's webhook registered by URL; the namespace is "
            "deleted before the next."
        )
    table.notes.append(
        "The same drain clients, scaled timings and availability recorder on both; the "
        "kubesim rows are the 'none' and 'controller' drains of the tables above. 'last surge "
        "pod Ready' is the control plane's share of the drain: a replacement needs R = "
        f"{timings.readiness_delay:g} s, the rest is the control plane's reaction (API "
        "server, Deployment and ReplicaSet controllers, scheduler, kubelet)."
    )
    if counts:
        table.notes.append(lag_attribution(kubesim, real, max(counts), timings))
    return table
