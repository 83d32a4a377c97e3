"""The three drain clients against kubesim's API, with upstream timings scaled down.

No scheduler or kubelet here: pods are created bound and Ready, and
`Finisher` plays the kubelet's final grace-period-0 DELETE of terminating
pods. PodDisruptionBudget status comes from the real disruption controller,
so 429s are the eviction subresource's own. The kubectl-style client is also
held against the real `kubectl drain` on the same setups.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator

import pytest

from kubesim.client import KubeClient, resource_path
from kubesim.cluster.cluster import Cluster
from kubesim.drain import ClusterAutoscalerDrain, KarpenterDrain, KubectlDrain
from kubesim.sim import KubeSim
from tests.e2e.kubesim.drainkit import (
    NS,
    Finisher,
    daemonset,
    events,
    node,
    pdb_computed,
    pdb_min_available,
    pod,
    replicaset,
    start_pod,
)

pytestmark = pytest.mark.e2e

PDB_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."
BOUND = 30.0  # only a guard against hangs; nothing is asserted on time


@pytest.fixture
async def client(sim: KubeSim) -> AsyncIterator[KubeClient]:
    c = KubeClient(sim.url, sim.admin_token, sim.ca_pem, user_agent="drain-test")
    yield c
    await c.close()


@pytest.fixture
async def blocked(sim: KubeSim, client: KubeClient) -> AsyncIterator[None]:
    """node-a runs web-1, the only pod a minAvailable: 1 budget allows: no eviction can pass."""
    sim.create(node("node-a"))
    await start_pod(client, pod("web-1", "node-a", sim.create(replicaset()), grace=0))
    sim.create(pdb_min_available(1))
    async with Cluster(sim, {"disruption"}):
        await pdb_computed(client)
        yield


def kubectl(sim: KubeSim, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(sim.kubeconfig_path)}
    return subprocess.run(["kubectl", *args], capture_output=True, text=True, env=env, timeout=60)


async def node_obj(client: KubeClient, name: str = "node-a") -> dict[str, object]:
    return await client.get(resource_path("v1", "nodes", name=name))


# --- kubectl ------------------------------------------------------------------------------


async def test_kubectl_style_prints_what_kubectl_drain_prints(
    sim: KubeSim, client: KubeClient
) -> None:
    """Same setup on two nodes: a ReplicaSet pod, a DaemonSet pod and a mirror pod each."""
    agent, web = sim.create(daemonset("agent")), sim.create(replicaset())
    for name in ("node-a", "node-b"):
        machine = sim.create(node(name))
        await start_pod(client, pod(f"web-{name}", name, web))
        await start_pod(client, pod(f"agent-{name}", name, agent))
        mirror = {"kubernetes.io/config.mirror": "x"}
        await start_pod(client, pod(f"static-{name}", name, machine, annotations=mirror))
    async with Finisher(client).running():
        ours = await KubectlDrain(client, ignore_daemonsets=True, poll_interval=0.02).drain(
            "node-a"
        )
        real = await asyncio.to_thread(kubectl, sim, "drain", "node-b", "--ignore-daemonsets")

    assert real.returncode == 0, real.stderr
    assert ours.drained and ours.error is None
    assert ours.texts("stdout") == [
        line.replace("node-b", "node-a") for line in real.stdout.splitlines()
    ]
    assert ours.texts("stderr") == [
        line.replace("node-b", "node-a") for line in real.stderr.splitlines()
    ]
    assert ours.texts("stdout") == [
        "node/node-a cordoned",
        "evicting pod default/web-node-a",
        "pod/web-node-a evicted",
        "node/node-a drained",
    ]
    assert ours.texts("stderr") == [
        "Warning: ignoring DaemonSet-managed Pods: default/agent-node-a"
    ]
    assert ours.evicted == ("default/web-node-a",)
    assert (await node_obj(client))["spec"] == {"unschedulable": True}
    left = await client.get(
        resource_path("v1", "pods", NS), {"fieldSelector": "spec.nodeName=node-a"}
    )
    assert sorted(p["metadata"]["name"] for p in left["items"]) == [
        "agent-node-a",
        "static-node-a",
    ]


async def test_kubectl_style_refuses_a_bare_pod_without_force_as_kubectl_does(
    sim: KubeSim, client: KubeClient
) -> None:
    for name in ("node-a", "node-b"):
        sim.create(node(name))
        await start_pod(client, pod(f"bare-{name}", name, None))
    ours = await KubectlDrain(client).drain("node-a")
    real = await asyncio.to_thread(kubectl, sim, "drain", "node-b")

    assert real.returncode == 1
    assert ours.texts("stderr") == [
        line.replace("node-b", "node-a") for line in real.stderr.splitlines()
    ]
    assert not ours.drained
    assert ours.error == (
        "cannot delete cannot delete Pods that declare no controller (use --force to override): "
        "default/bare-node-a"
    )
    assert ours.remaining == ()
    assert ours.attempts == {}
    forced = KubectlDrain(client, force=True, timeout=BOUND, poll_interval=0.02)
    async with Finisher(client).running():
        result = await forced.drain("node-a")
    assert result.drained
    assert result.texts("stderr") == [
        "Warning: deleting Pods that declare no controller: default/bare-node-a"
    ]


async def test_kubectl_style_retries_a_429_every_interval_until_its_timeout(
    blocked: None, client: KubeClient
) -> None:
    drain = KubectlDrain(client, timeout=0.5, retry_interval=0.02, poll_interval=0.02)
    result = await asyncio.wait_for(drain.drain("node-a"), BOUND)

    assert not result.drained
    timeout_error = 'error when evicting pods/"web-1" -n "default": global timeout reached: 500ms'
    assert result.error == timeout_error
    assert result.rejections["default/web-1"] >= 2
    assert result.attempts["default/web-1"] == result.rejections["default/web-1"]
    retry = f'error when evicting pods/"web-1" -n "default" (will retry after 20ms): {PDB_REFUSAL}'
    errs = result.texts("stderr")
    assert (
        errs[: result.rejections["default/web-1"]] == [retry] * result.rejections["default/web-1"]
    )
    assert errs[result.rejections["default/web-1"] :] == [
        f'There are pending pods in node "node-a" when an error occurred: {timeout_error}',
        "pod/web-1",
        f'error: unable to drain node "node-a" due to error: {timeout_error}, '
        "continuing command...",
        "There are pending nodes to be drained:",
        " node-a",
        timeout_error,
    ]
    outs = result.texts("stdout")
    assert outs[0] == "node/node-a cordoned"
    assert outs[1:] == ["evicting pod default/web-1"] * (result.attempts["default/web-1"] + 1)
    assert result.remaining == ("default/web-1",)
    web = await client.get(resource_path("v1", "pods", NS, "web-1"))
    assert "deletionTimestamp" not in web["metadata"]


async def test_kubectl_style_waits_on_the_uid_not_the_name(
    sim: KubeSim, client: KubeClient
) -> None:
    sim.create(node("node-a"))
    first = await start_pod(client, pod("web-1", "node-a", sim.create(replicaset())))
    async with Finisher(client, replace=True).running():
        result = await asyncio.wait_for(
            KubectlDrain(client, poll_interval=0.02).drain("node-a"), BOUND
        )
    assert result.drained
    again = await client.get(resource_path("v1", "pods", NS, "web-1"))
    assert again["metadata"]["uid"] != first["metadata"]["uid"]


# --- Karpenter ----------------------------------------------------------------------------


async def test_karpenter_style_taints_labels_and_evicts(sim: KubeSim, client: KubeClient) -> None:
    sim.create(node("node-a"))
    await start_pod(client, pod("web-1", "node-a", sim.create(replicaset())))
    drain = KarpenterDrain(client, requeue_interval=0.02, eviction_base_delay=0.01)
    async with Finisher(client).running():
        result = await asyncio.wait_for(drain.drain("node-a"), BOUND)

    assert result.drained
    assert result.evicted == ("default/web-1",)
    assert result.deleted == ()
    spec = (await node_obj(client))["spec"]
    assert spec == {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}
    labels = (await node_obj(client))["metadata"]["labels"]  # type: ignore[index]
    assert labels["node.kubernetes.io/exclude-from-external-load-balancers"] == "karpenter"
    [evicted] = await events(client, "Evicted")
    assert evicted["message"] == "Evicted pod"
    assert evicted["involvedObject"]["name"] == "web-1"
    assert evicted["source"] == {"component": "karpenter"}


async def test_karpenter_style_deletes_at_its_termination_grace_period(
    blocked: None, sim: KubeSim, client: KubeClient
) -> None:
    drain = KarpenterDrain(
        client, termination_grace_period=0.5, requeue_interval=0.02, eviction_base_delay=0.01
    )
    sim.audit.clear()
    async with Finisher(client).running():
        result = await asyncio.wait_for(drain.drain("node-a"), BOUND)

    assert result.drained
    assert result.deleted == ("default/web-1",)
    assert result.evicted == ()
    assert result.rejections["default/web-1"] >= 1
    writes = [(r.verb, r.subresource, r.code) for r in sim.audit.records() if r.name == "web-1"]
    assert ("create", "eviction", 429) in writes
    assert ("create", "eviction", 201) not in writes
    assert ("delete", "", 200) in writes  # the DELETE that bypasses the budget
    [disrupted] = await events(client, "Disrupted")
    assert disrupted["type"] == "Normal"
    assert "The pod was granted 0 seconds of grace-period of its 0" in disrupted["message"]
    assert "This bypasses the PDB of the pod" in disrupted["message"]
    pdb_refusals = [
        e for e in await events(client, "FailedDraining")
        if e["message"] == "Failed to drain node, evicting pod default/web-1 violates a PDB"
    ]  # fmt: skip
    # Refused on every try, published once: Karpenter's recorder dedupes by the pod's name.
    [refusal] = pdb_refusals
    assert refusal["type"] == "Warning"
    assert refusal["count"] == 1
    [expiring] = await events(client, "TerminationGracePeriodExpiring")
    assert expiring["message"].startswith("All pods will be deleted by ")


# --- Cluster Autoscaler -------------------------------------------------------------------


async def test_cluster_autoscaler_style_gives_up_at_max_pod_eviction_time(
    blocked: None, client: KubeClient
) -> None:
    drain = ClusterAutoscalerDrain(
        client, max_pod_eviction_time=0.3, eviction_retry_time=0.02, unix_time=lambda: 1.7e9
    )
    result = await asyncio.wait_for(drain.drain("node-a"), BOUND)

    assert not result.drained
    assert result.error == (
        "Failed to drain node /node-a, due to following errors: [failed to evict pod "
        f"default/web-1 within allowed timeout (last error: {PDB_REFUSAL})]"
    )
    assert result.rejections["default/web-1"] >= 2
    assert result.remaining == ("default/web-1",)
    assert (await node_obj(client))["spec"] == {}  # the taint is taken back
    by_reason = {(e["reason"], e["involvedObject"]["kind"]): e for e in await events(client)}
    assert (
        by_reason["ScaleDown", "Node"]["message"] == "marked the node as toBeDeleted/unschedulable"
    )
    assert by_reason["ScaleDown", "Pod"]["message"] == "deleting pod for node scale down"
    assert by_reason["ScaleDownFailed", "Pod"]["message"] == "failed to delete pod for ScaleDown"
    assert by_reason["ScaleDownFailed", "Node"]["message"] == (
        f"failed to drain the node: {result.error}"
    )


async def test_cluster_autoscaler_style_taints_and_evicts_with_capped_grace(
    sim: KubeSim, client: KubeClient
) -> None:
    sim.create(node("node-a"))
    web = sim.create(replicaset())
    await start_pod(client, pod("web-1", "node-a", web, grace=45))
    await start_pod(client, pod("web-2", "node-a", web, grace=900))
    drain = ClusterAutoscalerDrain(
        client, max_graceful_termination_sec=600, wait_poll_interval=0.02, unix_time=lambda: 1.7e9
    )
    finisher = Finisher(client)
    async with finisher.running():
        result = await asyncio.wait_for(drain.drain("node-a"), BOUND)

    assert result.drained, result.error
    assert sorted(result.evicted) == ["default/web-1", "default/web-2"]
    assert finisher.grace_seen == {"web-1": 45, "web-2": 600}
    assert (await node_obj(client))["spec"] == {
        "taints": [
            {"key": "ToBeDeletedByClusterAutoscaler", "value": "1700000000", "effect": "NoSchedule"}
        ]
    }
