"""Node-pressure eviction through the API, field by field, as pkg/kubelet/eviction does it.

The store's resourceVersion is one global counter, so "the event was written
before the pod failed" is checked by comparing resourceVersions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kubesim.client import KubeClient
from kubesim.cluster.behaviour import MEMORY_USAGE
from kubesim.cluster.nodestatus import NodeShape

from .conftest import EVENTS, NODES, PODS, Cluster, Watch

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
MESSAGE = (
    "The node was low on resource: memory. Threshold quantity: 100Mi, available: 87Mi. "
    "Container app was using 300Mi, request is 100Mi, has larger consumption of memory. "
)


def make_pod(name: str, usage: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": {MEMORY_USAGE: usage}},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "nginx:1.25",
                    "resources": {"requests": {"memory": "100Mi"}},
                }
            ],
            **spec,
        },
    }


def conditions(obj: Obj) -> dict[str, Obj]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def running(pod: Obj) -> bool:
    statuses = pod["status"].get("containerStatuses") or [{}]
    return "running" in (statuses[0].get("state") or {})


def rv(obj: Obj) -> int:
    return int(obj["metadata"]["resourceVersion"])


def named(name: str, check: Callable[[Obj], bool] = lambda _: True) -> Callable[[str, Obj], bool]:
    return lambda t, o: t != "DELETED" and o["metadata"]["name"] == name and check(o)


def reason_is(reason: str) -> Callable[[str, Obj], bool]:
    return lambda t, e: e.get("reason") == reason


async def test_memory_pressure_eviction(kube: KubeClient, cluster: Cluster, watch: Watch) -> None:
    nodes = await cluster({"n1": NodeShape(memory="4Gi")})
    pods, events, node_log = await watch(PODS), await watch(EVENTS), await watch(NODES)
    await kube.create(PODS, make_pod("hog", "300Mi"))
    await kube.create(PODS, make_pod("calm", "50Mi"))
    for name in ("hog", "calm"):
        await pods.until(
            named(name, lambda p: conditions(p).get("Ready", {}).get("status") == "True")
        )

    await nodes["n1"].set_pressure("memory", available="87Mi", threshold="100Mi")

    # the node: condition from the kubelet, taint from the node lifecycle controller
    pressured = await node_log.until_obj(
        named("n1", lambda n: conditions(n)["MemoryPressure"]["status"] == "True")
    )
    memory = conditions(pressured)["MemoryPressure"]
    assert (memory["reason"], memory["message"]) == (
        "KubeletHasInsufficientMemory",
        "kubelet has insufficient memory available",
    )
    assert memory["lastTransitionTime"] and memory["lastHeartbeatTime"]
    tainted = await node_log.until_obj(named("n1", lambda n: bool(n["spec"].get("taints"))))
    (taint,) = tainted["spec"]["taints"]
    assert {k: taint[k] for k in ("key", "effect")} == {
        "key": "node.kubernetes.io/memory-pressure",
        "effect": "NoSchedule",
    }
    assert taint["timeAdded"]
    status_event = await events.until_obj(reason_is("NodeHasInsufficientMemory"))
    assert (status_event["type"], status_event["message"]) == (
        "Normal",
        "Node n1 status is now: NodeHasInsufficientMemory",
    )
    assert status_event["involvedObject"] == {"kind": "Node", "name": "n1", "uid": "n1"}
    threshold_event = await events.until_obj(reason_is("EvictionThresholdMet"))
    assert (threshold_event["type"], threshold_event["message"]) == (
        "Warning",
        "Attempting to reclaim memory",
    )

    # the victim: the pod over its request
    evicted_at = await pods.until(named("hog", lambda p: p["status"].get("phase") == "Failed"))
    hog = pods.events[evicted_at][1]
    evicted = await events.until_obj(reason_is("Evicted"))
    assert evicted["type"] == "Warning"
    assert evicted["message"] == MESSAGE
    assert evicted["source"] == {"component": "kubelet", "host": "n1"}
    assert (evicted["reportingComponent"], evicted["reportingInstance"]) == ("kubelet", "n1")
    assert evicted["count"] == 1
    ref = evicted["involvedObject"]
    assert {k: ref[k] for k in ("kind", "namespace", "name", "uid", "apiVersion")} == {
        "kind": "Pod",
        "namespace": "default",
        "name": "hog",
        "uid": hog["metadata"]["uid"],
        "apiVersion": "v1",
    }
    assert evicted["metadata"]["annotations"] == {
        "offending_containers": "app",
        "offending_containers_usage": "300Mi",
        "starved_resource": "memory",
    }
    assert rv(evicted) < rv(hog)  # the event comes before the kill
    killing = await events.until_obj(
        lambda t, e: e.get("reason") == "Killing" and e["involvedObject"]["name"] == "hog"
    )
    assert rv(evicted) < rv(killing)

    status = hog["status"]
    assert (status["phase"], status["reason"], status["message"]) == ("Failed", "Evicted", MESSAGE)
    target = status["conditions"][0]
    assert {k: target[k] for k in ("type", "status", "reason", "message")} == {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "TerminationByKubelet",
        "message": MESSAGE,
    }
    assert target["lastTransitionTime"] and target["lastProbeTime"] is None
    by_type = conditions(hog)
    assert by_type["Ready"]["status"] == by_type["ContainersReady"]["status"] == "False"
    assert by_type["Ready"]["reason"] == by_type["ContainersReady"]["reason"] == "PodFailed"
    assert by_type["PodReadyToStartContainers"]["status"] == "False"
    assert "terminated" in status["containerStatuses"][0]["state"]
    assert "deletionTimestamp" not in hog["metadata"]

    # DisruptionTarget only once the containers are dead: never next to a running container
    for _, _, seen in pods.of("hog"):
        if "DisruptionTarget" in conditions(seen):
            assert not running(seen) and seen["status"]["phase"] == "Failed"

    # not deleted; the other pod untouched
    kept = await kube.get(f"{PODS}/hog")
    assert kept["status"]["phase"] == "Failed" and "deletionTimestamp" not in kept["metadata"]
    calm = await kube.get(f"{PODS}/calm")
    assert calm["status"]["phase"] == "Running" and "DisruptionTarget" not in conditions(calm)
    assert sum(1 for _, e in events.events if e.get("reason") == "Evicted") == 1

    # clearing the pressure clears the condition and the taint
    await nodes["n1"].clear_pressure("memory")
    relieved = await node_log.until_obj(
        named(
            "n1",
            lambda n: (
                conditions(n)["MemoryPressure"]["status"] == "False" and not n["spec"].get("taints")
            ),
        )
    )
    assert conditions(relieved)["MemoryPressure"]["reason"] == "KubeletHasSufficientMemory"
    await events.until(reason_is("NodeHasSufficientMemory"))


async def test_pods_arriving_under_disk_pressure_are_rejected(
    kube: KubeClient, cluster: Cluster, watch: Watch
) -> None:
    nodes = await cluster({"n1": NodeShape()}, scheduler=False)
    pods, events = await watch(PODS), await watch(EVENTS)
    await nodes["n1"].set_pressure("disk", available="1Gi", threshold="10Gi")
    await kube.create(PODS, make_pod("late", "1Mi", nodeName="n1"))
    rejected = await pods.until_obj(named("late", lambda p: p["status"].get("phase") == "Failed"))
    assert rejected["status"]["reason"] == "Evicted"
    assert rejected["status"]["message"] == (
        "Pod was rejected: The node had condition: [DiskPressure]. "
    )
    event = await events.until_obj(
        lambda t, e: e.get("reason") == "Evicted" and e["involvedObject"]["name"] == "late"
    )
    assert (event["type"], event["message"]) == (
        "Warning",
        "The node had condition: [DiskPressure]. ",
    )
