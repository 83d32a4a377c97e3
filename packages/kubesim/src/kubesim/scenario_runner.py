"""Running a scenario: its nodes, control plane, workloads, drains and measurements.

    async with KubeSim() as sim, ScenarioRun(sim, load_scenario(path)) as run:
        await run.wait_ready()
        outcomes = await run.run_drains()
        print("\\n".join(run.report_lines(outcomes)))

Everything goes through the API: the manifests are created with the admin's
client; the built-in controllers, the scheduler and one kubelet per node (a
`Cluster`) each run with their own identity, and the drain clients with theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesim.lifecycle import Lifecycle
from kubesim.types import Obj

from .availability import DeploymentTimeline
from .client import ApiStatusError, KubeClient, resource_path
from .cluster.cluster import Cluster
from .cluster.kubeletconfig import KubeletConfig
from .cluster.nodestatus import NodeShape
from .drain import CLIENTS, DrainClient, DrainResult
from .drain.result import Clock
from .recorder import AvailabilityRecorder
from .scenario import DrainSpec, NodeSpec, Scenario
from .sim import KubeSim

# Who each drain client acts as, and the User-Agent it sends.
DRAIN_IDENTITIES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "kubectl": ("kubernetes-admin", ("system:masters",), "kubectl/v1.32.0 (linux/amd64)"),
    "karpenter": (
        "system:serviceaccount:kube-system:karpenter",
        ("system:serviceaccounts", "system:masters"),
        "karpenter",
    ),
    "cluster-autoscaler": (
        "system:serviceaccount:kube-system:cluster-autoscaler",
        ("system:serviceaccounts", "system:masters"),
        "cluster-autoscaler/v1.32.0",
    ),
}


def node_shape(spec: NodeSpec) -> NodeShape:
    defaults = NodeShape()
    return NodeShape(
        cpu=spec.capacity.get("cpu", defaults.cpu),
        memory=spec.capacity.get("memory", defaults.memory),
        pods=spec.capacity.get("pods", defaults.pods),
        ephemeral_storage=spec.capacity.get("ephemeral-storage", defaults.ephemeral_storage),
        labels=dict(spec.labels),
        taints=tuple(dict(t) for t in spec.taints),
        unschedulable=spec.unschedulable,
    )


@dataclass(frozen=True)
class DrainOutcome:
    """A drain's result and what each measured Deployment went through.

    Measured from the drain's start until `settled`: when the measured
    Deployments were all Ready again after it (or the settle time ran out),
    since an outage a drain causes can outlast the drain itself.
    """

    spec: DrainSpec
    result: DrainResult
    started: float
    finished: float
    settled: float
    timelines: Mapping[str, DeploymentTimeline]

    def zero_ready_seconds(self, deployment: str) -> float:
        return self.timelines[deployment].zero_ready_seconds(self.started, self.settled)

    def max_ready(self, deployment: str) -> int:
        return self.timelines[deployment].max_ready(self.started, self.settled)

    def rollouts(self, deployment: str) -> list[str]:
        return self.timelines[deployment].rollouts(self.started, self.settled)


class ScenarioRun(Lifecycle):
    def __init__(
        self,
        sim: KubeSim,
        scenario: Scenario,
        *,
        kubelet: KubeletConfig | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.sim = sim
        self.scenario = scenario
        self.kubelet = kubelet or KubeletConfig()
        self.clock = clock
        self._clients: list[KubeClient] = []
        self.client = self._client("kubesim-scenario", ("system:masters",), "kubesim-scenario")
        self.cluster = Cluster(
            sim, scenario.controllers, kubelet_config=self.kubelet,
            nodes={spec.name: node_shape(spec) for spec in scenario.nodes},
        )  # fmt: skip
        self.recorder = AvailabilityRecorder(
            self.client, namespace=scenario.measure.namespace, clock=clock
        )

    def _client(self, user: str, groups: tuple[str, ...], agent: str) -> KubeClient:
        token = self.sim.user_token(user, groups)
        client = self.sim.local_client(token, agent)
        self._clients.append(client)
        return client

    async def start(self) -> ScenarioRun:
        try:
            await self.recorder.start()
            await self.cluster.start()
            for obj in self.scenario.manifests:
                await self.apply(obj)
        except BaseException:
            await self.stop()
            raise
        return self

    async def stop(self) -> None:
        await self.cluster.stop()
        await self.recorder.stop()
        for client in self._clients:
            await client.close()

    async def apply(self, obj: Obj) -> Obj:
        """Create one manifest through the API (its namespace too, if it is missing)."""
        group = obj["apiVersion"].rpartition("/")[0]
        rt = self.sim.resources.by_kind(group, obj["kind"])
        if rt is None:  # load_scenario has checked this already
            raise ValueError(f"kubesim does not serve {obj['apiVersion']} {obj['kind']}")
        namespace = (obj["metadata"].get("namespace") or "default") if rt.namespaced else None
        if namespace is not None:
            await self._ensure_namespace(namespace)
            obj = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
        return await self.client.create(resource_path(obj["apiVersion"], rt.plural, namespace), obj)

    async def _ensure_namespace(self, name: str) -> None:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        try:
            await self.client.create(resource_path("v1", "namespaces"), body)
        except ApiStatusError as err:
            if err.code != 409:
                raise

    def measured_ready(self) -> bool:
        measure = self.scenario.measure
        wanted = self.scenario.deployment_replicas()
        counts = self.recorder.ledger.ready_counts()  # once: it walks every pod
        return all(
            counts.get((measure.namespace, name), 0) >= wanted[(measure.namespace, name)]
            for name in measure.deployments
        )

    async def wait_ready(self) -> None:
        """Until every measured Deployment has all its replicas Ready (bound it by a timeout)."""
        await self.recorder.wait_until(self.measured_ready)

    def drain_client(self, spec: DrainSpec) -> DrainClient:
        user, groups, agent = DRAIN_IDENTITIES[spec.client]
        client = self._client(user, groups, agent)
        cls: Any = CLIENTS[spec.client]
        drain: DrainClient = cls(client, clock=self.clock, **spec.parameters)
        return drain

    async def run_drain(self, spec: DrainSpec, settle: float = 60.0) -> DrainOutcome:
        """Run one drain, then give the measured Deployments up to `settle` to be Ready again."""
        drain = self.drain_client(spec)
        started = self.recorder.mark_drain_started(spec.node, spec.client).at
        result = await drain.drain(spec.node)
        finished = self.recorder.mark_drain_finished(result).at
        removed = [key.split("/", 1) for key in (*result.evicted, *result.deleted)]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(settle):
                # First the recorder catches up with what the drain did, then the workloads.
                await self.recorder.wait_until(
                    lambda: all(self.recorder.pod_departed(ns, name) for ns, name in removed)
                )
                await self.wait_ready()
        settled = self.recorder.mark("settled", node=spec.node).at
        namespace = self.scenario.measure.namespace
        timelines = {
            name: self.recorder.timeline(name, namespace)
            for name in self.scenario.measure.deployments
        }
        return DrainOutcome(spec, result, started, finished, settled, timelines)

    async def run_drains(self, settle: float = 60.0) -> list[DrainOutcome]:
        """Each drain in turn, `after` its delay; wait_ready() first to start from steady state."""
        outcomes = []
        for spec in self.scenario.drains:
            await asyncio.sleep(spec.after)
            outcomes.append(await self.run_drain(spec, settle))
        return outcomes

    def report_lines(self, outcomes: list[DrainOutcome]) -> list[str]:
        lines = []
        for outcome in outcomes:
            result = outcome.result
            took = outcome.finished - outcome.started
            verdict = "drained" if result.drained else f"failed: {result.error}"
            lines.append(f"drain of {result.node} by {result.client}: {verdict} in {took:.1f}s")
            for name in outcome.timelines:
                lines.append(
                    f"  deployment {name}: {outcome.zero_ready_seconds(name):.2f}s with no Ready "
                    f"pod, at most {outcome.max_ready(name)} Ready, "
                    f"{len(outcome.rollouts(name))} new ReplicaSet(s)"
                )
        return lines
