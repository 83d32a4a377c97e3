"""Drains on a whole simulated cluster, through the API only.

Two nodes with kubelets, the scheduler and the built-in controllers (a
`ScenarioRun`), workloads created with kubectl or from scenarios, and the
availability recorder watching. Kubelet timings are the real defaults except
where a test would wait for seconds; drain-client timings are scaled down.
Nothing waits by sleeping: the recorder's `wait_until` re-checks on watch events.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesim.client import resource_path
from kubesim.cluster.cluster import COMPONENTS
from kubesim.cluster.kubeletconfig import KubeletConfig
from kubesim.drain import ClusterAutoscalerDrain, KarpenterDrain, KubectlDrain
from kubesim.scenario import DrainSpec, load_scenario, parse_scenario
from kubesim.scenario_runner import ScenarioRun
from kubesim.sim import KubeSim
from tests.e2e.controller.drain_workloads import preferring_node_a

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
NS = "default"
REPO = Path(__file__).parents[3]
BOUND = 60.0  # a guard against hangs only; nothing is asserted on time
FAST_KUBELET = KubeletConfig(
    eviction_monitoring_interval=0.2, backoff_initial=0.05, backoff_max=0.4, minimum_kill_grace=0.0
)
PDB_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."


def web(replicas: int = 1, grace: int = 0, ready_delay: str = "200ms") -> Obj:
    """A surge-able Deployment that starts on node-a (a preference: node-b stays possible)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {
                    "labels": {"app": "web"},
                    "annotations": {"sim.kubesim.io/ready-delay": ready_delay},
                },
                "spec": {
                    "terminationGracePeriodSeconds": grace,
                    "affinity": preferring_node_a(),
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx:1.27",
                            "readinessProbe": {"httpGet": {"path": "/", "port": 80}},
                        }
                    ],
                },
            },
        },
    }


PDB_MIN_AVAILABLE_1: Obj = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "web", "namespace": NS},
    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
}

Start = Callable[..., Awaitable[ScenarioRun]]


@pytest.fixture
async def start(sim: KubeSim) -> AsyncIterator[Start]:
    """Start a two-node cluster with the given manifests; stopped at teardown."""
    runs: list[ScenarioRun] = []

    async def make(*manifests: Obj, scenario: Any = None) -> ScenarioRun:
        if scenario is None:
            doc = {"nodes": [{"name": "node-a"}, {"name": "node-b"}], "manifests": list(manifests)}
            scenario = parse_scenario(doc, tuple(COMPONENTS))
        run = await ScenarioRun(sim, scenario, kubelet=FAST_KUBELET).start()
        runs.append(run)
        return run

    yield make
    for run in runs:
        await run.stop()


def kubectl(sim: KubeSim, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(sim.kubeconfig_path)}
    return subprocess.run(
        ["kubectl", *args], capture_output=True, text=True, env=env, timeout=BOUND, input=stdin
    )


async def pods(run: ScenarioRun) -> list[Obj]:
    listed = await run.client.get(resource_path("v1", "pods", NS))
    return list(listed["items"])


def ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def ready_web(run: ScenarioRun, count: int = 1) -> None:
    async with asyncio.timeout(BOUND):
        await run.recorder.wait_until(lambda: run.recorder.ready("web") == count)


async def back_after_outage(run: ScenarioRun, since: float) -> None:
    """Until the recorder has seen web lose its last Ready pod after `since`, and get one back."""

    def recovered() -> bool:
        counts = [count for at, count in run.recorder.timeline("web").samples if at >= since]
        return 0 in counts and counts[-1] >= 1

    async with asyncio.timeout(BOUND):
        await run.recorder.wait_until(recovered)


# --- workloads ----------------------------------------------------------------------------


async def test_a_deployment_applied_with_kubectl_gets_scheduled_and_ready(
    sim: KubeSim, start: Start
) -> None:
    run = await start()
    applied = await asyncio.to_thread(
        kubectl, sim, "apply", "-f", "-", stdin=yaml.safe_dump(web(2))
    )
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.strip() == "deployment.apps/web created"
    await ready_web(run, 2)

    listed = await pods(run)
    assert len(listed) == 2
    for pod in listed:
        assert pod["spec"]["nodeName"] in ("node-a", "node-b")
        assert pod["status"]["phase"] == "Running"
        assert ready(pod)
        [container] = pod["status"]["containerStatuses"]
        assert container["ready"] and "running" in container["state"]
    status = await asyncio.to_thread(
        kubectl, sim, "rollout", "status", "deployment/web", "--timeout=30s"
    )
    assert status.returncode == 0, status.stderr
    assert 'deployment "web" successfully rolled out' in status.stdout


async def test_rollout_restart_surges_before_the_old_pod_terminates(
    sim: KubeSim, start: Start
) -> None:
    run = await start(web(1))
    await ready_web(run)
    [old] = await pods(run)
    began = run.recorder.mark("restart").at

    restarted = await asyncio.to_thread(kubectl, sim, "rollout", "restart", "deployment/web")
    assert restarted.returncode == 0, restarted.stderr
    status = await asyncio.to_thread(
        kubectl, sim, "rollout", "status", "deployment/web", "--timeout=60s"
    )
    assert status.returncode == 0, status.stderr
    assert 'deployment "web" successfully rolled out' in status.stdout

    def old_gone() -> bool:
        samples = [count for at, count in run.recorder.timeline("web").samples if at >= began]
        return samples[-2:] == [2, 1]

    async with asyncio.timeout(BOUND):
        await run.recorder.wait_until(old_gone)
    timeline = run.recorder.timeline("web")
    assert [count for at, count in timeline.samples if at >= began] == [2, 1]
    assert timeline.max_ready(began) == 2
    assert timeline.zero_ready_seconds(began) == 0
    assert len(timeline.rollouts(began)) == 1
    [new] = await pods(run)
    assert new["metadata"]["uid"] != old["metadata"]["uid"]


# --- drains without protection ------------------------------------------------------------


async def test_kubectl_drain_of_a_single_replica_deployment_causes_a_real_outage(
    sim: KubeSim, start: Start
) -> None:
    run = await start(web(1, grace=30))
    await ready_web(run)
    [before] = await pods(run)
    assert before["spec"]["nodeName"] == "node-a"

    run.recorder.mark_drain_started("node-a", "kubectl")
    drained = await asyncio.to_thread(
        kubectl, sim, "drain", "node-a", "--ignore-daemonsets", "--timeout=60s"
    )
    run.recorder.mark("drain-finished", node="node-a")
    assert drained.returncode == 0, drained.stderr
    assert drained.stdout.splitlines() == [
        "node/node-a cordoned",
        f"evicting pod default/{before['metadata']['name']}",
        f"pod/{before['metadata']['name']} evicted",
        "node/node-a drained",
    ]
    start_at, _ = run.recorder.drain_window("node-a")
    await back_after_outage(run, start_at)

    timeline = run.recorder.timeline("web")
    assert timeline.zero_ready_seconds(start_at) > 0
    assert timeline.max_ready(start_at) == 1  # nothing surged: eviction does not roll out
    assert timeline.rollouts(start_at) == []
    [after] = await pods(run)
    assert after["spec"]["nodeName"] == "node-b"


# --- drains against a minAvailable: 1 budget ----------------------------------------------


async def test_with_a_budget_the_kubectl_style_drain_retries_until_its_timeout(
    start: Start,
) -> None:
    run = await start(web(1), PDB_MIN_AVAILABLE_1)
    await ready_web(run)
    drain = KubectlDrain(run.client, timeout=1.0, retry_interval=0.05, poll_interval=0.05)
    result = await asyncio.wait_for(drain.drain("node-a"), BOUND)

    assert not result.drained
    assert result.error is not None and result.error.endswith("global timeout reached: 1s")
    [(pod, refusals)] = result.rejections.items()
    assert refusals >= 2
    assert f"(will retry after 50ms): {PDB_REFUSAL}" in result.texts("stderr")[0]
    assert result.remaining == (pod,)
    assert run.recorder.ready("web") == 1
    assert run.recorder.timeline("web").zero_ready_seconds(result.started) == 0


async def test_with_a_budget_the_cluster_autoscaler_style_drain_gives_up_at_its_limit(
    start: Start,
) -> None:
    run = await start(web(1), PDB_MIN_AVAILABLE_1)
    await ready_web(run)
    drain = ClusterAutoscalerDrain(run.client, max_pod_eviction_time=0.5, eviction_retry_time=0.05)
    result = await asyncio.wait_for(drain.drain("node-a"), BOUND)

    assert not result.drained
    [(pod, refusals)] = result.rejections.items()
    assert refusals >= 2
    assert result.error == (
        "Failed to drain node /node-a, due to following errors: [failed to evict pod "
        f"{pod} within allowed timeout (last error: {PDB_REFUSAL})]"
    )
    node = await run.client.get(resource_path("v1", "nodes", name="node-a"))
    assert "ToBeDeletedByClusterAutoscaler" not in str(node["spec"].get("taints"))
    assert run.recorder.ready("web") == 1


async def test_with_a_budget_the_karpenter_style_drain_deletes_at_its_grace_period(
    start: Start,
) -> None:
    run = await start(web(1, grace=0), PDB_MIN_AVAILABLE_1)
    await ready_web(run)
    [before] = await pods(run)
    drain = KarpenterDrain(
        run.client, termination_grace_period=1.0, requeue_interval=0.05, eviction_base_delay=0.01
    )
    run.recorder.mark_drain_started("node-a", "karpenter")
    result = await asyncio.wait_for(drain.drain("node-a"), BOUND)
    run.recorder.mark_drain_finished(result)

    assert result.drained
    key = f"{NS}/{before['metadata']['name']}"
    assert result.deleted == (key,)
    assert result.evicted == ()
    assert result.rejections[key] >= 1
    [deleting] = [line for line in result.log if line.text.startswith("deleting pod")]
    assert deleting.at - result.started >= 1.0  # never before the node's grace period is up
    start_at, _ = run.recorder.drain_window("node-a")
    await back_after_outage(run, start_at)
    assert run.recorder.timeline("web").zero_ready_seconds(start_at) > 0
    [after] = await pods(run)
    assert after["spec"]["nodeName"] == "node-b"


# --- the seed's scenario ------------------------------------------------------------------


async def test_the_eviction_dance_scenario_loads_and_drains_node_a(start: Start) -> None:
    scenario = load_scenario(REPO / "scenarios" / "eviction-dance.yaml", tuple(COMPONENTS))
    run = await start(scenario=scenario)
    async with asyncio.timeout(BOUND):
        await run.wait_ready()
    nodes = await run.client.get(resource_path("v1", "nodes"))
    assert sorted(n["metadata"]["name"] for n in nodes["items"]) == ["node-a", "node-b"]
    [pod] = await pods(run)
    assert pod["spec"]["nodeName"] == "node-a"

    [spec] = scenario.drains
    quick = DrainSpec(spec.node, spec.client, 0.0, {**spec.parameters, "poll_interval": 0.05})
    outcome = await asyncio.wait_for(run.run_drain(quick), BOUND)
    assert outcome.result.drained
    assert outcome.result.texts("stdout")[0] == "node/node-a cordoned"
    # No graceful-drain webhook here: the eviction goes straight through, and it shows.
    assert outcome.zero_ready_seconds("web") > 0
    assert outcome.max_ready("web") == 1
    assert outcome.rollouts("web") == []
    assert run.report_lines([outcome])[0].startswith("drain of node-a by kubectl: drained in ")
