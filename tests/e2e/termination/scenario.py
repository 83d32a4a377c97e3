"""The cluster side of the detector's end-to-end scenarios, on kubesim.

A namespace with the workload's ServiceAccount, bound to the RBAC from
``deploy/detector`` (applied as shipped, with the ``my-app`` placeholders replaced), a
node, and pods.  The detector runs with that ServiceAccount's token.

Until kubesim's simulated kubelet and scheduler land (branch ``nodes``), their writes
are made here through the API exactly as upstream makes them:

* node-pressure eviction — pkg/kubelet/eviction/eviction_manager.go ``evictPod``: a
  Warning ``Evicted`` event from source ``kubelet`` (``AnnotatedEventf`` with
  ``starved_resource``, ``offending_containers``, ``offending_containers_usage``), then
  the status: phase Failed, reason Evicted, the message, and a DisruptionTarget
  condition with reason ``TerminationByKubelet``; no deletionTimestamp;
* scheduler preemption — pkg/scheduler/framework/preemption/preemption.go
  ``prepareCandidate``: the DisruptionTarget ``PreemptionByScheduler`` condition
  (status patch), a plain DELETE of the victim (deletionTimestamp), then an
  events.k8s.io ``Preempted`` event (action ``Preempting``) from ``default-scheduler``;
* an OOM kill — the kubelet's container status: ``lastState.terminated`` with reason
  ``OOMKilled`` and exit code 137, ``restartCount`` bumped.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import yaml

from graceful_drain.termination.detector import Detector, DetectorConfig
from graceful_drain.termination.identity import PodIdentity
from kubesim.apiserver.meta import rfc3339, rfc3339_micro
from kubesim.client import STRATEGIC_MERGE_PATCH, KubeClient, resource_path
from kubesim.sim import KubeSim

Obj = dict[str, Any]
NS = "shop"
SA = "web"
NODE = "node-1"
APP = {"app": "web"}
PLACEHOLDER = "my-app"
DEPLOY_DIR = Path(__file__).resolve().parents[3] / "deploy" / "detector"
RBAC_FILES = ("role.yaml", "rolebinding.yaml")
NODE_RBAC_FILES = ("nodes/clusterrole.yaml", "nodes/clusterrolebinding.yaml")
WAIT_SECONDS = 30.0  # a safety net for watches: the scenario waits for events, not time

# pkg/kubelet/eviction/helpers.go formats, as the kubelet fills them in.
MEMORY_EVICTION_MESSAGE = (
    "The node was low on resource: memory. Threshold quantity: 100Mi, available: 87Mi. "
    "Container web was using 612Mi, request is 128Mi, has larger consumption of memory. "
)


def detector_rbac(namespace: str, service_account: str, *, nodes: bool = True) -> list[Obj]:
    """The shipped manifests, with the workload's namespace and ServiceAccount."""
    files = RBAC_FILES + (NODE_RBAC_FILES if nodes else ())
    objects: list[Obj] = []
    for name in files:
        obj: Obj = yaml.safe_load((DEPLOY_DIR / name).read_text())
        meta = obj["metadata"]
        if "namespace" in meta:
            meta["namespace"] = namespace
        meta["name"] = meta["name"].replace(PLACEHOLDER, service_account)
        for subject in obj.get("subjects", []):
            subject["name"], subject["namespace"] = service_account, namespace
        objects.append(obj)
    return objects


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def condition(pod: Obj | None, kind: str) -> Obj | None:
    assert pod is not None
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind), None)


def running_status(pod: Obj) -> Obj:
    stamp = rfc3339(now())
    return {
        "phase": "Running",
        "conditions": [
            {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp}
            for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "hostIP": "10.0.0.1",
        "podIP": "10.244.0.7",
        "startTime": stamp,
        "containerStatuses": [
            {
                "name": container["name"],
                "ready": True,
                "restartCount": 0,
                "started": True,
                "image": container["image"],
                "imageID": "",
                "state": {"running": {"startedAt": stamp}},
            }
            for container in pod["spec"]["containers"]
        ],
    }


def pod_manifest(name: str, *, owner: Obj | None = None, grace: int = 30) -> Obj:
    meta: Obj = {"name": name, "namespace": NS, "labels": dict(APP)}
    if owner is not None:
        meta["ownerReferences"] = [owner_reference(owner)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "serviceAccountName": SA,
            "terminationGracePeriodSeconds": grace,
            "containers": [
                {
                    "name": "web",
                    "image": "nginx:1.27",
                    "resources": {"requests": {"memory": "128Mi"}},
                }
            ],
        },
    }


def owner_reference(owner: Obj) -> Obj:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def deployment_manifest(name: str = "web", replicas: int = 1) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(APP)},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {"labels": dict(APP)},
                "spec": {
                    "serviceAccountName": SA,
                    "containers": [{"name": "web", "image": "nginx:1.27"}],
                },
            },
        },
    }


class Workload:
    """The workload's namespace, ServiceAccount, RBAC and node; the cluster's writers."""

    def __init__(self, sim: KubeSim, admin: KubeClient, directory: Path) -> None:
        self.sim = sim
        self.admin = admin
        self.directory = directory
        self.kubeconfig = directory / "workload-kubeconfig"

    async def setup(self, *, node_rbac: bool = True) -> Workload:
        await self.admin.create(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        )
        await self.admin.create(
            resource_path("v1", "serviceaccounts", NS), {"metadata": {"name": SA}}
        )
        for obj in detector_rbac(NS, SA, nodes=node_rbac):
            plural = obj["kind"].lower() + "s"
            namespace = obj["metadata"].get("namespace")
            await self.admin.create(resource_path(obj["apiVersion"], plural, namespace), obj)
        await self.admin.create(
            "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}
        )
        token = self.sim.service_account_token(NS, SA)
        self.sim.write_kubeconfig(self.kubeconfig, token=token, user=f"{NS}-{SA}")
        return self

    # --- the detector, as the pod would run it --------------------------------------

    def identity(self, pod: Obj) -> PodIdentity:
        meta = pod["metadata"]
        return PodIdentity(
            name=meta["name"],
            namespace=meta["namespace"],
            uid=meta["uid"],
            node_name=pod["spec"].get("nodeName"),
            name_source="env:POD_NAME",
            namespace_source="env:POD_NAMESPACE",
        )

    def downward_env(self, pod: Obj) -> dict[str, str]:
        identity = self.identity(pod)
        env = {"POD_NAME": identity.name, "POD_NAMESPACE": identity.namespace}
        if identity.uid:
            env["POD_UID"] = identity.uid
        if identity.node_name:
            env["NODE_NAME"] = identity.node_name
        return env

    def detector(self, pod: Obj, **config: Any) -> Detector:
        return Detector(self.identity(pod), DetectorConfig(kubeconfig=self.kubeconfig, **config))

    # --- objects ----------------------------------------------------------------------

    async def read_pod(self, name: str) -> Obj:
        return await self.admin.get(resource_path("v1", "pods", NS, name))

    async def running_pod(self, name: str, *, owner: Obj | None = None, grace: int = 30) -> Obj:
        """A pod as it is once scheduled to the node and started by the kubelet."""
        await self.admin.create(
            resource_path("v1", "pods", NS), pod_manifest(name, owner=owner, grace=grace)
        )
        await self.bind(name)
        return await self.start(await self.read_pod(name))

    async def bind(self, name: str) -> None:
        await self.admin.create(
            resource_path("v1", "pods", NS, name, "binding"),
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name},
                "target": {"apiVersion": "v1", "kind": "Node", "name": NODE},
            },
        )

    async def start(self, pod: Obj) -> Obj:
        body = {**pod, "status": running_status(pod)}
        return await self.admin.replace(
            resource_path("v1", "pods", NS, pod["metadata"]["name"], "status"), body
        )

    async def deployment_pod(self, pod_name: str, *, restarted_at: str | None = None) -> Obj:
        """A Deployment, its ReplicaSet and one running pod, linked by ownerReferences, as
        the controllers leave them (the controllers themselves are not running)."""
        manifest = deployment_manifest()
        if restarted_at is not None:
            manifest["metadata"]["annotations"] = {
                "graceful-drain.stonal.com/restarted-at": restarted_at
            }
        deployment = await self.admin.create(resource_path("apps/v1", "deployments", NS), manifest)
        replicaset = await self.admin.create(
            resource_path("apps/v1", "replicasets", NS),
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": pod_name.rsplit("-", 1)[0],
                    "namespace": NS,
                    "labels": dict(APP),
                    "ownerReferences": [owner_reference(deployment)],
                },
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": dict(APP)},
                    "template": manifest["spec"]["template"],
                },
            },
        )
        return await self.running_pod(pod_name, owner=replicaset)

    async def finish_deletion(self, name: str) -> None:
        """The kubelet, once the containers are gone: delete with grace period 0."""
        await self.admin.delete(resource_path("v1", "pods", NS, name), {"gracePeriodSeconds": 0})

    # --- the kubelet and the scheduler, as upstream writes them -------------------------

    async def node_pressure(self, condition_type: str, taint: str) -> None:
        """The kubelet's node condition and the node lifecycle controller's taint."""
        node = await self.admin.get(f"/api/v1/nodes/{NODE}")
        stamp = rfc3339(now())
        node["status"] = {
            "conditions": [
                {
                    "type": condition_type,
                    "status": "True",
                    "reason": "KubeletHasInsufficientMemory",
                    "message": "kubelet has insufficient memory available",
                    "lastHeartbeatTime": stamp,
                    "lastTransitionTime": stamp,
                },
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "lastHeartbeatTime": stamp, "lastTransitionTime": stamp},
            ]
        }  # fmt: skip
        node = await self.admin.replace(f"/api/v1/nodes/{NODE}/status", node)
        node.setdefault("spec", {})["taints"] = [
            {"key": taint, "effect": "NoSchedule", "timeAdded": stamp}
        ]
        await self.admin.replace(f"/api/v1/nodes/{NODE}", node)

    async def kubelet_evicted_event(self, pod: Obj, message: str, resource: str) -> None:
        stamp = rfc3339(now())
        meta = pod["metadata"]
        await self.admin.create(
            resource_path("v1", "events", NS),
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    "name": f"{meta['name']}.{int(now().timestamp() * 1e9):x}",
                    "namespace": NS,
                    "annotations": {
                        "offending_containers": "web",
                        "offending_containers_usage": "612Mi",
                        "starved_resource": resource,
                    },
                },
                "involvedObject": {
                    "kind": "Pod",
                    "namespace": NS,
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "apiVersion": "v1",
                    "resourceVersion": meta["resourceVersion"],
                },
                "reason": "Evicted",
                "message": message,
                "source": {"component": "kubelet", "host": NODE},
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "count": 1,
                "type": "Warning",
                "eventTime": None,
                "reportingComponent": "kubelet",
                "reportingInstance": NODE,
            },
        )

    async def kubelet_evicted_status(self, pod: Obj, message: str) -> Obj:
        current = await self.read_pod(pod["metadata"]["name"])
        status = dict(current["status"])
        status.update(phase="Failed", reason="Evicted", message=message)
        status["conditions"] = [
            c for c in status.get("conditions", []) if c.get("type") != "DisruptionTarget"
        ] + [
            {
                "type": "DisruptionTarget",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": rfc3339(now()),
                "reason": "TerminationByKubelet",
                "message": message,
            }
        ]
        return await self.admin.replace(
            resource_path("v1", "pods", NS, pod["metadata"]["name"], "status"),
            {**current, "status": status},
        )

    async def scheduler_preempts(self, victim: Obj, preemptor_uid: str) -> None:
        name = victim["metadata"]["name"]
        condition_patch = {
            "status": {
                "conditions": [
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "lastTransitionTime": rfc3339(now()),
                        "reason": "PreemptionByScheduler",
                        "message": "default-scheduler: preempting to accommodate a higher "
                        "priority pod",
                    }
                ]
            }
        }
        await self.admin.patch(
            resource_path("v1", "pods", NS, name, "status"), condition_patch, STRATEGIC_MERGE_PATCH
        )
        await self.admin.delete(resource_path("v1", "pods", NS, name))
        stamp = now()
        await self.admin.create(
            resource_path("events.k8s.io/v1", "events", NS),
            {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": f"{name}.{int(stamp.timestamp() * 1e9):x}", "namespace": NS},
                "eventTime": rfc3339_micro(stamp),
                "reportingController": "default-scheduler",
                "reportingInstance": "default-scheduler-control-plane",
                "action": "Preempting",
                "reason": "Preempted",
                "regarding": {"kind": "Pod", "namespace": NS, "name": name,
                              "uid": victim["metadata"]["uid"], "apiVersion": "v1"},
                "related": {"kind": "Pod", "namespace": NS, "name": "critical",
                            "uid": preemptor_uid, "apiVersion": "v1"},
                "note": f"Preempted by pod {preemptor_uid} on node {NODE}",
                "type": "Normal",
            },
        )  # fmt: skip

    async def kubelet_reports_oom(self, pod: Obj) -> Obj:
        current = await self.read_pod(pod["metadata"]["name"])
        finished = now()
        started = finished - dt.timedelta(minutes=3)
        status = dict(current["status"])
        status["containerStatuses"] = [
            {
                "name": "web",
                "ready": True,
                "restartCount": 1,
                "started": True,
                "image": "nginx:1.27",
                "imageID": "",
                "state": {"running": {"startedAt": rfc3339(finished)}},
                "lastState": {
                    "terminated": {
                        "exitCode": 137,
                        "reason": "OOMKilled",
                        "startedAt": rfc3339(started),
                        "finishedAt": rfc3339(finished),
                        "containerID": "containerd://0f3c",
                    }
                },
            }
        ]
        return await self.admin.replace(
            resource_path("v1", "pods", NS, pod["metadata"]["name"], "status"),
            {**current, "status": status},
        )


async def watch_until(
    client: KubeClient, path: str, predicate: Callable[[Obj], bool], what: str
) -> Obj:
    """List, then watch ``path`` until an object satisfies ``predicate``; returns it."""
    async with asyncio.timeout(WAIT_SECONDS):
        listed = await client.get(path)
        items: list[Obj] = listed.get("items", [])
        for item in items:
            if predicate(item):
                return item
        async for event in client.watch(path, listed["metadata"]["resourceVersion"]):
            obj: Obj = event.get("object") or {}
            if event.get("type") in ("ADDED", "MODIFIED") and predicate(obj):
                return obj
    raise AssertionError(f"the watch ended before {what}")


@contextlib.asynccontextmanager
async def admin_client(sim: KubeSim) -> AsyncIterator[KubeClient]:
    client = KubeClient(sim.url, sim.admin_token, sim.ca_pem)
    try:
        yield client
    finally:
        await client.close()
