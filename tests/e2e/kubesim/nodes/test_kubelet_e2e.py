"""Simulated kubelets through the API: pod lifecycle, termination, OOM, crash loops, heartbeats.

Orders are asserted on the recorded watch sequence, never on elapsed time.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from kubesim.client import KubeClient, resource_path
from kubesim.cluster.behaviour import (
    CRASH_AFTER,
    CRASH_LOOP,
    EXIT_DELAY,
    NEVER_READY,
    OOM_AFTER,
    READY_DELAY,
    START_DELAY,
)
from kubesim.cluster.kubelet import Kubelet
from kubesim.cluster.kubeletconfig import KubeletConfig
from kubesim.cluster.nodestatus import NodeShape

from .conftest import EVENTS, PODS, Cluster, Watch

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]


def make_pod(name: str, annotations: dict[str, str] | None = None, **spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}], **spec},
    }


def conditions(pod: Obj) -> dict[str, Obj]:
    return {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or []}


def status_of(pod: Obj, kind: str) -> str | None:
    found = conditions(pod).get(kind)
    return found["status"] if found else None


def container(pod: Obj) -> Obj:
    statuses: list[Obj] = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return statuses[0]


def state(pod: Obj) -> str:
    states: dict[str, Obj] = container(pod).get("state") or {"none": {}}
    return next(iter(states))


def named(name: str, check: Callable[[Obj], bool] = lambda _: True) -> Callable[[str, Obj], bool]:
    return lambda t, o: t != "DELETED" and o["metadata"]["name"] == name and check(o)


def deleted(name: str) -> Callable[[str, Obj], bool]:
    return lambda t, o: t == "DELETED" and o["metadata"]["name"] == name


async def pod_events(kube: KubeClient, uid: str) -> list[Obj]:
    listed = await kube.get(EVENTS)
    return [e for e in listed["items"] if e["involvedObject"].get("uid") == uid]


async def test_lifecycle_to_ready_in_order(
    kube: KubeClient, cluster: Cluster, watch: Watch
) -> None:
    await cluster({"n1": NodeShape()})
    pods = await watch(PODS)
    await kube.create(PODS, make_pod("web", {START_DELAY: "30ms", READY_DELAY: "60ms"}))

    creating = await pods.until(named("web", lambda p: state(p) == "waiting"))
    running = await pods.until(named("web", lambda p: state(p) == "running"), creating)
    ready = await pods.until(named("web", lambda p: status_of(p, "Ready") == "True"), running)
    assert creating < running < ready

    pending = pods.events[creating][1]
    assert pending["status"]["phase"] == "Pending"
    assert container(pending)["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert (container(pending)["image"], container(pending)["imageID"]) == ("nginx:1.25", "")
    assert status_of(pending, "PodReadyToStartContainers") == "False"
    assert status_of(pending, "Initialized") == "True"
    assert status_of(pending, "PodScheduled") == "True"
    assert "podIP" not in pending["status"] and pending["status"]["hostIP"] == "172.18.0.2"

    started = pods.events[running][1]
    assert started["status"]["phase"] == "Running"
    assert container(started)["ready"] is False and container(started)["started"] is True
    for kind in ("Ready", "ContainersReady"):
        assert {k: conditions(started)[kind].get(k) for k in ("status", "reason", "message")} == {
            "status": "False",
            "reason": "ContainersNotReady",
            "message": "containers with unready status: [app]",
        }

    final = pods.events[ready][1]
    assert [c["type"] for c in final["status"]["conditions"]] == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    assert all(c["status"] == "True" for c in final["status"]["conditions"])
    app = container(final)
    assert app["state"]["running"]["startedAt"]
    assert (app["ready"], app["started"], app["restartCount"]) == (True, True, 0)
    assert app["image"] == "docker.io/library/nginx:1.25"
    assert app["imageID"].startswith("docker.io/library/nginx@sha256:")
    assert re.fullmatch(r"containerd://[0-9a-f]{64}", app["containerID"])
    assert app["lastState"] == {}
    assert ipaddress.ip_address(final["status"]["podIP"]) in ipaddress.ip_network("10.244.1.0/24")
    assert final["status"]["podIPs"] == [{"ip": final["status"]["podIP"]}]
    assert final["status"]["qosClass"] == "BestEffort" and final["status"]["startTime"]
    reasons = [e["reason"] for e in await pod_events(kube, final["metadata"]["uid"])]
    assert {"Scheduled", "Pulled", "Created", "Started"} <= set(reasons)


async def test_never_ready(kube: KubeClient, cluster: Cluster, watch: Watch) -> None:
    await cluster({"n1": NodeShape()})
    pods = await watch(PODS)
    await kube.create(PODS, make_pod("stuck", {NEVER_READY: "true"}))
    running = await pods.until_obj(named("stuck", lambda p: state(p) == "running"))
    assert status_of(running, "Ready") == "False"
    assert all(status_of(o, "Ready") != "True" for _, _, o in pods.of("stuck"))


async def test_graceful_termination_waits_for_exit_then_deletes(
    kube: KubeClient, cluster: Cluster, watch: Watch
) -> None:
    await cluster({"n1": NodeShape()})
    pods = await watch(PODS)
    await kube.create(PODS, make_pod("web", {EXIT_DELAY: "100ms"}))
    await pods.until(named("web", lambda p: status_of(p, "Ready") == "True"))
    await kube.delete(f"{PODS}/web")

    terminating = await pods.until(
        named("web", lambda p: bool(p["metadata"].get("deletionTimestamp")))
    )
    exited = await pods.until(named("web", lambda p: state(p) == "terminated"), terminating)
    gone = await pods.until(deleted("web"), exited)
    assert terminating < exited < gone
    # Terminating: the object stays, the container still runs until the process exits
    during = pods.events[terminating][1]
    assert during["metadata"]["deletionGracePeriodSeconds"] == 30
    assert state(during) == "running"
    after = pods.events[exited][1]
    terminated = container(after)["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
    assert after["status"]["phase"] == "Succeeded"
    assert conditions(after)["Ready"]["reason"] == "PodCompleted"
    killing = [
        e for e in await pod_events(kube, after["metadata"]["uid"]) if e["reason"] == "Killing"
    ]
    assert [e["message"] for e in killing] == ["Stopping container app"]
    assert killing[0]["involvedObject"]["fieldPath"] == "spec.containers{app}"


async def test_killed_at_the_grace_deadline(
    kube: KubeClient, cluster: Cluster, watch: Watch
) -> None:
    await cluster({"n1": NodeShape()})
    pods = await watch(PODS)
    await kube.create(PODS, make_pod("slow", {EXIT_DELAY: "1h"}))
    await pods.until(named("slow", lambda p: state(p) == "running"))
    await kube.delete(f"{PODS}/slow", {"gracePeriodSeconds": 1})
    exited = await pods.until_obj(named("slow", lambda p: state(p) == "terminated"))
    terminated = container(exited)["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (137, "Error")
    assert exited["status"]["phase"] == "Failed"
    await pods.until(deleted("slow"))


async def test_oom_kill_restarts_in_place(kube: KubeClient, cluster: Cluster, watch: Watch) -> None:
    await cluster({"n1": NodeShape()})
    pods = await watch(PODS)
    await kube.create(PODS, make_pod("hungry", {OOM_AFTER: "50ms"}))
    restarted = await pods.until_obj(
        named("hungry", lambda p: container(p).get("restartCount") == 1)
    )
    last = container(restarted)["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (137, "OOMKilled")
    assert last["containerID"] != container(restarted)["containerID"]
    assert restarted["status"]["phase"] == "Running"
    assert "deletionTimestamp" not in restarted["metadata"]
    assert "reason" not in restarted["status"]
    # OOM never goes through SIGTERM: no Killing event, no DisruptionTarget
    reasons = [e["reason"] for e in await pod_events(kube, restarted["metadata"]["uid"])]
    assert "Killing" not in reasons
    assert "DisruptionTarget" not in conditions(restarted)


async def test_crash_loop_back_off(kube: KubeClient, cluster: Cluster, watch: Watch) -> None:
    await cluster({"n1": NodeShape()})
    pods = await watch(PODS)
    await kube.create(PODS, make_pod("crashy", {CRASH_LOOP: "true", CRASH_AFTER: "10ms"}))
    looping = await pods.until_obj(
        named(
            "crashy",
            lambda p: (
                (container(p).get("state") or {}).get("waiting", {}).get("reason")
                == "CrashLoopBackOff"
            ),
        )
    )
    app = container(looping)
    uid = looping["metadata"]["uid"]
    assert app["state"]["waiting"]["message"] == (
        f"back-off 50ms restarting failed container=app pod=crashy_default({uid})"
    )
    assert (
        app["lastState"]["terminated"]["exitCode"],
        app["lastState"]["terminated"]["reason"],
    ) == (1, "Error")
    assert app["restartCount"] == 1  # the first restart is immediate, the second waits
    assert looping["status"]["phase"] == "Running"
    assert conditions(looping)["Ready"]["status"] == "False"
    later = await pods.until_obj(named("crashy", lambda p: container(p).get("restartCount") == 3))
    assert later["metadata"]["uid"] == uid
    backoffs = [e for e in await pod_events(kube, uid) if e["reason"] == "BackOff"]
    assert backoffs and backoffs[0]["type"] == "Warning"
    assert (
        backoffs[0]["message"]
        == f"Back-off restarting failed container app in pod crashy_default({uid})"
    )


async def test_restart_policy_never_completes(
    kube: KubeClient, cluster: Cluster, watch: Watch
) -> None:
    await cluster({"n1": NodeShape()})
    pods = await watch(PODS)
    await kube.create(PODS, make_pod("job", {CRASH_LOOP: "true"}, restartPolicy="Never"))
    done = await pods.until_obj(named("job", lambda p: p["status"].get("phase") == "Failed"))
    assert container(done)["state"]["terminated"]["exitCode"] == 1
    assert container(done)["restartCount"] == 0


async def test_node_heartbeats(
    kube: KubeClient, cluster: Cluster, watch: Watch, fast_config: KubeletConfig
) -> None:
    leases = await watch(resource_path("coordination.k8s.io/v1", "leases", "kube-node-lease"))
    await cluster(
        {"n1": NodeShape()}, replace(fast_config, heartbeat_interval=0.05), scheduler=False
    )
    first = await leases.until(named("n1"))
    renew_time = leases.events[first][1]["spec"]["renewTime"]
    renewed = await leases.until(
        named("n1", lambda lease: lease["spec"]["renewTime"] != renew_time), first
    )
    lease = leases.events[renewed][1]
    assert lease["spec"]["holderIdentity"] == "n1"
    assert lease["spec"]["leaseDurationSeconds"] == 40
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", lease["spec"]["renewTime"])
    node = await kube.get(resource_path("v1", "nodes", None, "n1"))
    (owner,) = lease["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "n1",
        "uid": node["metadata"]["uid"],
    }
    ready = node["status"]["conditions"][-1]
    assert {k: ready[k] for k in ("type", "status", "reason", "message")} == {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
    }
    assert ready["lastHeartbeatTime"]
    assert [c["type"] for c in node["status"]["conditions"]] == [
        "MemoryPressure",
        "DiskPressure",
        "PIDPressure",
        "Ready",
    ]


async def test_init_containers_complete_first(
    kube: KubeClient, cluster: Cluster, watch: Watch
) -> None:
    await cluster({"n1": NodeShape()})
    pods = await watch(PODS)
    pod = make_pod("init", {START_DELAY: "30ms"})
    pod["spec"]["initContainers"] = [{"name": "setup", "image": "busybox"}]
    await kube.create(PODS, pod)
    waiting = await pods.until_obj(named("init", lambda p: state(p) == "waiting"))
    assert container(waiting)["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert conditions(waiting)["Initialized"] == {
        "type": "Initialized",
        "status": "False",
        "lastProbeTime": None,
        "lastTransitionTime": conditions(waiting)["Initialized"]["lastTransitionTime"],
        "reason": "ContainersNotInitialized",
        "message": "containers with incomplete status: [setup]",
    }
    ready = await pods.until_obj(named("init", lambda p: status_of(p, "Ready") == "True"))
    (setup,) = ready["status"]["initContainerStatuses"]
    assert setup["state"]["terminated"]["reason"] == "Completed"
    assert (setup["ready"], setup["started"]) == (True, False)
    assert status_of(ready, "Initialized") == "True"


async def test_standalone_kubelet_registers_and_runs_its_pods(
    kube: KubeClient, watch: Watch, fast_config: KubeletConfig
) -> None:
    kubelet = Kubelet(kube, "solo", fast_config, NodeShape(cpu="3", labels={"tier": "edge"}))
    pods = await watch(PODS)
    await kubelet.start()
    try:
        node = await kube.get(resource_path("v1", "nodes", None, "solo"))
        assert node["status"]["allocatable"]["cpu"] == "3"
        assert node["metadata"]["labels"]["tier"] == "edge"
        assert conditions(node)["Ready"]["status"] == "True"
        await kube.create(PODS, make_pod("pinned", nodeName="solo"))
        await kube.create(PODS, make_pod("elsewhere", nodeName="other"))
        await pods.until(named("pinned", lambda p: status_of(p, "Ready") == "True"))
        # the kubelet's watch is filtered server-side by spec.nodeName
        assert [name for _, name in kubelet.pods.cache] == ["pinned"]
        assert len(kubelet.workers) == 1
        other = await kube.get(f"{PODS}/elsewhere")
        assert "containerStatuses" not in other["status"]
    finally:
        await kubelet.stop()
