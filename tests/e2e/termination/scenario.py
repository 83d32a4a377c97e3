"""The cluster side of the detector's end-to-end scenarios, on kubesim.

A namespace with the workload's ServiceAccount, bound to the RBAC from
``deploy/detector`` (applied as shipped, with the ``my-app`` placeholders replaced), a
node, and pods.  The detector runs with that ServiceAccount's token.

Node-pressure evictions, preemptions and OOM kills come from kubesim's simulated
kubelet, scheduler and node lifecycle controller (:func:`real_nodes`), which write them
as upstream does.  The moment the kubelet sends SIGTERM is its ``Killing`` event; that
is when a preStop hook or a SIGTERM handler would run the detector, so the scenarios
wait for it.  A pod that ignores SIGTERM (``exit-delay``) under a kubelet whose kill
grace is held long (:data:`HOLD_SIGTERM_WINDOW`) stays in that window for the test.
Without those, the scenarios that need no kubelet (drain, delete, fallbacks) bind and
start their pods through the API themselves.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from graceful_drain.termination.detector import Detector, DetectorConfig
from graceful_drain.termination.identity import PodIdentity
from kubesim.apiserver.meta import rfc3339
from kubesim.client import KubeClient, resource_path
from kubesim.cluster.behaviour import EXIT_DELAY, MEMORY_USAGE, OOM_AFTER
from kubesim.cluster.kubeletconfig import KubeletConfig
from kubesim.cluster.node_lifecycle import NodeLifecycleController
from kubesim.cluster.nodeset import NodeSet
from kubesim.cluster.nodestatus import NodeShape, update_conditions
from kubesim.cluster.scheduler import Scheduler
from kubesim.sim import KubeSim
from kubesim.watchlog import WatchLog, watch_until
from tests.e2e.watching import condition

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
# Real kubelet behaviour, with a quick eviction loop and crash back-off.
KUBELET = KubeletConfig(eviction_monitoring_interval=0.2, backoff_initial=0.05, backoff_max=0.4)
# ... and a kill grace held open, so a pod that ignores SIGTERM stays terminating.
HOLD_SIGTERM_WINDOW = replace(KUBELET, minimum_kill_grace=600.0)
IGNORES_SIGTERM = {EXIT_DELAY: "600s"}


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


def pod_manifest(
    name: str,
    *,
    owner: Obj | None = None,
    grace: int = 30,
    annotations: dict[str, str] | None = None,
    cpu: str | None = None,
    priority: int | None = None,
) -> Obj:
    meta: Obj = {"name": name, "namespace": NS, "labels": dict(APP)}
    if owner is not None:
        meta["ownerReferences"] = [owner_reference(owner)]
    if annotations:
        meta["annotations"] = dict(annotations)
    requests = {"memory": "128Mi"} | ({"cpu": cpu} if cpu else {})
    spec: Obj = {
        "serviceAccountName": SA,
        "terminationGracePeriodSeconds": grace,
        "containers": [{"name": "web", "image": "nginx:1.27", "resources": {"requests": requests}}],
    }
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


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

    async def setup(self, *, node_rbac: bool = True, create_node: bool = True) -> Workload:
        """``create_node=False`` when a simulated kubelet registers the node itself."""
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
        if create_node:
            await self.admin.create(
                "/api/v1/nodes",
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
                 "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]}},
            )  # fmt: skip
            # Its status as a kubelet's first sync writes it: the detector needs the node's
            # conditions to exclude pressure before any drain verdict.
            conditions, _ = update_conditions((), (), rfc3339(dt.datetime.now(dt.UTC)))
            await self.admin.patch(
                f"/api/v1/nodes/{NODE}/status", {"status": {"conditions": conditions}}
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

    def grace_period(self, pod: Obj) -> int:
        """The pod's terminationGracePeriodSeconds, which its manifest passes the detector."""
        return int(pod["spec"].get("terminationGracePeriodSeconds", 30))

    def detector(self, pod: Obj, **config: Any) -> Detector:
        settings = {"grace_period_seconds": self.grace_period(pod), **config}
        return Detector(self.identity(pod), DetectorConfig(kubeconfig=self.kubeconfig, **settings))

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

    # --- with the simulated kubelet and scheduler ------------------------------------

    async def create_pod(self, manifest: Obj) -> Obj:
        return await self.admin.create(resource_path("v1", "pods", NS), manifest)

    async def sigterm_delivered(self, events: WatchLog, name: str) -> Obj:
        """Wait for the kubelet's ``Killing`` event (it sends SIGTERM); the pod as it is then."""
        await events.until(
            lambda _t, e: e.get("reason") == "Killing" and e["involvedObject"]["name"] == name,
            within=WAIT_SECONDS,
        )
        return await self.read_pod(name)


def pods_log(client: KubeClient) -> Awaitable[WatchLog]:
    return WatchLog(client, resource_path("v1", "pods", NS)).start()


def events_log(client: KubeClient) -> Awaitable[WatchLog]:
    return WatchLog(client, resource_path("v1", "events", NS)).start()


def named(name: str, check: Callable[[Obj], bool]) -> Callable[[str, Obj], bool]:
    return lambda t, o: t != "DELETED" and o["metadata"]["name"] == name and check(o)


def is_running(pod: Obj) -> bool:
    ready = condition(pod, "Ready")
    return ready is not None and ready.get("status") == "True"


@contextlib.asynccontextmanager
async def real_nodes(
    client: KubeClient, shape: NodeShape | None = None, config: KubeletConfig = KUBELET
) -> AsyncIterator[NodeSet]:
    """The node lifecycle controller, a kubelet for NODE, and the default scheduler."""
    lifecycle = NodeLifecycleController(client)
    nodes = NodeSet(client, {NODE: shape or NodeShape()}, config)
    scheduler = Scheduler(client)
    started: list[Any] = []
    try:
        for component in (lifecycle, nodes, scheduler):
            await component.start()
            started.append(component)
        yield nodes
    finally:
        for component in reversed(started):
            await component.stop()


async def memory_eviction(workload: Workload, nodes: NodeSet, annotations: dict[str, str]) -> str:
    """A pod over its memory request on a node that runs short: the kubelet evicts it."""
    name = "batch-0"
    pods = await pods_log(workload.admin)
    try:
        await workload.create_pod(
            pod_manifest(name, annotations={MEMORY_USAGE: "612Mi", **annotations})
        )
        await pods.until(named(name, is_running), within=WAIT_SECONDS)
    finally:
        await pods.stop()
    await nodes[NODE].set_pressure("memory", available="87Mi", threshold="100Mi")
    return name


async def preemption(workload: Workload) -> str:
    """A low-priority pod on a full node; a higher-priority one arrives: the scheduler preempts."""
    name = "batch-0"
    pods = await pods_log(workload.admin)
    try:
        await workload.create_pod(
            pod_manifest(name, cpu="800m", priority=0, annotations=IGNORES_SIGTERM)
        )
        await pods.until(named(name, is_running), within=WAIT_SECONDS)
    finally:
        await pods.stop()
    await workload.create_pod(pod_manifest("critical-0", cpu="800m", priority=1000))
    return name


async def oom_kill(workload: Workload) -> Obj:
    """A container the cgroup OOM killer ends shortly after it starts, restarted in place and
    killed again, now backing off. The first restart is immediate, so its lastState would
    change again 50 ms later; during the back-off it holds still."""
    name = "web-0"
    pods = await pods_log(workload.admin)
    try:
        await workload.create_pod(pod_manifest(name, annotations={OOM_AFTER: "50ms"}))
        return await pods.until_obj(named(name, backing_off_after_oom), within=WAIT_SECONDS)
    finally:
        await pods.stop()


def backing_off_after_oom(pod: Obj) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    if not statuses:
        return False
    last = (statuses[0].get("lastState") or {}).get("terminated") or {}
    waiting = (statuses[0].get("state") or {}).get("waiting") or {}
    return last.get("reason") == "OOMKilled" and waiting.get("reason") == "CrashLoopBackOff"


async def pod_until(client: KubeClient, predicate: Callable[[Obj], bool], what: str) -> Obj:
    """The first pod of the namespace that satisfies ``predicate``, once one does."""
    try:
        pods = await watch_until(
            client, "v1", "pods", "Pod", NS, lambda items: any(predicate(p) for p in items),
            bound=WAIT_SECONDS,
        )  # fmt: skip
    except TimeoutError:
        raise AssertionError(f"{what}: not seen within {WAIT_SECONDS:.0f}s") from None
    return next(p for p in pods if predicate(p))


@contextlib.asynccontextmanager
async def admin_client(sim: KubeSim) -> AsyncIterator[KubeClient]:
    client = KubeClient(sim.url, sim.admin_token, sim.ca_pem)
    try:
        yield client
    finally:
        await client.close()
