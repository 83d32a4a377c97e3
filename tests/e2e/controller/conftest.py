"""The controller app against kubesim: certificates, a running app, an HTTPS client, workloads."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from graceful_drain.controller.app import ControllerApp
from graceful_drain.controller.serving.webhook import WEBHOOK_PATH
from graceful_drain.controller.settings import ControllerConfig
from graceful_drain.kube.backoff import Backoff
from kubesim.client import KubeClient
from kubesim.pki import CertificateAuthority
from kubesim.sim import KubeSim

DEADLINE = 15.0  # bound on every wait for the controller to catch up


@dataclass
class WebhookCerts:
    ca: CertificateAuthority
    cert_file: Path
    key_file: Path

    def issue(self, common_name: str) -> None:
        """Write a new serving certificate (for 127.0.0.1) over the files."""
        pair = self.ca.issue_server(["127.0.0.1", "localhost"], common_name=common_name)
        self.cert_file.write_bytes(pair.cert_pem)
        self.key_file.write_bytes(pair.key_pem)

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=self.ca.cert_pem.decode())


@pytest.fixture
def certs(tmp_path: Path) -> WebhookCerts:
    issued = WebhookCerts(
        CertificateAuthority("webhook-test-ca"), tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    issued.issue("graceful-drain-1")
    return issued


def controller_config(sim: KubeSim, certs: WebhookCerts, **changes: Any) -> ControllerConfig:
    config = ControllerConfig(
        bind_address="127.0.0.1",
        webhook_port=0,
        metrics_port=0,
        tls_cert_file=certs.cert_file,
        tls_key_file=certs.key_file,
        kubeconfig=sim.kubeconfig_path,
    )
    return replace(config, **changes)


def quick_backoff() -> Backoff:
    return Backoff(0.02, 0.2)


@asynccontextmanager
async def running_controller(
    sim: KubeSim,
    certs: WebhookCerts,
    *,
    app_options: dict[str, Any] | None = None,
    **changes: Any,
) -> AsyncIterator[ControllerApp]:
    """`changes` go to the ControllerConfig, `app_options` to ControllerApp itself."""
    app = ControllerApp(controller_config(sim, certs, **changes), cache_backoff=quick_backoff,
                        **(app_options or {}))  # fmt: skip
    await app.start()
    try:
        yield app
    finally:
        await app.stop()


@pytest.fixture
async def https(certs: WebhookCerts) -> AsyncIterator[aiohttp.ClientSession]:
    connector = aiohttp.TCPConnector(ssl=certs.client_context(), force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        yield session


async def post_review(
    session: aiohttp.ClientSession, app: ControllerApp, body: bytes | dict[str, Any]
) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    url = f"https://127.0.0.1:{app.webhook_site.port}{WEBHOOK_PATH}"
    async with session.post(url, data=data, headers={"Content-Type": "application/json"}) as resp:
        return resp.status, await resp.json()


async def get_health(session: aiohttp.ClientSession, app: ControllerApp, path: str) -> int:
    async with session.get(f"http://127.0.0.1:{app.health_site.port}{path}") as resp:
        return resp.status


# --- workloads: created object by object (no Deployment controller runs in these tests) -------


@dataclass(frozen=True)
class Workload:
    namespace: str
    deployment: dict[str, Any]
    replicaset: dict[str, Any] | None
    pod: dict[str, Any]

    @property
    def pod_name(self) -> str:
        return str(self.pod["metadata"]["name"])


def _owner(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True,
    }  # fmt: skip


POD_SPEC = {"containers": [{"name": "app", "image": "registry.example/app:1"}]}


def ensure_namespace(sim: KubeSim, name: str) -> None:
    if sim.get("v1", "Namespace", name) is None:
        sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


async def create_workload(
    sim: KubeSim,
    raw: KubeClient,
    name: str,
    *,
    namespace: str = "shop",
    replicas: int = 1,
    ready_replicas: int = 1,
    pod_ready: bool = True,
) -> Workload:
    ensure_namespace(sim, namespace)
    labels = {"app": name}
    template = {"metadata": {"labels": labels}, "spec": POD_SPEC}
    deployment = sim.create({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": template,
                 "strategy": {"type": "RollingUpdate",
                              "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}},
    })  # fmt: skip
    deployment = await raw.replace(
        f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status",
        {**deployment, "status": {
            "observedGeneration": 1, "replicas": replicas, "updatedReplicas": replicas,
            "readyReplicas": ready_replicas, "availableReplicas": ready_replicas,
        }},
    )  # fmt: skip
    replicaset = sim.create({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": f"{name}-5d9", "namespace": namespace,
                     "ownerReferences": [_owner(deployment)]},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": template},
    })  # fmt: skip
    pod = await create_pod(sim, raw, f"{name}-5d9-abcde", namespace, owner=replicaset,
                           ready=pod_ready, labels=labels)  # fmt: skip
    return Workload(namespace, deployment, replicaset, pod)


async def create_pod(
    sim: KubeSim,
    raw: KubeClient,
    name: str,
    namespace: str,
    *,
    owner: dict[str, Any] | None = None,
    ready: bool = True,
    labels: dict[str, str] | None = None,
    node: str = "node-a",
) -> dict[str, Any]:
    ensure_namespace(sim, namespace)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner is not None:
        metadata["ownerReferences"] = [_owner(owner)]
    pod = sim.create({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                      "spec": {**POD_SPEC, "nodeName": node}})  # fmt: skip
    status = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    return await raw.replace(
        f"/api/v1/namespaces/{namespace}/pods/{name}/status", {**pod, "status": status}
    )


# Karpenter's NodeClaim, as far as the controller reads it (its CRD is Karpenter's; the
# schema here keeps whatever is written).
NODECLAIM_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "nodeclaims.karpenter.sh"},
    "spec": {
        "group": "karpenter.sh", "scope": "Cluster",
        "names": {"plural": "nodeclaims", "singular": "nodeclaim", "kind": "NodeClaim",
                  "listKind": "NodeClaimList"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}  # fmt: skip
