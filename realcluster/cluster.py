"""A real Kubernetes control plane on loopback: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, and kwok for the nodes.

    with RealCluster(workdir, ensure_built(), nodes=["node-a", "node-b"]) as cluster:
        cluster.kubeconfig_path    # admin (system:masters), for kubectl and every client
        cluster.audit_records()    # the API server's audit log, one dict per request

Everything listens on 127.0.0.1 on free ports. Identities are static tokens: the admin,
kube-controller-manager and kube-scheduler (the users their bootstrap RBAC roles name;
the controller manager runs each controller under its own ServiceAccount, as kubeadm sets
it up) and kwok. Pods run on kwok nodes; `kwok.yaml` says how the `sim.kubesim.io/*`
annotations delay their start, readiness and exit, as kubesim's simulated kubelet does.
"""

from __future__ import annotations

import base64
import json
import secrets
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from realcluster.binaries import HERE
from realcluster.kubeconfig import write_kubeconfig
from realcluster.pki import ClusterCA
from realcluster.processes import Child

Obj = dict[str, Any]

START_TIMEOUT = 120.0  # a cold kube-apiserver on a loaded 2-core machine takes ~10-30 s
SERVICE_CIDR = "10.0.0.0/24"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
NODE_CAPACITY = {"cpu": "4", "memory": "8Gi", "pods": "110"}


class ClusterError(RuntimeError):
    """A component did not start or the API did not answer as expected."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(what: str, check: Callable[[], bool], timeout: float, *children: Child) -> None:
    """Poll `check` until it holds; fail at once if one of `children` exits."""
    deadline = time.monotonic() + timeout
    while True:
        for child in children:
            if not child.running:
                raise ClusterError(
                    f"{child.name} exited ({child.process.returncode}) while waiting for {what}:"
                    f"\n{child.log_tail()}"
                )
        if check():
            return
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {c.name}\n{c.log_tail(1500)}" for c in children)
            raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}\n{logs}")
        time.sleep(0.2)


def node_manifest(name: str, labels: dict[str, str] | None = None) -> Obj:
    """A kwok-managed Node (kwok heartbeats it and runs the pods bound to it)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                **(labels or {}),
            },
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "status": {"allocatable": dict(NODE_CAPACITY), "capacity": dict(NODE_CAPACITY)},
    }


class RealCluster:
    def __init__(
        self,
        workdir: Path,
        bin_dir: Path,
        nodes: Sequence[str] = ("node-a", "node-b"),
        apiserver_args: Sequence[str] = (),
    ) -> None:
        self.workdir = workdir
        self.bin_dir = bin_dir
        self.node_names = list(nodes)
        self.apiserver_args = list(apiserver_args)
        self.children: dict[str, Child] = {}
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.apiserver_port = free_port()
        self.kwok_port = free_port()
        self.server = f"https://127.0.0.1:{self.apiserver_port}"
        self.admin_token = secrets.token_hex(16)
        self.ca = ClusterCA("realcluster-ca")
        self._ssl = ssl.create_default_context(cadata=self.ca.cert_pem.decode())

    # --- files ------------------------------------------------------------------------------

    @property
    def kubeconfig_path(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def audit_log_path(self) -> Path:
        return self.workdir / "audit.log"

    @property
    def ca_pem(self) -> bytes:
        return self.ca.cert_pem

    def _write_files(self) -> None:
        pki = self.workdir / "pki"
        pki.mkdir(parents=True, exist_ok=True)
        (pki / "ca.crt").write_bytes(self.ca.cert_pem)
        serving = self.ca.issue_serving(
            ["127.0.0.1", "localhost", "kubernetes", "kubernetes.default.svc", "10.0.0.1"],
            common_name="kube-apiserver",
        )
        (pki / "apiserver.crt").write_bytes(serving.cert_pem)
        (pki / "apiserver.key").write_bytes(serving.key_pem)
        sa_key = ec.generate_private_key(ec.SECP256R1())
        (pki / "sa.key").write_bytes(
            sa_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            )
        )
        (pki / "sa.pub").write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        identities = {
            "admin": (self.admin_token, "system:masters"),
            "system:kube-controller-manager": (secrets.token_hex(16), ""),
            "system:kube-scheduler": (secrets.token_hex(16), ""),
            "kwok": (secrets.token_hex(16), "system:masters"),
        }
        lines = []
        for user, (token, groups) in identities.items():
            lines.append(f'{token},{user},uid-{user.replace(":", "-")},"{groups}"')
            file_name = "admin" if user == "admin" else user.rsplit(":", 1)[-1]
            write_kubeconfig(
                self.workdir / f"{file_name}.kubeconfig", self.server, self.ca.cert_pem, token, user
            )
        (pki / "tokens.csv").write_text("\n".join(lines) + "\n")

    # --- components -------------------------------------------------------------------------

    def _start(self, name: str, argv: list[str]) -> Child:
        child = Child(name, argv, self.workdir / f"{name}.log")
        self.children[name] = child
        return child

    def _etcd_argv(self) -> list[str]:
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        return [
            str(self.bin_dir / "etcd"),
            "--name=default",
            f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=default={peer}",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ]

    def _apiserver_argv(self) -> list[str]:
        pki = self.workdir / "pki"
        return [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.apiserver_port}",
            "--endpoint-reconciler-type=none",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--token-auth-file={pki / 'tokens.csv'}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            f"--audit-policy-file={HERE / 'audit-policy.yaml'}",
            f"--audit-log-path={self.audit_log_path}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
            "--audit-log-maxsize=0",
            *self.apiserver_args,
        ]

    def _controller_manager_argv(self) -> list[str]:
        pki = self.workdir / "pki"
        return [
            str(self.bin_dir / "kube-controller-manager"),
            f"--kubeconfig={self.workdir / 'kube-controller-manager.kubeconfig'}",
            "--leader-elect=false",
            "--secure-port=0",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--controllers=*,-csrsigning,-csrapproving,-csrcleaner,-nodeipam",
        ]

    def _scheduler_argv(self) -> list[str]:
        return [
            str(self.bin_dir / "kube-scheduler"),
            f"--kubeconfig={self.workdir / 'kube-scheduler.kubeconfig'}",
            f"--authentication-kubeconfig={self.workdir / 'kube-scheduler.kubeconfig'}",
            f"--authorization-kubeconfig={self.workdir / 'kube-scheduler.kubeconfig'}",
            "--leader-elect=false",
            "--secure-port=0",
        ]

    def _kwok_argv(self) -> list[str]:
        return [
            str(self.bin_dir / "kwok"),
            f"--config={HERE / 'kwok.yaml'}",
            f"--kubeconfig={self.workdir / 'kwok.kubeconfig'}",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            f"--server-address=127.0.0.1:{self.kwok_port}",
            "--node-ip=127.0.0.1",
            "--cidr=10.244.0.1/16",
        ]

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> RealCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_files()
        try:
            etcd = self._start("etcd", self._etcd_argv())
            wait_until("etcd /health", self._etcd_healthy, START_TIMEOUT, etcd)
            self.start_apiserver()
            self._start("kube-controller-manager", self._controller_manager_argv())
            self._start("kube-scheduler", self._scheduler_argv())
            self._start("kwok", self._kwok_argv())
            for name in self.node_names:
                self.request("POST", "/api/v1/nodes", node_manifest(name))
            wait_until("the nodes to be Ready", self._nodes_ready, START_TIMEOUT,
                       *self.children.values())  # fmt: skip
            wait_until("the default ServiceAccount", self._default_service_account,
                       START_TIMEOUT, *self.children.values())  # fmt: skip
        except BaseException:
            self.stop()
            raise
        return self

    def start_apiserver(self) -> None:
        apiserver = self._start("kube-apiserver", self._apiserver_argv())
        wait_until("kube-apiserver /readyz", self._apiserver_ready, START_TIMEOUT, apiserver)

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver (SIGTERM); `start_apiserver` brings it back on the same port."""
        self.children.pop("kube-apiserver").stop()

    def stop(self) -> None:
        for child in reversed(list(self.children.values())):
            child.stop()
        self.children.clear()

    def __enter__(self) -> RealCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # fmt: skip
        self.stop()

    # --- checks -----------------------------------------------------------------------------

    def _etcd_healthy(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.etcd_port}/health"
            with urllib.request.urlopen(url, timeout=2) as response:
                return bool(json.load(response).get("health") == "true")
        except (OSError, ValueError):
            return False

    def _apiserver_ready(self) -> bool:
        try:
            return bool(self.request("GET", "/readyz", raw=True) == b"ok")
        except (OSError, ClusterError):
            return False

    def _nodes_ready(self) -> bool:
        nodes = self.request("GET", "/api/v1/nodes")["items"]
        ready = {
            n["metadata"]["name"]
            for n in nodes
            for c in (n.get("status") or {}).get("conditions") or []
            if c.get("type") == "Ready" and c.get("status") == "True"
        }
        return set(self.node_names) <= ready

    def _default_service_account(self) -> bool:
        try:
            self.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")
        except ClusterError:
            return False
        return True

    # --- API and etcd access (admin) --------------------------------------------------------

    def request(self, method: str, path: str, body: Obj | None = None, *,
                raw: bool = False, content_type: str = "application/json") -> Any:  # fmt: skip
        """One admin request; the decoded JSON (or raw bytes), ClusterError on a non-2xx."""
        request = urllib.request.Request(
            self.server + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.admin_token}",
                     "Content-Type": content_type, "Accept": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, context=self._ssl, timeout=10) as response:
                data = response.read()
        except urllib.error.HTTPError as error:
            raise ClusterError(f"{method} {path}: {error.code} {error.read()[:500]!r}") from error
        return data if raw else json.loads(data)

    def _etcd(self, path: str, body: Obj) -> Obj:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.etcd_port}{path}", method="POST",
            data=json.dumps(body).encode(), headers={"Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as response:
            result: Obj = json.load(response)
            return result

    def etcd_put(self, key: str, value: str) -> int:
        """Write one key straight into etcd (outside the API server's /registry prefix);
        return the new revision."""
        body = {"key": base64.b64encode(key.encode()).decode(),
                "value": base64.b64encode(value.encode()).decode()}  # fmt: skip
        return int(self._etcd("/v3/kv/put", body)["header"]["revision"])

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (as the API server's periodic
        compaction does); return that revision."""
        header = self._etcd("/v3/kv/range", {"key": base64.b64encode(b"\0").decode()})["header"]
        revision = int(header["revision"])
        self._etcd("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def audit_records(self) -> list[Obj]:
        """Every audit event written so far (ResponseComplete and Panic stages)."""
        if not self.audit_log_path.exists():
            return []
        records = []
        for line in self.audit_log_path.read_text().splitlines():
            if line.strip():
                records.append(json.loads(line))
        return records
