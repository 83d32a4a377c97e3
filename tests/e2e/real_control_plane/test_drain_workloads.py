"""`kubectl drain` of a realistic node, on kubesim and on the real control plane, with
graceful-drain installed on both: node-a holds a DaemonSet pod, a StatefulSet pod, a Job
pod and a graceful-drain-protected Deployment pod. Both drains must ignore the daemon pod,
ask to evict the same pods (kubectl's `evicting pod` lines) and see them complete (leave the
API, on a watch) in the same order; afterwards the StatefulSet pod is back under its name
and the Job's pod replaced. The Deployment pod leaves through the rollout graceful-drain
starts (its old ReplicaSet scaled down), so kubectl's retried eviction finds it gone.

The order is made deterministic by the pods' own declared behaviour, which kwok and
kubesim's kubelet both honour: the Job pod exits at once, the StatefulSet pod 2 s after
SIGTERM, and the Deployment pod's eviction is held by graceful-drain until its replacement
is Ready, 4 s after it starts. Pods are compared by their app label: generated names
differ, and kubesim's graceful-drain controller also runs as simulated pods (in its own
namespace, filtered out) where the real control plane runs it as a process.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubesim.client import KubeClient, resource_path
from kubesim.cluster.runtime import Informer
from kubesim.sim import KubeSim
from kubesim.watchlog import watch_until
from realcluster.cluster import RealCluster
from tests.e2e.controller.drain_cluster import drain_cluster
from tests.e2e.controller.drain_workloads import preferring_node_a
from tests.e2e.controller.installed import WORKLOADS
from tests.e2e.watching import is_ready

from .harness import KUBECTL_DRAIN_TIMEOUT, Installation, admin_client, kubectl, web

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]

Obj = dict[str, Any]
EXIT_DELAY = "sim.kubesim.io/exit-delay"
RUN_FOR = "sim.kubesim.io/run-for"
EVICTING = re.compile(r"^evicting pod (?P<namespace>[^/\s]+)/(?P<name>\S+)$")


def _template(app: str, exit_delay: str, restart_policy: str | None = None) -> Obj:
    spec: Obj = {"terminationGracePeriodSeconds": 10, "affinity": preferring_node_a(),
                 "containers": [{"name": "app", "image": f"registry.example/{app}:1"}]}  # fmt: skip
    if restart_policy is not None:
        spec["restartPolicy"] = restart_policy
    return {"metadata": {"labels": {"app": app}, "annotations": {EXIT_DELAY: exit_delay}},
            "spec": spec}  # fmt: skip


def workloads(namespace: str) -> list[tuple[str, str, Obj]]:
    """(api version, plural, manifest) of the node's workloads besides the Deployment."""

    def meta(name: str) -> Obj:
        return {"name": name, "namespace": namespace}

    def selector(app: str) -> Obj:
        return {"matchLabels": {"app": app}}

    return [
        ("apps/v1", "daemonsets", {"apiVersion": "apps/v1", "kind": "DaemonSet",
         "metadata": meta("agent"),
         "spec": {"selector": selector("agent"), "template": _template("agent", "0s")}}),
        ("apps/v1", "statefulsets", {"apiVersion": "apps/v1", "kind": "StatefulSet",
         "metadata": meta("db"),
         "spec": {"replicas": 1, "serviceName": "db", "selector": selector("db"),
                  "template": _template("db", "2s")}}),
        ("batch/v1", "jobs", {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("batch"),
         "spec": {"template": _running(_template("batch", "0s", restart_policy="Never"))}}),
    ]  # fmt: skip


def _running(template: Obj) -> Obj:
    """A Job pod that runs until it is stopped (one without `run-for` finishes after 1 s)."""
    template["metadata"]["annotations"][RUN_FOR] = "1h"
    return template


def app_of(pod: Obj) -> str:
    return str(pod["metadata"]["labels"].get("app", ""))


def apps_ready(wanted: dict[str, int]) -> Callable[[list[Obj]], bool]:
    def check(pods: list[Obj]) -> bool:
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return all(sum(1 for p in live if app_of(p) == app and is_ready(p)) == count
                   and sum(1 for p in live if app_of(p) == app) == count
                   for app, count in wanted.items())  # fmt: skip

    return check


READY = {"agent": 2, "db": 1, "batch": 1, "web": 1}


@dataclass(frozen=True)
class Drained:
    code: int
    evicting: list[str]  # apps whose pod kubectl asked to evict, sorted
    completed: list[str]  # apps, in the order their node-a pod left the API
    ignored_daemon_pod: bool
    after: dict[str, str]  # app -> node, once settled (the daemon's pod: node-a's)
    db_recreated: bool


async def drain_node_a(kubeconfig: Path, client: KubeClient, namespace: str) -> Drained:
    for api_version, plural, manifest in workloads(namespace):
        await client.create(resource_path(api_version, plural, namespace), manifest)
    await client.create(resource_path("apps/v1", "deployments", namespace),
                        web(namespace, ready_delay="4s"))  # fmt: skip
    before = await watch_until(client, "v1", "pods", "Pod", namespace, apps_ready(READY))
    placed = {app_of(p): p["spec"]["nodeName"] for p in before if app_of(p) != "agent"}
    assert placed == {"db": "node-a", "batch": "node-a", "web": "node-a"}, placed
    [daemon] = [p for p in before if app_of(p) == "agent" and p["spec"]["nodeName"] == "node-a"]
    [db] = [p for p in before if app_of(p) == "db"]
    apps = {p["metadata"]["name"]: app_of(p) for p in before}

    on_node_a = {p["metadata"]["uid"] for p in before if p["spec"]["nodeName"] == "node-a"}
    completed: list[str] = []
    watcher = Informer(client, "v1", "pods", "Pod", namespace=namespace)
    watcher.add_handler(
        lambda type_, pod, _old: (
            completed.append(app_of(pod))
            if type_ == "DELETED" and pod["metadata"]["uid"] in on_node_a
            else None
        )
    )
    await watcher.start()
    try:
        drained = await kubectl(
            kubeconfig, "drain", "node-a", "--ignore-daemonsets", "--delete-emptydir-data",
            f"--timeout={KUBECTL_DRAIN_TIMEOUT}", check=False,
        )  # fmt: skip
    finally:
        await watcher.stop()
    output = (drained.stdout + drained.stderr).splitlines()
    evicting = sorted({apps[m["name"]] for line in output if (m := EVICTING.match(line))
                       and m["namespace"] == namespace})  # fmt: skip

    after = await watch_until(client, "v1", "pods", "Pod", namespace, apps_ready(READY))
    [db_after] = [p for p in after if app_of(p) == "db"]
    nodes = {app_of(p): p["spec"]["nodeName"] for p in after if app_of(p) != "agent"}
    return Drained(
        code=drained.code,
        evicting=evicting,
        completed=completed,
        ignored_daemon_pod=f"{namespace}/{daemon['metadata']['name']}" in drained.stderr,
        after={**nodes, "agent": next(
            p["spec"]["nodeName"] for p in after
            if p["metadata"]["name"] == daemon["metadata"]["name"])},
        db_recreated=db_after["metadata"]["name"] == "db-0"
        and db_after["metadata"]["uid"] != db["metadata"]["uid"],
    )  # fmt: skip


async def test_a_realistic_node_drains_alike_on_kubesim_and_kube_apiserver(
    installation: Installation, real_cluster: RealCluster, namespace: str, sim: KubeSim,
    tmp_path: Path,
) -> None:  # fmt: skip
    replica = await installation.start_controller()
    client = admin_client(real_cluster, "drain-workloads")
    try:
        on_real = await drain_node_a(real_cluster.kubeconfig_path, client, namespace)
    finally:
        replica.stop()
        await client.close()
    async with drain_cluster(sim, tmp_path) as cluster:
        await cluster.start_replica()
        on_kubesim = await drain_node_a(sim.kubeconfig_path, cluster.admin, WORKLOADS)

    expected = Drained(
        code=0, evicting=["batch", "db", "web"], completed=["batch", "db", "web"],
        ignored_daemon_pod=True,
        after={"db": "node-b", "batch": "node-b", "web": "node-b", "agent": "node-a"},
        db_recreated=True,
    )  # fmt: skip
    assert on_real == expected
    assert on_kubesim == on_real
