"""`KubeSim`: the whole in-process control plane behind one async context manager.

    async with KubeSim() as sim:
        ...  # sim.kubeconfig_path, sim.url, sim.admin_token, sim.audit, sim.faults,
             # sim.webhook_services (webhook Services), sim.admission.calls (webhook calls)

It serves HTTPS on a loopback port with a generated CA and bearer tokens. Its own in-process
components (controllers, scheduler, kubelets, scenario and drain clients: `sim.local_client`)
reach the same server, with the same authentication, authorization, admission, audit and
watches, over plain HTTP on a Unix socket in its private temporary folder (mode 0700, removed
on stop; one of its own under /tmp when TMPDIR is too deep for a socket's path): TLS between
two ends of one process only cost CPU. External clients never see it.
Not a production API server: state lives in memory and dies with the process.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import tempfile
from pathlib import Path
from typing import cast

from aiohttp import web

from kubesim import python_gc
from kubesim.apiserver.admission.webhooks import ServiceResolver, ValidatingWebhookDispatcher
from kubesim.apiserver.openapi.v3 import OpenApi
from kubesim.lifecycle import Lifecycle
from kubesim.types import Obj

from .apiserver.audit import AuditLog
from .apiserver.auth import TokenAuthenticator, UserInfo, service_account_user
from .apiserver.authz import StoreAuthorizer
from .apiserver.crds import CustomResources
from .apiserver.eviction import EvictionHandler
from .apiserver.faults import FaultInjector
from .apiserver.garbage_collector import GarbageCollector
from .apiserver.registry import Registry
from .apiserver.resources import ResourceRegistry
from .apiserver.server import ApiServer
from .apiserver.store import ObjectStore
from .bootstrap import SYSTEM_NAMESPACES, kubernetes_service, namespace, rbac_objects
from .client import KubeClient
from .kubeconfig import write_kubeconfig
from .pki import CertificateAuthority

LOCAL_SOCKET = "apiserver.sock"  # in the private temporary folder: see local_client
MAX_SOCKET_PATH = 107  # bytes: sun_path holds 108 on Linux, its terminating NUL included
ADMIN = UserInfo("kubernetes-admin", ("system:masters", "kubeadm:cluster-admins"))


class KubeSim(Lifecycle):
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        server_minor_version: int = 32,
        seed: int = 0,
        kubeconfig_path: Path | None = None,
        bookmark_interval: float = 5.0,
        history_limit: int = 10_000,
        rbac: bool = True,
        kubernetes_service: bool = False,
    ) -> None:
        """`kubernetes_service`: keep `default/kubernetes` (its Service, Endpoints and
        EndpointSlice) pointing at the serving address, as kube-apiserver does; `kubesim
        serve` has it, library users (tests) opt in."""
        self.host = host
        self.port = port
        self.resources = ResourceRegistry()
        self.store = ObjectStore(history_limit=history_limit)
        self.registry = Registry(self.store, self.resources, seed=seed)
        self.authenticator = TokenAuthenticator()
        self.audit = AuditLog()
        self.faults = FaultInjector(seed)
        self.ca = CertificateAuthority()
        self.server = ApiServer(
            self.registry, self.authenticator, self.audit, self.faults,
            server_minor_version=server_minor_version, bookmark_interval=bookmark_interval,
        )  # fmt: skip
        self.server.openapi = OpenApi(self.resources)
        self.custom_resources = CustomResources(self.store, self.resources, self._rebuild_openapi)
        # Where webhook Services listen: sim.webhook_services.register(ns, name, port, host, port)
        self.webhook_services = ServiceResolver()
        self.admission = ValidatingWebhookDispatcher(self.registry, self.webhook_services)
        self.server.admitters.append(self.admission)
        self.eviction = EvictionHandler(self.server)
        self.eviction.register()
        self.gc = GarbageCollector(self.registry)
        if rbac:
            authorizer = StoreAuthorizer(self.store)
            self.server.authorizer = authorizer.authorize
            self.server.rules_resolver = authorizer.rules_for
        self.admin_token = self.authenticator.add(ADMIN)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._socket_tmp: tempfile.TemporaryDirectory[str] | None = None
        self._kubeconfig_path = kubeconfig_path
        self._runner: web.AppRunner | None = None
        self._local_runner: web.ServerRunner | None = None
        self._local_socket: str | None = None
        self._holds_gc = False  # python_gc: the collector is tuned while this runs
        self._kubernetes_service = kubernetes_service
        self._bootstrap()

    def _rebuild_openapi(self) -> None:
        self.server.openapi = OpenApi(self.resources)

    # lifecycle

    async def start(self) -> KubeSim:
        serving = self.ca.issue_server([self.host, "localhost", "kubernetes.default.svc"])
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kubesim-")
        tmp = Path(self._tmp.name)
        (tmp / "tls.crt").write_bytes(serving.cert_pem)
        (tmp / "tls.key").write_bytes(serving.key_pem)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tmp / "tls.crt", tmp / "tls.key")
        self._runner = web.AppRunner(self.server.app(), access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=context)
        await site.start()
        server = cast(asyncio.Server, site._server)
        self.port = server.sockets[0].getsockname()[1]
        self.server.address = f"{self.host}:{self.port}"
        self._local_socket = str(self._socket_folder(tmp) / LOCAL_SOCKET)
        self._local_runner = web.ServerRunner(self.server.local_server(), shutdown_timeout=0.5)
        await self._local_runner.setup()
        await web.UnixSite(self._local_runner, self._local_socket).start()
        self.gc.start()
        if self._kubernetes_service:
            self._keep_kubernetes_service()
        self.write_kubeconfig(self.kubeconfig_path)
        if not self._holds_gc:
            python_gc.hold()
            self._holds_gc = True
        return self

    def _socket_folder(self, tmp: Path) -> Path:
        """The private folder, or, where its path leaves no room for the socket's name within
        the Unix limit (a long TMPDIR), a private folder of its own under /tmp."""
        if len(os.fsencode(tmp / LOCAL_SOCKET)) <= MAX_SOCKET_PATH:
            return tmp
        self._socket_tmp = tempfile.TemporaryDirectory(prefix="kubesim-", dir="/tmp")
        return Path(self._socket_tmp.name)

    async def stop(self) -> None:
        await self.gc.stop()
        await self.admission.close()
        self.store.close_watchers()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._local_runner is not None:
            await self._local_runner.cleanup()
            self._local_runner = None
        for folder in (self._tmp, self._socket_tmp):
            if folder is not None:
                folder.cleanup()
        self._tmp = self._socket_tmp = None
        self._local_socket = None
        if self._holds_gc:
            python_gc.release()
            self._holds_gc = False

    # access

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def ca_pem(self) -> bytes:
        return self.ca.cert_pem

    @property
    def kubeconfig_path(self) -> Path:
        if self._kubeconfig_path is None:
            if self._tmp is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="kubesim-")
            self._kubeconfig_path = Path(self._tmp.name) / "kubeconfig"
        return self._kubeconfig_path

    def write_kubeconfig(self, path: Path, token: str | None = None, user: str = "admin") -> Path:
        return write_kubeconfig(path, self.url, self.ca_pem, token or self.admin_token, user)

    @property
    def local_socket(self) -> Path | None:
        """The private Unix socket kubesim's own components reach it on (while serving)."""
        return None if self._local_socket is None else Path(self._local_socket)

    def local_client(self, token: str, user_agent: str) -> KubeClient:
        """A client for one of kubesim's own in-process components: the same API server,
        authenticated by `token`, over plain HTTP on the private Unix socket (started only)."""
        if self._local_socket is None:
            raise RuntimeError("kubesim is not serving: start it first")
        return KubeClient(
            "http://localhost", token, None, user_agent, unix_socket=self._local_socket
        )

    def service_account_token(self, namespace: str, name: str) -> str:
        """A bearer token for a ServiceAccount, as a TokenRequest would hand out."""
        sa = self.store.get(("", "serviceaccounts"), namespace, name)
        uid = sa["metadata"].get("uid", "") if sa else ""
        return self.authenticator.add(service_account_user(namespace, name, uid))

    def user_token(self, username: str, groups: tuple[str, ...] = ()) -> str:
        return self.authenticator.add(UserInfo(username, groups))

    def create(self, obj: Obj) -> Obj:
        """Create an object directly (setup and scenarios), with full defaulting/validation."""
        group, _, _ = obj.get("apiVersion", "").rpartition("/")
        rt = self.resources.by_kind(group, obj.get("kind", ""))
        if rt is None:
            raise ValueError(f"kubesim does not serve {obj.get('apiVersion')} {obj.get('kind')}")
        ns = obj.get("metadata", {}).get("namespace", "default") if rt.namespaced else ""
        prepared = self.registry.prepare_create(rt, ns, obj)
        return self.registry.commit_create(rt, prepared)

    def get(self, api_version: str, kind: str, name: str, namespace: str = "") -> Obj | None:
        group, _, _ = api_version.rpartition("/")
        rt = self.resources.by_kind(group, kind)
        if rt is None:
            return None
        return self.registry.find(rt, namespace if rt.namespaced else "", name)

    def _keep_kubernetes_service(self) -> None:
        for obj in kubernetes_service(self.host, self.port):
            existing = self.get(obj["apiVersion"], obj["kind"], "kubernetes", "default")
            if existing is None:
                self.create(obj)

    def _bootstrap(self) -> None:
        for name in SYSTEM_NAMESPACES:
            self.create(namespace(name))
        for obj in rbac_objects():
            self.create(obj)
