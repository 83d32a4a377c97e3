"""Real `kubectl drain` on the real control plane, with and without graceful-drain.

kube-apiserver, the Deployment and ReplicaSet controllers, the scheduler and the disruption
controller are the upstream ones (realcluster/); the nodes are kwok's. The availability
sampler is a watch on pods, ReplicaSets and Deployments (kubesim's AvailabilityRecorder,
a plain API client here).
"""

from __future__ import annotations

import asyncio
import json

import pytest

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.controller.writes.events import DRAIN_COMPLETED, DRAIN_STARTED, DRAIN_TIMEOUT
from kubesim.client import ApiStatusError
from kubesim.recorder import AvailabilityRecorder
from realcluster.cluster import RealCluster
from tests.compatibility import KUBECTL_ON_REAL_CONTROL_PLANE
from tests.e2e.watching import annotations_of, is_ready

from .harness import (
    BOUND,
    HELD,
    Installation,
    Launcher,
    admin_client,
    create_ready_web,
    drain,
    events,
    kubectl,
    kubectl_json,
    pinned_kubectl,
    pods,
    settle,
    until,
    until_audited,
    until_events,
)

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]


async def assert_drain_is_protected(
    installation: Installation, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder, binary: str = "kubectl", launcher: Launcher | None = None,
) -> None:  # fmt: skip
    """`kubectl drain` of node-a under one controller replica (started by `launcher`): the
    eviction answered 429 and retried, exactly one new ReplicaSet, never a second without a
    Ready pod, the replacement Ready on node-b, and the controller's events."""
    await create_ready_web(real_cluster, recorder, namespace)
    [old] = await pods(real_cluster, namespace)
    assert old["spec"]["nodeName"] == "node-a"
    replica = await installation.start_controller(launcher=launcher)
    try:
        drained = await drain(real_cluster, recorder, "node-a", binary)
        window = await settle(recorder, namespace, "node-a")
        # The reconciler reports completion once it sees the finished rollout, which may be
        # after kubectl has returned: waited for while the controller still runs.
        completed = await until_events(real_cluster, namespace, DRAIN_COMPLETED)
    finally:
        replica.stop()

    assert drained.code == 0, drained.stderr
    assert drained.lines[-1] == "node/node-a drained"
    assert HELD in drained.stderr
    assert f"graceful-drain: waiting for a replacement of Deployment {namespace}/web" in (
        drained.stderr
    )
    await until_audited(real_cluster, lambda r: (
        (r.get("objectRef") or {}).get("namespace") == namespace
        and (r.get("objectRef") or {}).get("subresource") == "eviction"
        and (r.get("responseStatus") or {}).get("code") == 429
    ))  # fmt: skip
    timeline = recorder.timeline("web", namespace)
    assert timeline.zero_ready_seconds(*window) == 0
    assert len(timeline.rollouts(*window)) == 1  # exactly one new ReplicaSet
    [new] = await pods(real_cluster, namespace)
    assert new["spec"]["nodeName"] == "node-b"
    assert is_ready(new)
    [started] = await events(real_cluster, namespace, DRAIN_STARTED)
    assert old["metadata"]["name"] in started["message"]
    assert completed[0]["involvedObject"]["name"] == "web"


@pytest.mark.parametrize("release", ["dispatcher", *KUBECTL_ON_REAL_CONTROL_PLANE])
async def test_kubectl_drain_keeps_a_ready_pod_with_graceful_drain(
    installation: Installation, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder, release: str,
) -> None:  # fmt: skip
    binary = "kubectl" if release == "dispatcher" else pinned_kubectl(release)
    await assert_drain_is_protected(installation, real_cluster, namespace, recorder, binary)


async def test_the_same_drain_without_the_controller_has_an_outage(
    installation: Installation, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder,
) -> None:  # fmt: skip
    await create_ready_web(real_cluster, recorder, namespace)

    drained = await drain(real_cluster, recorder, "node-a")  # the webhook has no replica
    window = await settle(recorder, namespace, "node-a")

    assert drained.code == 0, drained.stderr
    assert HELD not in drained.stderr
    timeline = recorder.timeline("web", namespace)
    assert timeline.zero_ready_seconds(*window) > 0
    assert timeline.rollouts(*window) == []
    deployment = await kubectl_json(real_cluster.kubeconfig_path, "get", "deployment", "web",
                                    "-n", namespace)  # fmt: skip
    assert RESTARTED_AT_ANNOTATION not in annotations_of(deployment)


async def test_fifty_concurrent_evictions_through_two_replicas_start_one_rollout(
    installation: Installation, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder,
) -> None:  # fmt: skip
    await create_ready_web(real_cluster, recorder, namespace, ready_delay="10s")
    [pod] = await pods(real_cluster, namespace)
    name = pod["metadata"]["name"]
    replicas = [
        await installation.start_controller("graceful-drain-0"),
        await installation.start_controller("graceful-drain-1"),
    ]
    client = admin_client(real_cluster, "eviction-storm")
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace}}  # fmt: skip
    path = f"/api/v1/namespaces/{namespace}/pods/{name}/eviction"

    async def evict() -> int:
        try:
            await client.request("POST", path, eviction)
        except ApiStatusError as error:
            return error.code
        return 201

    try:
        async with asyncio.timeout(BOUND):
            codes = await asyncio.gather(*(evict() for _ in range(50)))
        await until(recorder, lambda: len(recorder.timeline("web", namespace).rollouts()) >= 2)
        refused = sum(r.decisions(allowed=False) for r in replicas)
        started = sum(r.metric("graceful_drain_rollouts_started_total") for r in replicas)
    finally:
        for replica in replicas:
            replica.stop()
        await client.close()

    # A refusal is a 429; once the surge pod is Ready an eviction may go through (201), and
    # then the pod is gone (404). Nothing else.
    assert set(codes) <= {429, 201, 404}, codes
    assert codes.count(429) == refused > 0
    assert started == 1
    assert len(recorder.timeline("web", namespace).rollouts()) == 2  # the first and one more


async def test_a_never_ready_replacement_is_held_until_the_timeout_and_a_restart_costs_nothing(
    installation: Installation, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder,
) -> None:  # fmt: skip
    """A release whose pods never pass readiness is stuck mid-rollout (the old pod still
    serves) when the node is drained: evictions are held until rolloutTimeout, then allowed
    with a GracefulDrainTimeout event. The controller is killed (SIGKILL) mid-drain and
    another replica takes over: the stamp on the Deployment carries on, no second rollout."""
    await create_ready_web(real_cluster, recorder, namespace)
    broken = {"spec": {"template": {"metadata": {"annotations": {
        "sim.kubesim.io/never-ready": "true"}}}}}  # fmt: skip
    await kubectl(real_cluster.kubeconfig_path, "patch", "deployment", "web", "-n", namespace,
                  "--type=strategic", "-p", json.dumps(broken))  # fmt: skip
    await until(recorder, lambda: len(recorder.timeline("web", namespace).rollouts()) == 2)
    env = {"GRACEFUL_DRAIN_ROLLOUT_TIMEOUT": "20s"}
    replica = await installation.start_controller(env=env)
    try:
        draining = asyncio.create_task(drain(real_cluster, recorder, "node-a"))
        # graceful-drain's own rollout (the third ReplicaSet), and kubectl answered 429: a
        # controller killed before its answer reached the API server fails open, as any
        # webhook does (failurePolicy: Ignore), which is not what this test is about.
        await until(recorder, lambda: len(recorder.timeline("web", namespace).rollouts()) == 3)
        await until_audited(real_cluster, lambda r: (
            (r.get("objectRef") or {}).get("namespace") == namespace
            and (r.get("objectRef") or {}).get("subresource") == "eviction"
            and (r.get("responseStatus") or {}).get("code") == 429
        ))  # fmt: skip
        # The successor is routed before the kill: with no replica routed at all, kubectl's
        # next retry would fail open (as above), and under load a replica's start (about
        # as long as kubectl's 5 s between retries) made that the drain's end.
        successor = await installation.start_controller("graceful-drain-1", env=env)
        replica.kill()
        replica = successor
        drained = await draining
        # The timeout is the leader's to report: the successor's, once the killed replica's
        # Lease has expired, which under load came after the drain had ended (the webhook
        # allows at rolloutTimeout without leading). It runs until then.
        [timeout] = await until_events(real_cluster, namespace, DRAIN_TIMEOUT)
    finally:
        replica.stop()

    assert drained.code == 0, drained.stderr
    assert HELD in drained.stderr, drained.stderr
    assert timeout["involvedObject"]["name"] == "web"
    assert len(recorder.timeline("web", namespace).rollouts()) == 3  # no second restart
    deployment = await kubectl_json(real_cluster.kubeconfig_path, "get", "deployment", "web",
                                    "-n", namespace)  # fmt: skip
    assert RESTARTED_AT_ANNOTATION in annotations_of(deployment)  # kept until it completes
