"""The detector end to end on kubesim, under the workload's ServiceAccount and the
minimal RBAC from deploy/detector, enforced (docs/termination-detector.md)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from graceful_drain.termination.evidence import Trigger, UnavailableReason
from graceful_drain.termination.kubelet import PressuredResource
from graceful_drain.termination.recording import REASON as RECORDED_REASON
from graceful_drain.termination.verdict import Action, Cause, Fact, Source, Verdict
from kubesim.apiserver.faults import FaultRule
from kubesim.client import ApiStatusError, KubeClient, resource_path
from kubesim.cluster.nodestatus import NodeShape
from kubesim.sim import KubeSim
from tests.e2e.termination.scenario import (
    HOLD_SIGTERM_WINDOW,
    IGNORES_SIGTERM,
    MEMORY_EVICTION_MESSAGE,
    NODE,
    NS,
    Workload,
    admin_client,
    events_log,
    memory_eviction,
    named,
    oom_kill,
    pod_until,
    pods_log,
    preemption,
    real_nodes,
)
from tests.e2e.watching import condition

pytestmark = pytest.mark.e2e


@pytest.fixture
async def admin(sim: KubeSim) -> AsyncIterator[KubeClient]:
    async with admin_client(sim) as client:
        yield client


@pytest.fixture
async def workload(sim: KubeSim, admin: KubeClient, tmp_path: Path) -> Workload:
    return await Workload(sim, admin, tmp_path).setup()


def facts(verdict: Verdict) -> dict[Fact, dict[str, str]]:
    return {item.fact: dict(item.values) for item in verdict.evidence}


def decisive(verdict: Verdict) -> tuple[Source, Fact]:
    item = verdict.deciding_item
    return item.source, item.fact


# --- RBAC -----------------------------------------------------------------------------


async def test_the_workload_token_gets_exactly_the_minimal_rbac(
    sim: KubeSim, workload: Workload
) -> None:
    token = sim.service_account_token(NS, "web")
    client = KubeClient(sim.url, token, sim.ca_pem)
    try:
        pod = await workload.running_pod("web-0")
        assert (await client.get(resource_path("v1", "pods", NS, "web-0")))["metadata"]["uid"]
        await client.get(resource_path("v1", "events", NS))
        await client.get(f"/api/v1/nodes/{NODE}")
        for path in (
            resource_path("v1", "pods", NS),  # list pods: no
            resource_path("v1", "secrets", NS),
            "/api/v1/nodes",  # list nodes: no
            f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}",
        ):
            with pytest.raises(ApiStatusError) as denied:
                await client.get(path)
            assert denied.value.code == 403, path
    finally:
        await client.close()


# --- voluntary ------------------------------------------------------------------------


async def test_kubectl_drain_eviction_is_voluntary(
    sim: KubeSim, admin: KubeClient, workload: Workload
) -> None:
    pod = await workload.deployment_pod("web-6d4cf56db6-x7k2p")
    drain = await asyncio.create_subprocess_exec(
        "kubectl", "drain", NODE, "--ignore-daemonsets", "--timeout=60s",
        env={**os.environ, "KUBECONFIG": str(sim.kubeconfig_path)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        evicted = await pod_until(
            admin,
            lambda p: bool(p["metadata"].get("deletionTimestamp")),
            "kubectl drain evicts the pod",
        )
        verdict = await workload.detector(pod).detect()
        await workload.finish_deletion(pod["metadata"]["name"])
        output, _ = await asyncio.wait_for(drain.communicate(), 30)
    finally:
        if drain.returncode is None:
            drain.kill()
            await drain.wait()
    assert drain.returncode == 0, output.decode()
    assert f"pod/{pod['metadata']['name']} evicted" in output.decode()
    assert evicted["metadata"]["uid"] == pod["metadata"]["uid"]
    assert (verdict.cause, verdict.action) == (Cause.VOLUNTARY, Action.DRAIN_GRACEFULLY)
    assert decisive(verdict) == (Source.POD, Fact.DISRUPTION_TARGET)
    assert facts(verdict)[Fact.DISRUPTION_TARGET]["reason"] == "EvictionByEvictionAPI"
    assert Fact.NODE_NO_PRESSURE in facts(verdict)


async def test_a_delete_is_voluntary(workload: Workload, admin: KubeClient) -> None:
    pod = await workload.running_pod("web-0")
    await admin.delete(resource_path("v1", "pods", NS, "web-0"))
    verdict = await workload.detector(pod).detect()
    assert (verdict.cause, verdict.action) == (Cause.VOLUNTARY, Action.DRAIN_GRACEFULLY)
    assert decisive(verdict) == (Source.POD, Fact.DELETION_REQUESTED)
    assert facts(verdict)[Fact.DELETION_REQUESTED]["deletion_grace_period_seconds"] == "30"


# --- involuntary: kubesim's kubelet and scheduler ------------------------------------


@pytest.fixture
async def kubelet_workload(sim: KubeSim, admin: KubeClient, tmp_path: Path) -> Workload:
    return await Workload(sim, admin, tmp_path).setup(create_node=False)


async def test_node_pressure_eviction_at_sigterm_is_involuntary_with_the_resource(
    kubelet_workload: Workload,
) -> None:
    """At SIGTERM the kubelet has written its Evicted event but nothing on the pod: it
    sends the DisruptionTarget and the Failed phase only once the containers are gone
    (status_manager.go mergePodStatus)."""
    workload = kubelet_workload
    async with real_nodes(workload.admin, config=HOLD_SIGTERM_WINDOW) as nodes:
        events = await events_log(workload.admin)
        try:
            name = await memory_eviction(workload, nodes, IGNORES_SIGTERM)
            pod = await workload.sigterm_delivered(events, name)
            verdict = await workload.detector(pod).detect()
        finally:
            await events.stop()
    assert not pod["metadata"].get("deletionTimestamp")
    assert condition(pod, "DisruptionTarget") is None
    assert (verdict.cause, verdict.resource, verdict.action) == (
        Cause.INVOLUNTARY_EVICTION,
        PressuredResource.MEMORY,
        Action.SHED_LOAD_AND_EXIT_FAST,
    )
    assert decisive(verdict) == (Source.EVENTS, Fact.KUBELET_EVICTED_EVENT)
    evicted = facts(verdict)[Fact.KUBELET_EVICTED_EVENT]
    assert (evicted["message"], evicted["threshold"], evicted["available"]) == (
        MEMORY_EVICTION_MESSAGE,
        "100Mi",
        "87Mi",
    )
    assert Fact.KUBELET_INITIATED in facts(verdict)
    pressures = {dict(i.values)["name"] for i in verdict.evidence if i.fact is Fact.NODE_PRESSURE}
    assert "MemoryPressure" in pressures  # the taint may follow; the condition is there


async def test_node_pressure_eviction_read_afterwards_is_decided_by_the_pod(
    kubelet_workload: Workload,
) -> None:
    workload = kubelet_workload
    async with real_nodes(workload.admin) as nodes:
        pods = await pods_log(workload.admin)
        try:
            name = await memory_eviction(workload, nodes, {})
            pod = await pods.until_obj(
                named(name, lambda p: condition(p, "DisruptionTarget") is not None), within=30
            )
        finally:
            await pods.stop()
        verdict = await workload.detector(pod).detect()
    assert (pod["status"]["phase"], pod["status"]["reason"]) == ("Failed", "Evicted")
    assert (verdict.cause, verdict.resource) == (
        Cause.INVOLUNTARY_EVICTION,
        PressuredResource.MEMORY,
    )
    # v4, the seed's order: the Evicted event decides, the pod's record stands beside it.
    assert decisive(verdict) == (Source.EVENTS, Fact.KUBELET_EVICTED_EVENT)
    assert facts(verdict)[Fact.DISRUPTION_TARGET]["reason"] == "TerminationByKubelet"


async def test_preemption_is_preempted(kubelet_workload: Workload) -> None:
    workload = kubelet_workload
    async with real_nodes(workload.admin, NodeShape(cpu="1"), HOLD_SIGTERM_WINDOW):
        events = await events_log(workload.admin)
        try:
            name = await preemption(workload)
            pod = await workload.sigterm_delivered(events, name)
            verdict = await workload.detector(pod).detect()
        finally:
            await events.stop()
    assert pod["metadata"].get("deletionTimestamp")
    assert (verdict.cause, verdict.action) == (Cause.PREEMPTED, Action.SHED_LOAD_AND_EXIT_FAST)
    assert decisive(verdict) == (Source.POD, Fact.DISRUPTION_TARGET)
    target = facts(verdict)[Fact.DISRUPTION_TARGET]
    assert target["reason"] == "PreemptionByScheduler"
    assert target["message"] == (
        "default-scheduler: preempting to accommodate a higher priority pod"
    )


async def test_a_preempted_pod_evicted_again_through_the_api_stays_preempted(
    kubelet_workload: Workload,
) -> None:
    """v2: the Eviction API replaces the scheduler's DisruptionTarget with
    EvictionByEvictionAPI (a drain reaching the pod while it terminates); before v2 that read
    as a drain although the scheduler's Preempted event for this UID had been read."""
    workload = kubelet_workload
    async with real_nodes(workload.admin, NodeShape(cpu="1"), HOLD_SIGTERM_WINDOW):
        events = await events_log(workload.admin)
        try:
            name = await preemption(workload)
            await workload.sigterm_delivered(events, name)
            await workload.admin.create(
                resource_path("v1", "pods", NS, name, "eviction"),
                {"apiVersion": "policy/v1", "kind": "Eviction",
                 "metadata": {"name": name, "namespace": NS}},
            )  # fmt: skip
            pod = await pod_until(
                workload.admin,
                lambda p: (
                    p["metadata"]["name"] == name
                    and (condition(p, "DisruptionTarget") or {}).get("reason")
                    == "EvictionByEvictionAPI"
                ),
                "the eviction replaced the DisruptionTarget condition",
            )
            verdict = await workload.detector(pod).detect()
        finally:
            await events.stop()
    assert (verdict.cause, verdict.action) == (Cause.PREEMPTED, Action.SHED_LOAD_AND_EXIT_FAST)
    assert decisive(verdict) == (Source.EVENTS, Fact.PREEMPTION_EVENT)
    assert facts(verdict)[Fact.PREEMPTION_EVENT]["reason"] == "Preempted"
    assert facts(verdict)[Fact.PREEMPTION_OVERRIDE] == {"overridden": "disruption_target"}
    assert facts(verdict)[Fact.DISRUPTION_TARGET]["reason"] == "EvictionByEvictionAPI"


# --- fallbacks ------------------------------------------------------------------------


async def test_without_the_node_cluster_role_a_delete_sheds(
    sim: KubeSim, admin: KubeClient, tmp_path: Path
) -> None:
    """v4: the node read forbidden leaves pressure unexcluded, so no drain verdict."""
    workload = await Workload(sim, admin, tmp_path).setup(node_rbac=False)
    pod = await workload.running_pod("web-0")
    await admin.delete(resource_path("v1", "pods", NS, "web-0"))
    verdict = await workload.detector(pod).detect()
    assert (verdict.cause, verdict.action) == (Cause.INDETERMINATE, Action.SHED_LOAD_AND_EXIT_FAST)
    assert decisive(verdict) == (Source.CLASSIFIER, Fact.CANNOT_DETERMINE)
    assert facts(verdict)[Fact.NODE_UNAVAILABLE]["reason"] == UnavailableReason.FORBIDDEN


async def test_a_hanging_pod_read_falls_back_within_the_deadline(
    sim: KubeSim, workload: Workload
) -> None:
    pod = await workload.running_pod("web-0")
    sim.faults.add(FaultRule(resource="pods", hang=True))
    verdict = await workload.detector(pod, deadline_seconds=0.5).detect()
    assert (verdict.cause, verdict.action) == (
        Cause.INDETERMINATE,
        Action.SHED_LOAD_AND_EXIT_FAST,
    )
    assert facts(verdict)[Fact.POD_UNAVAILABLE]["reason"] == UnavailableReason.TIMEOUT
    assert facts(verdict)[Fact.OWNER_UNAVAILABLE]["reason"] == UnavailableReason.TIMEOUT
    assert Fact.NO_EVICTED_EVENT in facts(verdict)  # events still answered in time


async def test_an_unreachable_api_server_falls_back(
    sim: KubeSim, workload: Workload, tmp_path: Path
) -> None:
    pod = await workload.running_pod("web-0")
    await sim.stop()
    verdict = await workload.detector(pod).detect()
    assert (verdict.cause, verdict.action) == (
        Cause.INDETERMINATE,
        Action.SHED_LOAD_AND_EXIT_FAST,
    )
    assert decisive(verdict) == (Source.CLASSIFIER, Fact.CONSERVATIVE_FALLBACK)
    assert facts(verdict)[Fact.POD_UNAVAILABLE]["reason"] == UnavailableReason.ERROR
    assert "cannot reach the API server" in facts(verdict)[Fact.POD_UNAVAILABLE]["error"]


# --- after the fact ---------------------------------------------------------------------


async def test_an_oom_kill_is_reported_after_the_restart(kubelet_workload: Workload) -> None:
    workload = kubelet_workload
    async with real_nodes(workload.admin):
        pod = await oom_kill(workload)
        verdict = await workload.detector(pod).detect(Trigger.AFTER_RESTART)
    assert (verdict.cause, verdict.action) == (Cause.OOM_KILLED, Action.REPORT_ONLY)
    oom = facts(verdict)[Fact.CONTAINER_OOM_KILLED]
    assert (oom["container"], oom["exit_code"]) == ("web", "137")


# --- recording ------------------------------------------------------------------------


async def test_the_verdict_is_recorded_as_an_event_on_the_pod(
    workload: Workload, admin: KubeClient
) -> None:
    pod = await workload.running_pod("web-0")
    await admin.delete(resource_path("v1", "pods", NS, "web-0"))
    detector = workload.detector(pod)
    verdict = await detector.detect()
    assert await detector.record(verdict) is None
    listed = await admin.get(
        resource_path("v1", "events", NS),
        {"fieldSelector": f"involvedObject.uid={pod['metadata']['uid']}"},
    )
    [event] = [e for e in listed["items"] if e["reason"] == RECORDED_REASON]
    assert event["message"] == verdict.summary()
    assert event["type"] == "Normal"
    assert event["source"] == {"component": "graceful-drain", "host": NODE}
