"""Drains to completion for one client and one N, on one kubesim cluster, in four modes.

    results = await run_series("kubectl", 10, DrainTimings(), controller)

The cluster: a new KubeSim with two nodes, the built-in controllers, the scheduler and a
simulated kubelet per node (`ScenarioRun`), N Deployments Ready on node-a, and the
graceful-drain controller (its own process) watching it. Then four drains, each of the node
that holds the pods at that moment, each from a settled cluster (every Deployment Ready, the
previous drain's cordon and taints removed), watched by kubesim's availability recorder:

1. pdb: a PodDisruptionBudget minAvailable 1 per Deployment — the drain is blocked; it is
   watched for the blocked window, then cut;
2. polling: the same PDBs plus the restart-on-cordon loop;
3. none: nothing (PDBs deleted, no webhook) — evictions go through at once;
4. controller: graceful-drain's webhook registered.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bench.drain import workload
from bench.drain.controller import ControllerReady, install, uninstall
from bench.drain.poller import DRAIN_TAINTS, RestartOnCordon
from bench.drain.timings import DrainTimings
from kubesim.client import KubeClient, resource_path
from kubesim.cluster.kubeletconfig import KubeletConfig
from kubesim.drain import DrainClient, DrainResult
from kubesim.drain.api import list_pods_on_node
from kubesim.recorder import AvailabilityRecorder
from kubesim.scenario import DrainSpec
from kubesim.scenario_runner import ScenarioRun
from kubesim.sim import KubeSim
from kubesim.watchlog import watch_until

# The kubelet's minimum kill grace (2 s upstream) would put an unscaled floor under every pod
# exit; the pods here exit at once on SIGTERM.
KUBELET = KubeletConfig(minimum_kill_grace=0.0)
SETTLE_SECONDS = 60.0
Obj = dict[str, Any]


class Mode(StrEnum):
    PDB = "pdb"
    POLLING = "polling"
    NONE = "none"
    CONTROLLER = "controller"


@dataclass(frozen=True)
class RunResult:
    client: str
    mode: str
    count: int
    drained: bool  # the client reported the node drained within the bound
    error: str | None
    duration: float | None  # drain start to the client's return; None when cut at the bound
    zero_ready: tuple[float, ...]  # per Deployment, seconds with no Ready pod from drain start
    surge_ready: tuple[float | None, ...]  # per Deployment, from drain start to 2 Ready pods
    rejections: int  # 429s the client was answered
    # CPU seconds this process (kubesim's API server, controllers, scheduler, kubelets, the
    # drain client and the recorder) spent from the drain's start until every Deployment was
    # Ready again; None where not measured (the real control plane's rows)
    cpu_seconds: float | None = None

    @property
    def zero_ready_max(self) -> float:
        return max(self.zero_ready, default=0.0)

    @property
    def outages(self) -> int:
        return sum(1 for seconds in self.zero_ready if seconds > 0)

    @property
    def surge_ready_max(self) -> float | None:
        """When the last replacement was Ready beside its old pod; None if one never was."""
        if not self.surge_ready or any(at is None for at in self.surge_ready):
            return None
        return max(at for at in self.surge_ready if at is not None)


def find_result(results: Sequence[RunResult], client: str, count: int,
                mode: Mode) -> RunResult | None:  # fmt: skip
    for result in results:
        if (result.client, result.count, result.mode) == (client, count, mode.value):
            return result
    return None


def first_reaching(samples: Sequence[tuple[float, int]], level: int, start: float,
                   end: float) -> float | None:  # fmt: skip
    """Seconds from `start` until the Ready count (a step function: each sample's count holds
    from its time on) first stands at `level` or more within [start, end]; None if it never
    does."""
    steps: dict[float, int] = {}
    for at, count in samples:  # a later sample at the same time wins, as in the recorder
        steps[at] = count
    ordered = sorted(steps.items())
    at_start = None
    for at, count in ordered:
        if at <= start:
            at_start = count
    if at_start is not None and at_start >= level:
        return 0.0
    for at, count in ordered:
        if start < at <= end and count >= level:
            return at - start
    return None


def drain_bound(mode: Mode, timings: DrainTimings, client: str) -> float:
    """How long a drain may run before it is cut: the blocked window under bare PDBs, else
    generously past the polling period and the target."""
    if mode is Mode.PDB:
        return timings.blocked_window
    return timings.blocked_window + timings.restart_period + 3 * timings.target(client)


def budgets_computed(pdbs: list[Obj], count: int) -> bool:
    """Every budget's status reflects its spec and counts a healthy pod."""
    return count == sum(
        1
        for pdb in pdbs
        if (pdb.get("status") or {}).get("observedGeneration") == pdb["metadata"].get("generation")
        and (pdb.get("status") or {}).get("currentHealthy", 0) >= 1
    )


def all_ready(recorder: AvailabilityRecorder, namespace: str, names: Sequence[str]) -> bool:
    """Every (single-replica) Deployment named has a Ready pod, as the recorder has seen it."""
    counts = recorder.ledger.ready_counts()  # once: it walks every pod
    return all(counts.get((namespace, name), 0) >= 1 for name in names)


async def measure_drain(drain: DrainClient, recorder: AvailabilityRecorder, node: str,
                        mode: Mode, timings: DrainTimings, namespace: str,
                        names: Sequence[str]) -> RunResult:  # fmt: skip
    """One drain of `node` by `drain`, cut at its bound, then watched until every Deployment
    in `names` is Ready again: what the recorder saw of it, from the drain's start."""
    cpu_started = time.process_time()
    started = recorder.mark_drain_started(node, drain.name).at
    result: DrainResult | None = None
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(drain_bound(mode, timings, drain.name)):
            result = await drain.drain(node)
    finished = recorder.mark("drain-returned", node=node).at
    removed = [] if result is None else [
        key.split("/", 1) for key in (*result.evicted, *result.deleted)
    ]  # fmt: skip
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(SETTLE_SECONDS + len(names)):
            await recorder.wait_until(
                lambda: all(recorder.pod_departed(ns, name) for ns, name in removed)
            )
            await recorder.wait_until(lambda: all_ready(recorder, namespace, names))
    settled = recorder.mark("settled", node=node).at
    cpu_seconds = time.process_time() - cpu_started
    timelines = [recorder.timeline(name, namespace) for name in names]
    return RunResult(
        client=drain.name,
        mode=mode.value,
        count=len(names),
        drained=result is not None and result.drained,
        error=None if result is None else result.error,
        duration=None if result is None else finished - started,
        zero_ready=tuple(t.zero_ready_seconds(started, settled) for t in timelines),
        surge_ready=tuple(first_reaching(t.samples, 2, started, settled) for t in timelines),
        rejections=0 if result is None else sum(result.rejections.values()),
        cpu_seconds=cpu_seconds,
    )


async def reset_node(api: KubeClient, name: str) -> None:
    """Undo a drain: uncordon, and drop Karpenter's and Cluster Autoscaler's taints."""
    path = resource_path("v1", "nodes", name=name)
    node = await api.get(path)
    spec = node.setdefault("spec", {})
    spec["unschedulable"] = False
    spec["taints"] = [t for t in spec.get("taints") or [] if t.get("key") not in DRAIN_TAINTS]
    await api.replace(path, node)


async def node_holding(api: KubeClient, namespace: str, fallback: str) -> str:
    """The node among node-a and node-b that runs the namespace's pods (`fallback` if none)."""
    for name in (workload.DRAINED_NODE, workload.OTHER_NODE):
        pods = await list_pods_on_node(api, name)
        if any(p["metadata"].get("namespace") == namespace for p in pods):
            return name
    return fallback


class Series:
    def __init__(self, sim: KubeSim, client: str, count: int, timings: DrainTimings,
                 controller: ControllerReady) -> None:  # fmt: skip
        self.sim = sim
        self.client = client
        self.count = count
        self.timings = timings
        self.controller = controller
        self.scenario = workload.scenario(
            client, count, timings.readiness_delay, dict(timings.parameters(client)),
            with_pdb=False,
        )  # fmt: skip
        self.run = ScenarioRun(sim, self.scenario, kubelet=KUBELET)
        self.names = self.scenario.measure.deployments
        self.node = workload.DRAINED_NODE  # where the pods are

    @property
    def api(self) -> KubeClient:
        return self.run.client

    async def settled(self) -> None:
        async with asyncio.timeout(SETTLE_SECONDS + self.count):
            await self.run.wait_ready()

    async def create_pdbs(self) -> None:
        for name in self.names:
            await self.run.apply(workload.pdb(name))

        await watch_until(
            self.api, "policy/v1", "poddisruptionbudgets", "PodDisruptionBudget",
            workload.NAMESPACE, lambda pdbs: budgets_computed(pdbs, self.count),
            bound=SETTLE_SECONDS,
        )  # fmt: skip

    async def delete_pdbs(self) -> None:
        for name in self.names:
            await self.api.delete(
                resource_path("policy/v1", "poddisruptionbudgets", workload.NAMESPACE, name)
            )

    async def drain(self, mode: Mode) -> RunResult:
        """One drain of the node holding the pods, until every Deployment is Ready again."""
        spec = DrainSpec(self.node, self.client, 0.0, dict(self.timings.parameters(self.client)))
        result = await measure_drain(
            self.run.drain_client(spec), self.run.recorder, spec.node, mode, self.timings,
            workload.NAMESPACE, self.names,
        )  # fmt: skip
        await reset_node(self.api, spec.node)
        self.node = await node_holding(self.api, workload.NAMESPACE, self.node)
        return result

    async def all_modes(self) -> list[RunResult]:
        results = []
        await self.settled()
        await self.create_pdbs()
        results.append(await self.drain(Mode.PDB))
        await self.settled()
        poller = RestartOnCordon(self.api, self.timings.restart_period,
                                 first_tick=self.timings.restart_period / 2)  # fmt: skip
        poller.start()
        try:
            # The loop's phase is set so that the drain starts half a period before its next
            # tick: the average case.
            results.append(await self.drain(Mode.POLLING))
        finally:
            await poller.stop()
        await self.delete_pdbs()
        await self.settled()
        results.append(await self.drain(Mode.NONE))
        await self.settled()
        install(self.sim, self.controller)
        try:
            results.append(await self.drain(Mode.CONTROLLER))
        finally:
            uninstall(self.sim)
        return results


async def run_series(sim: KubeSim, client: str, count: int, timings: DrainTimings,
                     controller: ControllerReady) -> list[RunResult]:  # fmt: skip
    series = Series(sim, client, count, timings, controller)
    async with series.run:
        return await series.all_modes()
