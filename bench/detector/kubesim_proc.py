"""kubesim in its own process with one workload pod being drained, for the detector benchmark.

The workload: namespace and ServiceAccount `my-app` with the shipped detector RBAC
(deploy/detector, nodes included), a node, a Deployment, its ReplicaSet and one running pod
that is then evicted through the Eviction API (DisruptionTarget EvictionByEvictionAPI,
deletionTimestamp set; no kubelet runs, so it stays terminating).

Protocol: the child sends a `Workload` once ready; "hang" makes every request from the
workload's ServiceAccount hang (kubesim fault injection), "heal" removes that; "stop" ends.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import yaml

from bench.procs import receive_async, run_child
from kubesim.apiserver.faults import FaultRule
from kubesim.apiserver.meta import rfc3339
from kubesim.client import KubeClient, resource_path
from kubesim.cluster.nodestatus import update_conditions
from kubesim.kubeconfig import kubeconfig_document
from kubesim.sim import KubeSim

NAMESPACE = SERVICE_ACCOUNT = "my-app"  # as the shipped manifests name them
NODE = "node-a"
POD = "web-7f9c8d6b5-x7k2p"
DEPLOY_DIR = Path(__file__).resolve().parents[2] / "deploy" / "detector"
RBAC_FILES = ("role.yaml", "rolebinding.yaml", "nodes/clusterrole.yaml",
              "nodes/clusterrolebinding.yaml")  # fmt: skip
APP = {"app": "web"}


@dataclass(frozen=True)
class Workload:
    kubeconfig: str  # the workload ServiceAccount's, YAML as kubectl writes it
    pod_kubeconfig: str  # the same as JSON: what a pod's in-cluster account costs (no YAML)
    namespace: str
    pod: str
    uid: str
    node: str


def _owner(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def _running_status() -> dict[str, Any]:
    return {
        "phase": "Running",
        "conditions": [{"type": kind, "status": "True"}
                       for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
        "containerStatuses": [{"name": "web", "ready": True, "restartCount": 0, "image": "nginx",
                               "imageID": "", "state": {"running": {}}}],
    }  # fmt: skip


def seed(sim: KubeSim) -> dict[str, Any]:
    """Everything but the eviction; returns the running pod."""
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    sim.create({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE}})  # fmt: skip
    for name in RBAC_FILES:
        sim.create(yaml.safe_load((DEPLOY_DIR / name).read_text(encoding="utf-8")))
    # The node as a kubelet leaves it after its first status sync: the detector needs its
    # conditions (no pressure) before any drain verdict.
    conditions, _ = update_conditions((), (), rfc3339(datetime.now(UTC)))
    sim.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
                "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]},
                "status": {"conditions": conditions}})  # fmt: skip
    template: dict[str, Any] = {"metadata": {"labels": APP},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}  # fmt: skip
    deployment = sim.create({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NAMESPACE},
        "spec": {"replicas": 1, "selector": {"matchLabels": APP}, "template": template},
    })  # fmt: skip
    replicaset = sim.create({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": POD.rsplit("-", 1)[0], "namespace": NAMESPACE,
                     "ownerReferences": [_owner(deployment)]},
        "spec": {"replicas": 1, "selector": {"matchLabels": APP}, "template": template},
    })  # fmt: skip
    pod = sim.create({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": POD, "namespace": NAMESPACE, "labels": APP,
                     "ownerReferences": [_owner(replicaset)]},
        "spec": {"nodeName": NODE, "serviceAccountName": SERVICE_ACCOUNT,
                 "terminationGracePeriodSeconds": 30, **template["spec"]},
    })  # fmt: skip
    # The kubelet's status write, folded into the creation: nothing has read the pod yet.
    pod["status"] = _running_status()
    return pod


async def evict(sim: KubeSim, pod: dict[str, Any]) -> None:
    client = KubeClient(sim.url, sim.admin_token, sim.ca_pem)
    try:
        await client.create(
            resource_path("v1", "pods", NAMESPACE, POD, "eviction"),
            {"apiVersion": "policy/v1", "kind": "Eviction",
             "metadata": {"name": POD, "namespace": NAMESPACE}},
        )  # fmt: skip
    finally:
        await client.close()


async def _serve(connection: Connection, uvloop: bool) -> None:
    async with KubeSim() as sim:
        pod = seed(sim)
        await evict(sim, pod)
        kubeconfig = Path(sim.kubeconfig_path).with_name("workload-kubeconfig")
        token = sim.service_account_token(NAMESPACE, SERVICE_ACCOUNT)
        sim.write_kubeconfig(kubeconfig, token=token, user=SERVICE_ACCOUNT)
        # A pod reads its service account's three files and no YAML; a subprocess here has
        # no account at the fixed path, so a JSON kubeconfig stands for it.
        pod_kubeconfig = kubeconfig.with_name("workload-kubeconfig.json")
        document = kubeconfig_document(sim.url, sim.ca_pem, token, SERVICE_ACCOUNT)
        pod_kubeconfig.write_text(json.dumps(document))
        connection.send(Workload(str(kubeconfig), str(pod_kubeconfig), NAMESPACE, POD,
                                 pod["metadata"]["uid"], NODE))  # fmt: skip
        user = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
        hang = FaultRule(user=user, hang=True)
        while (command := await receive_async(connection)) != "stop":
            if command == "hang":
                sim.faults.add(hang)
            elif command == "heal":
                sim.faults.remove(hang)
            connection.send(command)
    connection.send("stopped")


def kubesim_main(connection: Connection, uvloop: bool) -> None:
    """Process entry point (spawned)."""
    run_child(connection, _serve(connection, uvloop), uvloop=uvloop)
