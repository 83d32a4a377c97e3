"""The scheduler through the API: binding, filters, Unschedulable reporting, preemption.

Messages are checked word for word against pkg/scheduler (FitError.Error(),
the plugins' reasons, default_preemption and the preemption executor).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from kubesim.client import KubeClient, resource_path
from kubesim.cluster.nodestatus import NodeShape
from tests.e2e.watching import condition

from .conftest import EVENTS, PODS, Cluster, Watch

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]


def make_pod(name: str, cpu: str | None = None, **spec: Any) -> Obj:
    container: Obj = {"name": "app", "image": "nginx:1.25"}
    if cpu is not None:
        container["resources"] = {"requests": {"cpu": cpu}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [container], **spec},
    }


def named(name: str, check: Callable[[Obj], bool] = lambda _: True) -> Callable[[str, Obj], bool]:
    return lambda t, o: t != "DELETED" and o["metadata"]["name"] == name and check(o)


def bound(pod: Obj) -> bool:
    return bool(pod["spec"].get("nodeName"))


def unschedulable(pod: Obj) -> bool:
    scheduled = condition(pod, "PodScheduled")
    return scheduled is not None and scheduled["reason"] == "Unschedulable"


async def events_for(kube: KubeClient, pod: Obj, reason: str) -> list[Obj]:
    uid = pod["metadata"]["uid"]
    listed = await kube.get(EVENTS)
    return [
        e
        for e in listed["items"]
        if e["involvedObject"].get("uid") == uid and e["reason"] == reason
    ]


async def test_binds_with_scheduled_event_and_spreads(
    kube: KubeClient, cluster: Cluster, watch: Watch
) -> None:
    await cluster({"n1": NodeShape(cpu="2"), "n2": NodeShape(cpu="2")})
    pods = await watch(PODS)
    for name in ("a", "b"):
        await kube.create(PODS, make_pod(name, "600m"))
    a = await pods.until_obj(named("a", bound))
    b = await pods.until_obj(named("b", bound))
    assert {a["spec"]["nodeName"], b["spec"]["nodeName"]} == {"n1", "n2"}  # least requested
    assert condition(a, "PodScheduled") is not None
    (event,) = await events_for(kube, a, "Scheduled")
    assert event["type"] == "Normal"
    assert event["message"] == f"Successfully assigned default/a to {a['spec']['nodeName']}"
    assert event["source"] == {"component": "default-scheduler"}
    assert event["action"] == "Binding"


async def test_unschedulable_condition_event_and_retry_on_uncordon(
    kube: KubeClient, cluster: Cluster, watch: Watch
) -> None:
    taint = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
    await cluster({"n1": NodeShape(unschedulable=True), "n2": NodeShape(taints=[taint])})
    pods = await watch(PODS)
    await kube.create(PODS, make_pod("web"))
    pending = await pods.until_obj(named("web", unschedulable))
    message = (
        "0/2 nodes are available: 1 node(s) had untolerated taint {dedicated: infra}, "
        "1 node(s) were unschedulable. preemption: 0/2 nodes are available: "
        "2 Preemption is not helpful for scheduling."
    )
    scheduled = condition(pending, "PodScheduled")
    assert scheduled is not None
    assert {k: scheduled[k] for k in ("status", "reason", "message")} == {
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
    }
    assert scheduled["lastProbeTime"] is None and scheduled["lastTransitionTime"]
    assert not pending["spec"].get("nodeName") and pending["status"]["phase"] == "Pending"
    (event,) = await events_for(kube, pending, "FailedScheduling")
    assert (event["type"], event["message"], event["action"]) == ("Warning", message, "Scheduling")
    assert event["source"]["component"] == "default-scheduler"

    node = await kube.get(resource_path("v1", "nodes", None, "n1"))
    node["spec"]["unschedulable"] = False  # uncordon; the lifecycle controller drops the taint
    await kube.replace(resource_path("v1", "nodes", None, "n1"), node)
    placed = await pods.until_obj(named("web", bound))
    assert placed["spec"]["nodeName"] == "n1"
    assert condition(placed, "PodScheduled") == {
        "type": "PodScheduled",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": condition(placed, "PodScheduled")["lastTransitionTime"],  # type: ignore[index]
    }


@pytest.mark.parametrize(
    ("spec", "node"),
    [
        (
            {
                "nodeSelector": {"zone": "b"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            },
            "n2",
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "zone", "operator": "NotIn", "values": ["b"]}
                                    ]
                                }
                            ]
                        }
                    }
                }
            },
            "n1",
        ),
        (
            {"cpu": "2", "tolerations": [{"key": "gpu", "operator": "Equal", "value": "true"}]},
            "n2",
        ),  # too big for n1
        ({"cpu": "2", "tolerations": [{"operator": "Exists"}]}, "n2"),
    ],
)
async def test_filters_through_the_api(
    kube: KubeClient, cluster: Cluster, watch: Watch, spec: Mapping[str, Any], node: str
) -> None:
    gpu = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
    await cluster(
        {
            "n1": NodeShape(cpu="1", labels={"zone": "a"}),
            "n2": NodeShape(cpu="4", labels={"zone": "b"}, taints=[gpu]),
        }
    )
    pods = await watch(PODS)
    spec = dict(spec)
    await kube.create(PODS, make_pod("p", spec.pop("cpu", None), **spec))
    placed = await pods.until_obj(named("p", bound))
    assert placed["spec"]["nodeName"] == node


async def test_resources_exhausted_message(
    kube: KubeClient, cluster: Cluster, watch: Watch
) -> None:
    gpu = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
    await cluster({"n1": NodeShape(cpu="1"), "n2": NodeShape(cpu="4", taints=[gpu])})
    pods = await watch(PODS)
    await kube.create(PODS, make_pod("small", "500m"))
    await pods.until(named("small", bound))
    await kube.create(PODS, make_pod("big", "8"))
    pending = await pods.until_obj(named("big", unschedulable))
    assert condition(pending, "PodScheduled")["message"] == (  # type: ignore[index]
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint "
        "{gpu: true}. preemption: 0/2 nodes are available: 1 No preemption victims found for "
        "incoming pod, 1 Preemption is not helpful for scheduling."
    )


async def test_preemption(kube: KubeClient, cluster: Cluster, watch: Watch) -> None:
    await cluster({"n1": NodeShape(cpu="1")})
    pods = await watch(PODS)
    events = await watch(EVENTS)
    await kube.create(PODS, make_pod("victim", "800m", priority=0))
    await pods.until(named("victim", lambda p: p["status"].get("phase") == "Running"))
    await kube.create(PODS, make_pod("vip", "800m", priority=1000))

    # the victim: DisruptionTarget first, then graceful deletion, then gone
    i_target = await pods.until(
        named("victim", lambda p: condition(p, "DisruptionTarget") is not None)
    )
    victim = pods.events[i_target][1]
    target = condition(victim, "DisruptionTarget")
    assert target is not None
    assert {k: target[k] for k in ("status", "reason", "message")} == {
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": "default-scheduler: preempting to accommodate a higher priority pod",
    }
    assert not victim["metadata"].get("deletionTimestamp")
    i_deleting = await pods.until(
        named("victim", lambda p: bool(p["metadata"].get("deletionTimestamp"))), i_target
    )
    assert pods.events[i_deleting][1]["metadata"]["deletionGracePeriodSeconds"] == 30
    await pods.until(lambda t, o: t == "DELETED" and o["metadata"]["name"] == "victim")

    # the preemptor: nominated while it waits, then bound to the node
    nominated = await pods.until_obj(
        named("vip", lambda p: p["status"].get("nominatedNodeName") == "n1")
    )
    scheduled = condition(nominated, "PodScheduled")
    assert scheduled is not None
    assert scheduled["message"] == "0/1 nodes are available: 1 Insufficient cpu."
    placed = await pods.until_obj(named("vip", bound))
    assert placed["spec"]["nodeName"] == "n1"

    preempted = await events.until_obj(lambda t, e: e.get("reason") == "Preempted")
    assert preempted["type"] == "Normal"
    assert preempted["involvedObject"]["uid"] == victim["metadata"]["uid"]
    assert preempted["message"] == f"Preempted by pod {placed['metadata']['uid']} on node n1"
    assert preempted["action"] == "Preempting"
    assert preempted["related"]["uid"] == placed["metadata"]["uid"]
    assert preempted["source"]["component"] == "default-scheduler"


async def test_no_preemption_with_policy_never(
    kube: KubeClient, cluster: Cluster, watch: Watch
) -> None:
    await cluster({"n1": NodeShape(cpu="1")})
    pods = await watch(PODS)
    await kube.create(PODS, make_pod("low", "800m"))
    await pods.until(named("low", bound))
    await kube.create(PODS, make_pod("polite", "800m", priority=10, preemptionPolicy="Never"))
    pending = await pods.until_obj(named("polite", unschedulable))
    assert condition(pending, "PodScheduled")["message"] == (  # type: ignore[index]
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to "
        "preemptionPolicy=Never."
    )
    low = await kube.get(f"{PODS}/low")
    assert condition(low, "DisruptionTarget") is None


async def test_no_nodes(kube: KubeClient, cluster: Cluster, watch: Watch) -> None:
    await cluster({})
    pods = await watch(PODS)
    await kube.create(PODS, make_pod("lonely"))
    pending = await pods.until_obj(named("lonely", unschedulable))
    scheduled = condition(pending, "PodScheduled")
    assert scheduled is not None
    assert scheduled["message"] == "no nodes available to schedule pods"
