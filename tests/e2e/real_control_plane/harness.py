"""graceful-drain on the real control plane: installed from deploy/ with real kubectl, the
controller as its own process under its shipped ServiceAccount, workloads on kwok nodes.

What differs from a cluster install, and why: the webhook is registered by
`clientConfig.url: https://127.0.0.1:PORT/validate-eviction` (kube-apiserver has no cluster
network here to reach a Service), PORT being a loopback load balancer in front of the
controller processes (`LoadBalancer`); the controller's Deployment is scaled to 0 (its
replicas run as processes here, configured from that Deployment's container: arguments,
literal environment, Downward API fields) with loopback addresses, their own ports,
`--self-signed-hosts 127.0.0.1` so the self-signed certificate names the address the API
server dials, and a kubeconfig carrying a token of the shipped ServiceAccount.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import secrets
import shutil
import socket
import sys
import textwrap
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from kubesim.client import ApiStatusError, KubeClient, resource_path
from kubesim.recorder import AvailabilityRecorder
from kubesim.watchlog import watch_until
from realcluster.cluster import RealCluster, free_port, node_manifest, wait_until
from realcluster.kubeconfig import write_kubeconfig
from realcluster.processes import Child
from tests.conftest import kubectl_cache_args
from tests.e2e.controller import drain_workloads
from tests.e2e.controller.drain_cluster import KubectlRun
from tests.e2e.controller.replica import container_invocation

from .apiproxy import ApiProxy
from .loadbalancer import Backends
from .reviewrouter import ReviewRouter

Obj = dict[str, Any]

REPO = Path(__file__).resolve().parents[3]
NAMESPACE = "graceful-drain"  # deploy/base/namespace.yaml
SERVICE_ACCOUNT = "graceful-drain"
CONTROLLER_USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
BOUND = 120.0  # guards against hangs only: nothing is asserted on time
KUBECTL_DRAIN_TIMEOUT = "100s"  # below BOUND, so a held drain ends with its own output
READY_TIMEOUT = 60.0
PRODUCT_VARIABLE = "GRACEFUL_DRAIN_E2E_PRODUCT"


def product_checkout() -> Path:
    """The checkout whose product is tested: its deploy/ is installed and its src/ runs the
    controller and detector processes. This one, or $GRACEFUL_DRAIN_E2E_PRODUCT (e.g. an
    older checkout, to see a test fail against the product as it was; the tests stay this
    checkout's)."""
    return Path(os.environ.get(PRODUCT_VARIABLE) or REPO)


def product_source() -> Path:
    return product_checkout() / "src"


def pinned_kubectl(release: str) -> str:
    """The dispatcher's own kubectl of one release (e.g. "1.33"), beside it on disk."""
    dispatcher = shutil.which("kubectl")
    assert dispatcher is not None, "kubectl is not on PATH"
    pinned = Path(os.path.realpath(dispatcher)).parent / f"kubectl.{release}"
    assert pinned.is_file(), f"no kubectl {release} beside the dispatcher ({pinned})"
    return str(pinned)


async def kubectl(
    kubeconfig: Path, *args: str, binary: str = "kubectl", check: bool = True,
    stdin: str | None = None,
) -> KubectlRun:  # fmt: skip
    """Real kubectl as a subprocess, without blocking the event loop (watches keep running)."""
    process = await asyncio.create_subprocess_exec(
        binary, *kubectl_cache_args(kubeconfig), *args,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(BOUND):
        out, err = await process.communicate(None if stdin is None else stdin.encode())
    run = KubectlRun(int(process.returncode or 0), out.decode(), err.decode())
    if check and run.code != 0:
        raise AssertionError(f"kubectl {' '.join(args)} exited {run.code}\n{run.stderr}")
    return run


async def kubectl_json(kubeconfig: Path, *args: str) -> Obj:
    result: Obj = json.loads((await kubectl(kubeconfig, *args, "-o", "json")).stdout)
    return result


async def helm(cluster: RealCluster, *args: str) -> str:
    """The helm binary built with the control plane (realcluster/build), as a user runs it;
    what it prints."""
    process = await asyncio.create_subprocess_exec(
        str(cluster.bin_dir / "helm"), *args, "--kubeconfig", str(cluster.kubeconfig_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(BOUND):
        out, err = await process.communicate()
    assert process.returncode == 0, f"helm {' '.join(args)}: {out.decode()}{err.decode()}"
    return out.decode()


def admin_client(cluster: RealCluster, user_agent: str = "graceful-drain-e2e") -> KubeClient:
    return KubeClient(cluster.server, cluster.admin_token, cluster.ca_pem, user_agent=user_agent)


async def watch_objects(
    cluster: RealCluster, api_version: str, plural: str, kind: str, namespace: str | None,
    predicate: Callable[[list[Obj]], bool],
) -> list[Obj]:  # fmt: skip
    """The objects once `predicate(all of them)` holds, re-checked on every watch event."""
    client = admin_client(cluster, "e2e-watch")
    try:
        return await watch_until(client, api_version, plural, kind, namespace, predicate)
    finally:
        await client.close()


def requests_of(cluster: RealCluster, user: str, since: datetime | None = None) -> list[Obj]:
    """The audit log's records of `user`'s requests (received at or after `since`)."""
    return [
        r for r in cluster.audit_records()
        if r["user"]["username"] == user
        and (since is None or datetime.fromisoformat(r["requestReceivedTimestamp"]) >= since)
    ]  # fmt: skip


async def until_audited(cluster: RealCluster, predicate: Callable[[Obj], bool]) -> Obj:
    """The first audit record matching `predicate`, once kube-apiserver has written it (the
    audit log is the only record of what an API client was answered; polled, bounded)."""
    async with asyncio.timeout(BOUND):
        while True:
            found = [r for r in cluster.audit_records() if predicate(r)]
            if found:
                return found[0]
            await asyncio.sleep(0.2)


def refused(records: list[Obj]) -> list[str]:
    """The requests among `records` that were answered 403."""
    return [
        f"{r['verb']} {r['requestURI']}"
        for r in records
        if (r.get("responseStatus") or {}).get("code") == 403
    ]


@contextlib.asynccontextmanager
async def fresh_namespace(cluster: RealCluster) -> AsyncIterator[str]:
    """A namespace of its own, deleted afterwards (waited for: a later test's kubectl drain
    would otherwise meet its pods, whose evictions a terminating namespace refuses).

    Its pods are force-deleted once the namespace is terminating (no controller can create
    new ones then): kwok keeps a deleted pod for its `sim.kubesim.io/exit-delay`, which the
    namespace controller would otherwise wait out, with its own back-off on top."""
    name = f"t-{secrets.token_hex(4)}"
    kubeconfig = cluster.kubeconfig_path
    await kubectl(kubeconfig, "create", "namespace", name)
    try:
        yield name
    finally:
        await kubectl(kubeconfig, "delete", "namespace", name, "--wait=false", check=False)
        await kubectl(kubeconfig, "delete", "pods", "--all", "-n", name, "--force",
                      "--grace-period=0", "--timeout=90s", check=False)  # fmt: skip
        await kubectl(kubeconfig, "wait", "--for=delete", f"namespace/{name}", "--timeout=90s",
                      check=False)  # fmt: skip


@contextlib.asynccontextmanager
async def own_nodes(
    cluster: RealCluster, names: Sequence[str], key: str, value: str
) -> AsyncIterator[None]:
    """kwok nodes `names`, Ready, labelled `key=value` and tainted with it (NoSchedule), so
    only the pods that select and tolerate it land there; deleted afterwards."""
    client = admin_client(cluster, "own-nodes")
    try:
        for node in names:
            manifest = node_manifest(node, {key: value})
            manifest["spec"] = {"taints": [{"key": key, "value": value, "effect": "NoSchedule"}]}
            await client.request("POST", "/api/v1/nodes", manifest)
        await watch_objects(cluster, "v1", "nodes", "Node", None, lambda items: all(
            any(n["metadata"]["name"] == node and node_ready(n) for n in items)
            for node in names
        ))  # fmt: skip
        yield
    finally:
        await client.close()
        for node in names:
            await kubectl(cluster.kubeconfig_path, "delete", "node", node, "--wait=false",
                          check=False)  # fmt: skip


def node_ready(node: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])  # fmt: skip


EVICTION_RETRY = 1.0  # a drain client's pause before it asks again (kubectl drain's is 5 s)


async def evict_once(client: KubeClient, namespace: str, pod: str) -> int:
    """One Eviction (policy/v1) of `namespace`/`pod`: the API server's HTTP answer (201: the
    pod is being deleted; 429: refused for now; 404: no such pod)."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": pod, "namespace": namespace}}  # fmt: skip
    try:
        await client.create(resource_path("v1", "pods", namespace, pod, "eviction"), body)
    except ApiStatusError as error:
        return error.code
    return 201


async def evict(
    client: KubeClient, namespace: str, pod: str, retried: Sequence[int] = (429,)
) -> list[int]:
    """Evict `namespace`/`pod` as a drain client does: asked again EVICTION_RETRY seconds
    after each answer in `retried` (429: held), until it is let go (201) or gone (404);
    every answer, in order."""
    answers: list[int] = []
    async with asyncio.timeout(BOUND):
        while True:
            answers.append(await evict_once(client, namespace, pod))
            if answers[-1] not in retried:
                assert answers[-1] in (201, 404), f"eviction of {namespace}/{pod}: {answers}"
                return answers
            await asyncio.sleep(EVICTION_RETRY)


# --- the install ---------------------------------------------------------------------------


def overlay(directory: Path, webhook_port: int, base: Path | None = None) -> Path:
    """A kustomization on top of `base` (the product's deploy/) for this loopback cluster
    (see the module doc)."""
    base = product_checkout() / "deploy" if base is None else base
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "kustomization.yaml").write_text(
        textwrap.dedent(f"""\
        apiVersion: kustomize.config.k8s.io/v1beta1
        kind: Kustomization
        resources:
          - {os.path.relpath(base, directory)}
        replicas:
          - name: graceful-drain
            count: 0
        patches:
          - target:
              kind: ValidatingWebhookConfiguration
              name: graceful-drain
            patch: |-
              - op: remove
                path: /webhooks/0/clientConfig/service
              - op: add
                path: /webhooks/0/clientConfig/url
                value: https://127.0.0.1:{webhook_port}/validate-eviction
        """)
    )
    return directory


@dataclass
class Installation:
    """graceful-drain applied to the cluster, with the Service's stand-in."""

    cluster: RealCluster
    service: Backends
    workdir: Path
    # Where and under which name it is installed (the Deployment's, and its ServiceAccount's
    # unless service_account says otherwise): deploy/'s, or a Helm release's.
    namespace: str = NAMESPACE
    name: str = SERVICE_ACCOUNT
    # The controller's ServiceAccount when not the Deployment's name (serviceAccount.name).
    service_account: str = ""

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig_path

    @property
    def account(self) -> str:
        return self.service_account or self.name

    @property
    def controller_user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.account}"

    @property
    def overlay(self) -> Path:
        """The kustomization applied (`overlay(workdir / "overlay", ...)`, conftest.py)."""
        return self.workdir / "overlay"

    async def reapply(self) -> None:
        """`kubectl apply -k` of the install again: what a test changed in it is put back
        (an object it deleted is created again; a field a later apply added is removed)."""
        await kubectl(self.kubeconfig, "apply", "-k", str(self.overlay))

    async def controller_deployment(self) -> Obj:
        return await kubectl_json(
            self.kubeconfig, "get", "deployment", self.name, "-n", self.namespace
        )

    async def service_account_token(self) -> str:
        token = await kubectl(
            self.kubeconfig, "create", "token", self.account, "-n", self.namespace,
            "--duration=2h",
        )  # fmt: skip
        return token.stdout.strip()

    async def service_account_client(self) -> KubeClient:
        """A client holding a token of the controller's ServiceAccount."""
        token = await self.service_account_token()
        return KubeClient(self.cluster.server, token, self.cluster.ca_pem, "policy-check")

    async def service_account_kubeconfig(self, name: str, api: ApiProxy | None = None) -> Path:
        """A kubeconfig of the controller's ServiceAccount, for kube-apiserver or, given `api`,
        for that proxy in front of it."""
        path = self.workdir / f"{name}.kubeconfig"
        server, ca_pem = (self.cluster.server, self.cluster.ca_pem) if api is None else (
            api.url, api.ca_pem)  # fmt: skip
        return write_kubeconfig(
            path, server, ca_pem, await self.service_account_token(), self.controller_user
        )

    async def start_controller(
        self, name: str = "graceful-drain-0", env: Mapping[str, str] | None = None,
        launcher: Launcher | None = None, api: ApiProxy | None = None,
    ) -> ControllerProcess:  # fmt: skip
        """One controller replica as its own process (from the product's sources unless
        `launcher` says otherwise), routed once its /readyz is 200; it talks to
        kube-apiserver through `api` when given."""
        args, container_env, _ports = container_invocation(await self.controller_deployment(), name)
        replica = ControllerProcess(
            name=name,
            args=args,
            env={**container_env, "POD_NAMESPACE": self.namespace, **(env or {})},
            kubeconfig=await self.service_account_kubeconfig(name, api),
            log_path=self.workdir / f"{name}.log",
            service=self.service,
            launcher=launcher or SourceTree(),
        )
        await asyncio.to_thread(replica.start)
        return replica


class Launcher(Protocol):
    """How a `graceful-drain` command line becomes a process: its argv and environment."""

    def argv(self, args: Sequence[str], kubeconfig: Path | None = None) -> list[str]:
        """`graceful-drain ARGS`, with `--kubeconfig` naming `kubeconfig` where it can read it."""
        ...

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """The process's environment, `env` (the container's) included."""
        ...


@dataclass(frozen=True)
class SourceTree:
    """graceful-drain from the product's src/ (`product_source()`), run by the test's own
    interpreter."""

    def argv(self, args: Sequence[str], kubeconfig: Path | None = None) -> list[str]:
        path = [] if kubeconfig is None else ["--kubeconfig", str(kubeconfig)]
        return [sys.executable, "-m", "graceful_drain.cli", *args, *path]

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        merged = {**os.environ, "PYTHONPATH": str(product_source()), **env}
        merged.pop("KUBECONFIG", None)
        return merged


@dataclass
class ControllerProcess:
    name: str
    args: list[str]
    env: dict[str, str]
    kubeconfig: Path
    log_path: Path
    service: Backends
    launcher: Launcher = field(default_factory=SourceTree)
    webhook_port: int = 0
    metrics_port: int = 0
    child: Child | None = None

    def start(self) -> None:
        self.webhook_port, self.metrics_port = free_port(), free_port()
        loopback = [
            "--bind-address", "127.0.0.1",
            "--webhook-port", str(self.webhook_port),
            "--metrics-port", str(self.metrics_port),
            "--self-signed-hosts", "127.0.0.1",
        ]  # fmt: skip
        self.child = Child(
            self.name,
            self.launcher.argv(["controller", *self.args, *loopback], self.kubeconfig),
            self.log_path,
            env=self.launcher.environment(self.env),
        )
        wait_until(f"{self.name} /readyz", self._ready, READY_TIMEOUT, self.child)
        self.service.add(self.webhook_port)

    def _get(self, path: str) -> tuple[int, str]:
        url = f"http://127.0.0.1:{self.metrics_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as error:
            return int(error.code), ""
        except OSError:
            return 0, ""

    def _ready(self) -> bool:
        return self._get("/readyz")[0] == 200

    def exposition(self) -> str:
        """The replica's /metrics page as Prometheus scrapes it."""
        status, text = self._get("/metrics")
        assert status == 200, f"{self.name} /metrics answered {status}"
        return text

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples of `name` on /metrics whose labels include `labels`."""
        _, text = self._get("/metrics")
        wanted = {f'{key}="{value}"' for key, value in labels.items()}
        total = 0.0
        for line in text.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            series, _, value = line.rpartition(" ")
            metric, _, label_text = series.partition("{")
            if metric == name and wanted <= set(label_text.rstrip("}").split(",")):
                total += float(value)
        return total

    def decisions(self, reason: str | None = None, *, allowed: bool) -> float:
        labels = {"allowed": "true" if allowed else "false"}
        if reason is not None:
            labels["reason"] = reason
        return self.metric("graceful_drain_decisions_total", **labels)

    def log_lines(self) -> list[Obj]:
        lines = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                lines.append(record)
        return lines

    def stop(self) -> None:
        self.service.remove(self.webhook_port)
        if self.child is not None:
            self.child.stop()

    def kill(self) -> None:
        """SIGKILL, as an OOM kill or a node loss would end it."""
        self.service.remove(self.webhook_port)
        if self.child is not None:
            self.child.kill()


# --- replicas behind a router -------------------------------------------------------------


@dataclass
class Routed:
    """Controller replicas behind a ReviewRouter (reviewrouter.py): which replica answers which
    eviction is the test's to say."""

    router: ReviewRouter
    replicas: list[ControllerProcess]
    installation: Installation  # the session's, its replicas registering with the router
    env: Mapping[str, str] | None = None
    api: ApiProxy | None = None

    async def start_replica(self, name: str) -> ControllerProcess:
        replica = await self.installation.start_controller(name, env=self.env, api=self.api)
        self.replicas.append(replica)
        return replica


@contextlib.asynccontextmanager
async def routed_replicas(
    installation: Installation, names: Sequence[str], env: Mapping[str, str] | None = None,
    api: ApiProxy | None = None,
) -> AsyncIterator[Routed]:  # fmt: skip
    """Controller replicas `names` (with `env`, talking through `api` when given), started
    together, behind a ReviewRouter that the session's load balancer sends every review to
    while the block runs."""
    admin = admin_client(installation.cluster, "review-router")
    router = ReviewRouter(admin)
    behind = dataclasses.replace(installation, service=router)
    routed = Routed(router, [], behind, env, api)
    try:
        await asyncio.gather(*(routed.start_replica(name) for name in names))
        await router.start()
        installation.service.add(router.port)
        yield routed
    finally:
        installation.service.remove(router.port)
        for replica in routed.replicas:
            replica.stop()
        await router.stop()
        await admin.close()


# --- workloads -----------------------------------------------------------------------------


def web(
    namespace: str, name: str = "web", *, replicas: int = 1, ready_delay: str = "3s",
    never_ready: bool = False,
) -> Obj:  # fmt: skip
    """kubesim's drain test Deployment (maxSurge 1, maxUnavailable 0, a readiness probe,
    preferring node-a), in `namespace`, Ready `ready_delay` after it starts (kwok.yaml reads
    the same annotations as kubesim's kubelet)."""
    manifest = drain_workloads.web(
        name, replicas=replicas, ready_delay=ready_delay, never_ready=never_ready
    )
    manifest["metadata"]["namespace"] = namespace
    return manifest


async def create_ready_web(
    cluster: RealCluster, recorder: AvailabilityRecorder, namespace: str, **options: object
) -> Obj:
    manifest = web(namespace, **options)  # type: ignore[arg-type]
    await kubectl(cluster.kubeconfig_path, "apply", "-f", "-", stdin=json.dumps(manifest))
    replicas = int(manifest["spec"]["replicas"])
    await until(recorder, lambda: recorder.ready("web", namespace) >= replicas)
    return manifest


async def pods(cluster: RealCluster, namespace: str, app: str = "web") -> list[Obj]:
    listed = await kubectl_json(cluster.kubeconfig_path, "get", "pods", "-n", namespace,
                                "-l", f"app={app}")  # fmt: skip
    return list(listed["items"])


async def events(cluster: RealCluster, namespace: str, reason: str) -> list[Obj]:
    listed = await kubectl_json(cluster.kubeconfig_path, "get", "events", "-n", namespace,
                                "--field-selector", f"reason={reason}")  # fmt: skip
    return list(listed["items"])


async def until_events(cluster: RealCluster, namespace: str, reason: str) -> list[Obj]:
    """The events of `reason` once there is one: the controller writes some after the drain
    that caused them has returned (a replica that just took over the Lease reports a timeout
    that passed while no replica led)."""
    async with asyncio.timeout(BOUND):
        while True:
            found = await events(cluster, namespace, reason)
            if found:
                return found
            await asyncio.sleep(0.5)


# --- drains --------------------------------------------------------------------------------

HELD = "(will retry after 5s): admission webhook"  # kubectl drain's line for a refused eviction


async def until(recorder: AvailabilityRecorder, predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(BOUND):
        await recorder.wait_until(predicate)


async def drain(
    cluster: RealCluster, recorder: AvailabilityRecorder, node: str, binary: str = "kubectl"
) -> KubectlRun:
    recorder.mark_drain_started(node, binary)
    try:
        return await kubectl(
            cluster.kubeconfig_path, "drain", node, "--ignore-daemonsets",
            "--delete-emptydir-data", f"--timeout={KUBECTL_DRAIN_TIMEOUT}",
            binary=binary, check=False,
        )  # fmt: skip
    finally:
        recorder.mark("drain-finished", node=node)


async def settle(recorder: AvailabilityRecorder, namespace: str, node: str) -> tuple[float, float]:
    """Until web is Ready again after the drain of `node`: the window to measure."""
    start, _ = recorder.drain_window(node)
    await until(recorder, lambda: recorder.ready("web", namespace) >= 1)
    return start, recorder.clock()


async def start_cold_controller(
    installation: Installation, api: ApiProxy, name: str = "graceful-drain-cold"
) -> ControllerProcess:
    """A controller replica talking through `api`, routed as soon as its webhook port
    answers rather than once /readyz is 200: its caches cannot sync while `api` holds their
    lists back, and it serves the webhook cold."""
    args, env, _ = container_invocation(await installation.controller_deployment(), name)
    replica = ControllerProcess(
        name=name, args=args, env={**env, "POD_NAMESPACE": installation.namespace},
        kubeconfig=await installation.service_account_kubeconfig(name, api),
        log_path=installation.workdir / f"{name}.log", service=installation.service,
    )  # fmt: skip

    def serving() -> bool:
        if replica._get("/healthz")[0] != 200:
            return False
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", replica.webhook_port), timeout=1),
        ):
            return True
        return False

    replica._ready = serving  # type: ignore[method-assign]
    await asyncio.to_thread(replica.start)
    return replica
