"""Real kubectl request bodies through kubesim's body decoder.

kubectl's typed clients send `application/vnd.kubernetes.protobuf` from 1.32 on and JSON
before: each command runs under kubectl 1.31, 1.32 and 1.33, and the protobuf bodies must
decode to exactly the object 1.31 sends as JSON.

A test-only aiohttp middleware records every raw request body; the server decodes the
same bodies through `decode_body`, so each request also has to work end to end.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kubesim.apiserver.protobuf.decode import PROTOBUF_MEDIA_TYPE, decode_body
from kubesim.sim import KubeSim

pytestmark = pytest.mark.e2e

KUBECTL_TIMEOUT = 60


@dataclass(frozen=True, slots=True)
class Recorded:
    method: str
    path: str
    content_type: str
    body: bytes


@dataclass
class Cluster:
    sim: KubeSim
    requests: list[Recorded]
    cache_dir: Path

    @property
    def create_media_type(self) -> str:
        """kubectl's typed clients send protobuf from 1.32 on, JSON before."""
        minor = self.sim.server.minor_version
        return PROTOBUF_MEDIA_TYPE if minor >= 32 else "application/json"

    async def kubectl(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(self.sim.kubeconfig_path)}
        command = ["kubectl", f"--cache-dir={self.cache_dir}", *args]

        def run() -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                command, capture_output=True, text=True, env=env, timeout=KUBECTL_TIMEOUT
            )

        result = await asyncio.to_thread(run)
        assert result.returncode == 0, f"{command}: {result.stdout}{result.stderr}"
        return result

    def body_of(self, method: str, path: str, media_type: str | None = None) -> Any:
        """The decoded body of the one request kubectl sent to (method, path)."""
        sent = [r for r in self.requests if (r.method, r.path) == (method, path)]
        assert len(sent) == 1, [(r.method, r.path) for r in self.requests]
        assert sent[0].content_type == (media_type or self.create_media_type)
        return decode_body(sent[0].body, sent[0].content_type)


@pytest.fixture
async def cluster(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> AsyncIterator[Cluster]:
    """kubesim with a body recorder; `kubectl` (a dispatcher) runs the release matching the
    server's minor version, which an indirect parameter picks (default 32)."""
    minor = getattr(request, "param", 32)
    requests: list[Recorded] = []

    @web.middleware
    async def record(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        raw = await request.read()  # aiohttp keeps it for the handler
        if raw:
            content_type = request.headers.get("Content-Type", "")
            requests.append(Recorded(request.method, request.path, content_type, raw))
        return await handler(request)

    sim = KubeSim(server_minor_version=minor)
    build_app = sim.server.app

    def app_with_recorder() -> web.Application:
        app = build_app()
        app.middlewares.append(record)
        return app

    monkeypatch.setattr(sim.server, "app", app_with_recorder)
    async with sim:
        yield Cluster(sim, requests, tmp_path / "kubectl-cache")


NEW_META = {"creationTimestamp": None}


def kubectl_releases(*minors: int) -> pytest.MarkDecorator:
    return pytest.mark.parametrize(
        "cluster", minors, indirect=True, ids=[f"kubectl-1.{m}" for m in minors]
    )


# The same command's body, decoded from 1.32/1.33 protobuf, equals 1.31's JSON.
ALL_RELEASES = kubectl_releases(31, 32, 33)


@ALL_RELEASES
async def test_create_configmap(cluster: Cluster) -> None:
    await cluster.kubectl("create", "configmap", "x", "--from-literal=a=b")
    assert cluster.body_of("POST", "/api/v1/namespaces/default/configmaps") == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x", **NEW_META},
        "data": {"a": "b"},
    }
    stored = cluster.sim.get("v1", "ConfigMap", "x", "default")
    assert stored is not None and stored["data"] == {"a": "b"}


@ALL_RELEASES
async def test_create_secret(cluster: Cluster) -> None:
    await cluster.kubectl("create", "secret", "generic", "s", "--from-literal=k=v")
    assert cluster.body_of("POST", "/api/v1/namespaces/default/secrets") == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", **NEW_META},
        "data": {"k": "dg=="},  # base64 of "v", as in JSON
    }
    stored = cluster.sim.get("v1", "Secret", "s", "default")
    assert stored is not None and stored["data"] == {"k": "dg=="}


@ALL_RELEASES
async def test_auth_can_i(cluster: Cluster) -> None:
    result = await cluster.kubectl("auth", "can-i", "create", "pods/eviction", "-n", "default")
    assert result.stdout.strip() == "yes"
    # kubectl reads "pods/eviction" as resource/name; a subresource needs --subresource.
    assert cluster.body_of("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews") == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "metadata": NEW_META,
        "spec": {
            "resourceAttributes": {
                "namespace": "default",
                "verb": "create",
                "resource": "pods",
                "name": "eviction",
            }
        },
        "status": {"allowed": False},
    }


@ALL_RELEASES
async def test_auth_can_i_subresource(cluster: Cluster) -> None:
    await cluster.kubectl("auth", "can-i", "create", "pods", "--subresource=eviction", "-A")
    review = cluster.body_of("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
    assert review["spec"] == {
        "resourceAttributes": {"verb": "create", "resource": "pods", "subresource": "eviction"}
    }


@ALL_RELEASES
async def test_create_namespace(cluster: Cluster) -> None:
    await cluster.kubectl("create", "namespace", "n")
    assert cluster.body_of("POST", "/api/v1/namespaces") == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "n", **NEW_META},
        "spec": {},
        "status": {},
    }
    assert cluster.sim.get("v1", "Namespace", "n") is not None


@ALL_RELEASES
async def test_create_serviceaccount_and_token(cluster: Cluster) -> None:
    await cluster.kubectl("create", "serviceaccount", "sa")
    assert cluster.body_of("POST", "/api/v1/namespaces/default/serviceaccounts") == {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "sa", **NEW_META},
    }
    result = await cluster.kubectl("create", "token", "sa", "--duration=10m")
    assert result.stdout.strip()
    assert cluster.body_of("POST", "/api/v1/namespaces/default/serviceaccounts/sa/token") == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "metadata": NEW_META,
        "spec": {"audiences": None, "expirationSeconds": 600, "boundObjectRef": None},
        "status": {"token": "", "expirationTimestamp": None},
    }


@ALL_RELEASES
async def test_auth_whoami(cluster: Cluster) -> None:
    result = await cluster.kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    assert result.stdout == "kubernetes-admin"
    assert cluster.body_of("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews") == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "SelfSubjectReview",
        "metadata": NEW_META,
        "status": {"userInfo": {}},
    }


@ALL_RELEASES
async def test_create_poddisruptionbudget(cluster: Cluster) -> None:
    await cluster.kubectl("create", "pdb", "p", "--selector=app=web", "--min-available=50%")
    path = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
    assert cluster.body_of("POST", path) == {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "p", **NEW_META},
        "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                   "expectedPods": 0},
    }  # fmt: skip


@ALL_RELEASES
async def test_create_role_and_binding(cluster: Cluster) -> None:
    await cluster.kubectl("create", "role", "r", "--verb=get,list", "--resource=pods")
    await cluster.kubectl("create", "rolebinding", "rb", "--role=r", "--serviceaccount=default:sa")
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/default"
    assert cluster.body_of("POST", f"{rbac}/roles") == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "r", **NEW_META},
        "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}],
    }
    assert cluster.body_of("POST", f"{rbac}/rolebindings") == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "rb", **NEW_META},
        "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "default"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
    }


# --- drain: evictions and DELETEs with DeleteOptions bodies ---


@pytest.fixture
def drainable(cluster: Cluster) -> Cluster:
    """A cordoned node holding one bare pod that dies at once (grace period 0)."""
    sim = cluster.sim
    # Already unschedulable, so kubectl drain skips its cordon PATCH.
    sim.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                "spec": {"unschedulable": True}})  # fmt: skip
    sim.create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
        "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": "busybox"}]},
    })  # fmt: skip
    return cluster


async def test_drain_eviction_body_reaches_the_handler_decoded(drainable: Cluster) -> None:
    # kubectl 1.27-1.33 all POST the Eviction as JSON; clients configured for protobuf send
    # it as protobuf, an encoding the unit tests cover.
    sim = drainable.sim
    await drainable.kubectl("drain", "n1", "--force", "--timeout=60s")
    expected = {
        "kind": "Eviction",
        "apiVersion": "policy/v1",
        "metadata": {"name": "p", "namespace": "default", **NEW_META},
        "deleteOptions": {},
    }
    path = "/api/v1/namespaces/default/pods/p/eviction"
    assert drainable.body_of("POST", path, "application/json") == expected
    assert sim.get("v1", "Pod", "p", "default") is None


@ALL_RELEASES
async def test_drain_without_eviction_deletes_with_delete_options(drainable: Cluster) -> None:
    await drainable.kubectl(
        "drain", "n1", "--force", "--disable-eviction", "--grace-period=0", "--timeout=60s"
    )
    assert drainable.body_of("DELETE", "/api/v1/namespaces/default/pods/p") == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "gracePeriodSeconds": 0,
    }
    assert drainable.sim.get("v1", "Pod", "p", "default") is None


# --- the newcomer's first commands (README's kubesim serve session): workloads, Services ---


def pod_template(container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"metadata": {**NEW_META, **spec.pop("metadata", {})},
            "spec": {"containers": [{**container, "resources": {}}], **spec}}  # fmt: skip


@ALL_RELEASES
async def test_create_deployment(cluster: Cluster) -> None:
    await cluster.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=2")
    assert cluster.body_of("POST", "/apis/apps/v1/namespaces/default/deployments") == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}, **NEW_META},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": pod_template({"name": "nginx", "image": "nginx"},
                                     metadata={"labels": {"app": "web"}}),
            "strategy": {},
        },
        "status": {},
    }  # fmt: skip
    assert cluster.sim.get("apps/v1", "Deployment", "web", "default") is not None


@ALL_RELEASES
async def test_create_job(cluster: Cluster) -> None:
    await cluster.kubectl("create", "job", "hello", "--image=busybox", "--", "echo", "hi")
    assert cluster.body_of("POST", "/apis/batch/v1/namespaces/default/jobs") == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "hello", **NEW_META},
        "spec": {
            "template": pod_template(
                {"name": "hello", "image": "busybox", "command": ["echo", "hi"]},
                restartPolicy="Never",
            )
        },
        "status": {},
    }
    assert cluster.sim.get("batch/v1", "Job", "hello", "default") is not None


@ALL_RELEASES
async def test_create_service(cluster: Cluster) -> None:
    await cluster.kubectl("create", "service", "clusterip", "web", "--tcp=80:8080")
    assert cluster.body_of("POST", "/api/v1/namespaces/default/services") == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "labels": {"app": "web"}, **NEW_META},
        "spec": {
            # targetPort: an IntOrString holding an int
            "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
            "selector": {"app": "web"},
            "type": "ClusterIP",
        },
        "status": {"loadBalancer": {}},
    }


@ALL_RELEASES
async def test_create_priorityclass(cluster: Cluster) -> None:
    await cluster.kubectl("create", "priorityclass", "high", "--value=1000")
    assert cluster.body_of("POST", "/apis/scheduling.k8s.io/v1/priorityclasses") == {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high", **NEW_META},
        "value": 1000,
        "preemptionPolicy": "PreemptLowerPriority",
    }
