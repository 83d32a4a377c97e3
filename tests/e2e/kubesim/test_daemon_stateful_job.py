"""kubesim's DaemonSet, StatefulSet and Job controllers, end to end through the API with
the scheduler and simulated kubelets: a daemon pod per node (kept on a cordoned node), a
stateful pod recreated under its name once deleted, a Job's deleted pod counted as failed,
released from its tracking finalizer and replaced. Every wait is on a watch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kubesim.client import KubeClient, resource_path
from kubesim.cluster.cluster import Cluster
from kubesim.cluster.job import TRACKING_FINALIZER
from kubesim.sim import KubeSim
from kubesim.watchlog import watch_until
from tests.e2e.watching import is_ready

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
NS = "default"
NODES = ["node-a", "node-b"]
CONTAINERS = [{"name": "app", "image": "registry.example/app:1"}]


def template(app: str, restart_policy: str | None = None) -> Obj:
    spec: Obj = {"containers": CONTAINERS, "terminationGracePeriodSeconds": 1}
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return {"metadata": {"labels": {"app": app}}, "spec": spec}


def daemonset(name: str) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": template(name)},
    }


def statefulset(name: str, replicas: int = 2) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": template(name),
        },
    }


def job(name: str) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"template": running(template(name, "Never"))},
    }


def running(pod_template: Obj) -> Obj:
    """Runs until stopped: a Job's pod without `run-for` finishes by itself after 1 s."""
    pod_template["metadata"]["annotations"] = {"sim.kubesim.io/run-for": "1h"}
    return pod_template


def of_app(app: str, predicate: Callable[[list[Obj]], bool]) -> Callable[[list[Obj]], bool]:
    return lambda pods: predicate([p for p in pods if p["metadata"]["labels"].get("app") == app])


async def pods_until(
    client: KubeClient, app: str, predicate: Callable[[list[Obj]], bool]
) -> list[Obj]:
    pods = await watch_until(client, "v1", "pods", "Pod", NS, of_app(app, predicate))
    return [p for p in pods if p["metadata"]["labels"].get("app") == app]


def all_ready(count: int) -> Callable[[list[Obj]], bool]:
    return lambda pods: len(pods) == count and all(is_ready(p) for p in pods)


async def test_daemon_stateful_and_job_pods(sim: KubeSim) -> None:
    client = KubeClient(sim.url, sim.admin_token, sim.ca_pem, user_agent="workloads-test")
    try:
        async with Cluster(sim, nodes=NODES):
            await client.create(resource_path("apps/v1", "daemonsets", NS), daemonset("agent"))
            await client.create(resource_path("apps/v1", "statefulsets", NS), statefulset("db"))
            created = await client.create(resource_path("batch/v1", "jobs", NS), job("batch"))

            agents = await pods_until(client, "agent", all_ready(2))
            assert sorted(p["spec"]["nodeName"] for p in agents) == NODES
            assert all(
                {
                    "key": "node.kubernetes.io/unschedulable",
                    "operator": "Exists",
                    "effect": "NoSchedule",
                }
                in p["spec"]["tolerations"]
                for p in agents
            )
            db = await pods_until(client, "db", all_ready(2))
            assert sorted(p["metadata"]["name"] for p in db) == ["db-0", "db-1"]
            assert {p["spec"]["hostname"] for p in db} == {"db-0", "db-1"}
            [worker] = await pods_until(client, "batch", all_ready(1))
            assert TRACKING_FINALIZER in worker["metadata"]["finalizers"]
            assert worker["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "batch"
            assert created["spec"]["selector"] == {
                "matchLabels": {"batch.kubernetes.io/controller-uid": created["metadata"]["uid"]}
            }

            # A deleted stateful pod comes back under its name; a deleted Job pod is replaced.
            [db0] = [p for p in db if p["metadata"]["name"] == "db-0"]
            await client.delete(resource_path("v1", "pods", NS, "db-0"))
            await client.delete(resource_path("v1", "pods", NS, worker["metadata"]["name"]))
            db = await pods_until(
                client,
                "db",
                lambda pods: (
                    all_ready(2)(pods)
                    and any(
                        p["metadata"]["uid"] != db0["metadata"]["uid"]
                        for p in pods
                        if p["metadata"]["name"] == "db-0"
                    )
                ),
            )
            replaced = await pods_until(
                client,
                "batch",
                lambda pods: (
                    all_ready(1)(pods) and pods[0]["metadata"]["uid"] != worker["metadata"]["uid"]
                ),
            )
            assert replaced
            jobs = await watch_until(
                client,
                "batch/v1",
                "jobs",
                "Job",
                NS,
                lambda items: (items[0].get("status") or {}).get("failed") == 1,
            )
            assert jobs[0]["status"]["active"] == 1

            # A cordoned node keeps its daemon pod.
            await client.patch(
                resource_path("v1", "nodes", None, "node-a"), {"spec": {"unschedulable": True}}
            )
            daemonsets = await watch_until(
                client,
                "apps/v1",
                "daemonsets",
                "DaemonSet",
                NS,
                lambda items: items[0].get("status", {}).get("numberReady") == 2,
            )
            assert daemonsets[0]["status"]["desiredNumberScheduled"] == 2
    finally:
        await client.close()
