"""A whole cluster with graceful-drain installed from deploy/, for the end-to-end drain tests.

    async with drain_cluster(sim, tmp_path) as cluster:
        replica = await cluster.start_replica("graceful-drain-0")
        await cluster.create_web()
        drained = await cluster.kubectl_drain("node-a")

What is real: kubesim with two nodes, the scheduler, the built-in controllers and kubelets; `kubectl
apply -k deploy/` installs everything the shipped kustomization holds (its RBAC is enforced);
`kubectl drain` drains. The controller replicas run in this process (replica.py), each one
configured the way its Deployment's container would be (command-line arguments, literal environment,
Downward API fields), with three in-process changes: loopback addresses, port 0, and a kubeconfig
carrying the ServiceAccount's token instead of the mounted one. kubesim calls the webhook through
the applied ValidatingWebhookConfiguration's Service, which resolves to the replica `route_to`
names, over TLS with the CA bundle the controller published itself. When the cluster is torn down
after a passing test, the audit log is checked: the controller's ServiceAccount was never refused
(403).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.config import parse_controller_config
from graceful_drain.controller.app import ControllerApp
from graceful_drain.controller.settings import ControllerConfig
from kubesim.apiserver.audit import AuditRecord
from kubesim.client import KubeClient, resource_path
from kubesim.cluster.cluster import Cluster
from kubesim.cluster.kubeletconfig import KubeletConfig
from kubesim.cluster.nodestatus import NodeShape
from kubesim.recorder import DRAIN_FINISHED, AvailabilityRecorder
from kubesim.sim import KubeSim
from kubesim.watchlog import watch_until
from tests.conftest import run_kubectl
from tests.e2e.watching import annotations_of, is_ready

from .conftest import quick_backoff
from .drain_workloads import web
from .installed import (
    BOUND,
    CONTROLLER_DEPLOYMENT,
    CONTROLLER_USER,
    DEPLOY,
    NAMESPACE,
    SERVICE_ACCOUNT,
    WEBHOOK_CONFIGURATION,
    WORKLOADS,
)
from .replica import Replica, container_invocation

Obj = dict[str, Any]

KUBECTL_DRAIN_TIMEOUT = "45s"  # below BOUND, so a held drain ends with its own output

NODES = {
    "node-a": NodeShape(cpu="4", memory="8Gi", labels={"topology.kubernetes.io/zone": "zone-a"}),
    "node-b": NodeShape(cpu="4", memory="8Gi", labels={"topology.kubernetes.io/zone": "zone-b"}),
}
# Real kubelet defaults, except where a test would otherwise wait for seconds.
FAST_KUBELET = KubeletConfig(
    eviction_monitoring_interval=0.2, backoff_initial=0.05, backoff_max=0.4, minimum_kill_grace=0.0
)


@dataclass(frozen=True, slots=True)
class KubectlRun:
    code: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()


@dataclass
class DrainCluster:
    sim: KubeSim
    admin: KubeClient
    recorder: AvailabilityRecorder
    workdir: Path
    controller_kubeconfig: Path
    replicas: list[Replica] = field(default_factory=list)

    # kubectl

    async def kubectl(self, *args: str, stdin: str | None = None) -> KubectlRun:
        result: subprocess.CompletedProcess[str] = await asyncio.to_thread(
            run_kubectl, self.sim.kubeconfig_path, *args, check=False, timeout=BOUND, stdin=stdin
        )
        return KubectlRun(result.returncode, result.stdout, result.stderr)

    async def kubectl_json(self, *args: str) -> Obj:
        done = await self.kubectl(*args, "-o", "json")
        assert done.code == 0, done.stderr
        parsed: Obj = json.loads(done.stdout)
        return parsed

    async def kubectl_drain(self, node: str, *flags: str) -> KubectlRun:
        """`kubectl drain NODE`, with the drain's window marked on the recorder."""
        self.recorder.mark_drain_started(node, "kubectl")
        try:
            return await self.kubectl(
                "drain", node, "--ignore-daemonsets", "--delete-emptydir-data",
                f"--timeout={KUBECTL_DRAIN_TIMEOUT}", *flags,
            )  # fmt: skip
        finally:
            self.recorder.mark(DRAIN_FINISHED, node=node)

    # the controller

    async def applied_controller_deployment(self) -> Obj:
        return await self.kubectl_json("get", "deployment", CONTROLLER_DEPLOYMENT, "-n", NAMESPACE)

    async def replica_config(
        self, pod_name: str, env: Mapping[str, str] | None = None
    ) -> ControllerConfig:
        """The configuration the applied Deployment gives a pod named `pod_name`; `env`
        replaces variables, as `kubectl set env` would."""
        args, container_env, ports = container_invocation(
            await self.applied_controller_deployment(), pod_name
        )
        merged = {**container_env, **(env or {})}
        as_shipped = parse_controller_config(args, merged)
        assert as_shipped.webhook_port == ports["webhook"], "the webhook port and its Service"
        assert as_shipped.metrics_port == ports["metrics"], "the probes' port"
        in_process = ["--bind-address", "127.0.0.1", "--webhook-port", "0", "--metrics-port",
                      "0", "--kubeconfig", str(self.controller_kubeconfig)]  # fmt: skip
        return parse_controller_config([*args, *in_process], merged)

    async def start_replica(
        self, pod_name: str = "graceful-drain-0", *, env: Mapping[str, str] | None = None,
        route: bool = True, wait_synced: bool = True, app_options: Mapping[str, Any] | None = None,
    ) -> Replica:  # fmt: skip
        """Start one controller replica; with `route`, the webhook Service points at it.
        `app_options` go to ControllerApp (scaled timings of the fault suite)."""
        config = await self.replica_config(pod_name, env)
        options = {"cache_backoff": quick_backoff, **(app_options or {})}
        app = ControllerApp(config, identity=pod_name, **options)
        await app.start()
        replica = Replica(pod_name, app)
        self.replicas.append(replica)
        async with asyncio.timeout(BOUND):
            if wait_synced:
                await app.cache.wait_synced()
            if app.elector is not None and len([r for r in self.replicas if r.running]) == 1:
                await app.elector.wait_until_leader()
        await self.until_ca_bundle_published()
        if route:
            await self.route_to(replica)
        return replica

    async def webhook_configuration(self) -> Obj:
        [configuration] = [
            item
            for item in await self.kubectl_list("validatingwebhookconfigurations")
            if item["metadata"]["name"] == WEBHOOK_CONFIGURATION
        ]
        return configuration

    async def kubectl_list(self, resource: str, namespace: str | None = None) -> list[Obj]:
        scope = ["-n", namespace] if namespace else []
        listed = await self.kubectl_json("get", resource, *scope)
        items: list[Obj] = listed["items"]
        return items

    async def until_ca_bundle_published(self) -> None:
        """Until every webhook of the applied configuration carries a caBundle."""

        def published(items: list[Obj]) -> bool:
            return any(
                item["metadata"]["name"] == WEBHOOK_CONFIGURATION
                and all(w["clientConfig"].get("caBundle") for w in item.get("webhooks") or [])
                for item in items
            )

        await watch_until(
            self.admin, "admissionregistration.k8s.io/v1", "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration", None, published,
        )  # fmt: skip

    async def route_to(self, *replicas: Replica) -> None:
        """Make the webhook's Service, as the applied configuration names it, reach `replicas`
        (the Service's targetPort is the container's `webhook` port, checked in replica_config);
        several: each webhook call goes to the next one in turn, as over a Service's ready
        endpoints."""
        await self.route_to_ports(*(replica.webhook_port for replica in replicas))

    async def route_to_ports(self, *ports: int) -> None:
        """`route_to`, for loopback ports (a relay in front of a replica)."""
        [hook] = (await self.webhook_configuration())["webhooks"]
        service = hook["clientConfig"]["service"]
        [applied] = [
            item
            for item in await self.kubectl_list("services", service["namespace"])
            if item["metadata"]["name"] == service["name"]
        ]
        port = int(service.get("port") or 443)
        [target] = [p for p in applied["spec"]["ports"] if p["port"] == port]
        assert target["targetPort"] == "webhook", target
        self.sim.webhook_services.register_endpoints(
            service["namespace"], service["name"], port, "127.0.0.1", list(ports)
        )

    # workloads

    async def create(self, obj: Obj) -> Obj:
        group_version, kind = obj["apiVersion"], obj["kind"]
        plural = {"Deployment": "deployments", "StatefulSet": "statefulsets", "Pod": "pods",
                  "Service": "services"}[kind]  # fmt: skip
        namespace = obj["metadata"].get("namespace", WORKLOADS)
        return await self.admin.create(resource_path(group_version, plural, namespace), obj)

    async def create_web(self, name: str = "web", **options: Any) -> Obj:
        """Create the Deployment and wait until all its replicas are Ready."""
        created = await self.create(web(name, **options))
        replicas = int(created["spec"]["replicas"])
        await self.until(lambda: self.recorder.ready(name, WORKLOADS) >= replicas)
        return created

    async def until(self, predicate: Callable[[], bool]) -> None:
        async with asyncio.timeout(BOUND):
            await self.recorder.wait_until(predicate)

    async def until_pods_ready(self, names: list[str]) -> None:
        await watch_until(
            self.admin, "v1", "pods", "Pod", WORKLOADS,
            lambda items: {p["metadata"]["name"] for p in items if is_ready(p)} >= set(names),
        )  # fmt: skip

    async def pods(self, app: str | None = None) -> list[Obj]:
        listed = await self.admin.get(resource_path("v1", "pods", WORKLOADS))
        items: list[Obj] = listed["items"]
        return [p for p in items if app is None or p["metadata"]["labels"].get("app") == app]

    async def deployment(self, name: str = "web") -> Obj:
        return await self.admin.get(resource_path("apps/v1", "deployments", WORKLOADS, name))

    async def until_deployment(self, predicate: Callable[[Obj], bool], name: str = "web") -> Obj:
        def matching(items: list[Obj]) -> list[Obj]:
            return [d for d in items if d["metadata"]["name"] == name and predicate(d)]

        items = await watch_until(
            self.admin, "apps/v1", "deployments", "Deployment", WORKLOADS,
            lambda items: bool(matching(items)),
        )  # fmt: skip
        return matching(items)[0]

    async def until_stamped(self, name: str = "web") -> Obj:
        return await self.until_deployment(
            lambda d: RESTARTED_AT_ANNOTATION in annotations_of(d), name
        )

    async def until_unstamped(self, name: str = "web") -> Obj:
        return await self.until_deployment(
            lambda d: RESTARTED_AT_ANNOTATION not in annotations_of(d), name
        )

    async def events(self, reason: str | None = None) -> list[Obj]:
        listed = await self.admin.get(resource_path("v1", "events", WORKLOADS))
        items: list[Obj] = listed["items"]
        return [e for e in items if reason is None or e.get("reason") == reason]

    async def until_event(self, reason: str) -> Obj:
        found = await watch_until(
            self.admin, "v1", "events", "Event", WORKLOADS,
            lambda items: any(e.get("reason") == reason for e in items),
        )  # fmt: skip
        return next(e for e in found if e.get("reason") == reason)

    async def settle_after_drain(self, node: str, name: str = "web") -> tuple[float, float]:
        """Until `name` is Ready again after the drain of `node`; the window to measure."""
        start, _ = self.recorder.drain_window(node)
        replicas = int((await self.deployment(name))["spec"]["replicas"])
        await self.until(lambda: self.recorder.ready(name, WORKLOADS) >= replicas)
        return start, self.recorder.clock()

    def zero_ready_seconds(self, window: tuple[float, float], name: str = "web") -> float:
        return self.recorder.timeline(name, WORKLOADS).zero_ready_seconds(*window)

    def rollouts(self, window: tuple[float, float], name: str = "web") -> list[str]:
        return self.recorder.timeline(name, WORKLOADS).rollouts(*window)

    # the audit

    def controller_requests(self) -> list[AuditRecord]:
        return self.sim.audit.records(user=CONTROLLER_USER)


def forbidden(records: list[AuditRecord]) -> list[str]:
    return [
        f"{r.verb} {r.api_group}/{r.resource}{'/' + r.subresource if r.subresource else ''} "
        f"{r.namespace}/{r.name}"
        for r in records
        if r.code == 403
    ]


async def _install(cluster: DrainCluster, kustomization: Path) -> None:
    applied = await cluster.kubectl("apply", "-k", str(kustomization))
    assert applied.code == 0, applied.stderr
    # The controller's own (simulated) pods run on the nodes and its PodDisruptionBudget lets a
    # drain take one of them: wait until it says so, as a drain would otherwise be refused.
    await watch_until(
        cluster.admin, "policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", NAMESPACE,
        lambda items: any(
            (p.get("status") or {}).get("disruptionsAllowed", 0) >= 1
            and p["status"].get("observedGeneration") == p["metadata"]["generation"]
            for p in items
        ),
    )  # fmt: skip


@contextlib.asynccontextmanager
async def drain_cluster(
    sim: KubeSim, workdir: Path, *, kustomization: Path = DEPLOY
) -> AsyncIterator[DrainCluster]:
    """The cluster with graceful-drain applied from `kustomization` (deploy/ as shipped, or an
    operator's overlay of it)."""
    admin = KubeClient(sim.url, sim.admin_token, sim.ca_pem, user_agent="e2e-drain-test")
    async with Cluster(sim, nodes=NODES, kubelet_config=FAST_KUBELET):
        recorder = AvailabilityRecorder(admin, namespace=WORKLOADS)
        cluster = DrainCluster(sim, admin, recorder, workdir, workdir / "controller.kubeconfig")
        try:
            await _install(cluster, kustomization)
            token = sim.service_account_token(NAMESPACE, SERVICE_ACCOUNT)
            sim.write_kubeconfig(cluster.controller_kubeconfig, token=token, user=CONTROLLER_USER)
            await recorder.start()
            yield cluster
        finally:
            for replica in reversed(cluster.replicas):
                await replica.stop()
            await recorder.stop()
            await admin.close()
    # Reached only when the test passed: its requests were all allowed by the shipped RBAC.
    assert forbidden(cluster.controller_requests()) == []
