"""kubesim's private Unix socket: its own components' plain-HTTP way to its API server.

The same server answers there as on HTTPS, with every server-side behaviour: bearer-token
authentication, RBAC authorization, the audit log, watches. External clients keep HTTPS
(the kubeconfig names the TLS port); the socket lives in kubesim's private 0700 folder and
is gone once kubesim stops.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import tempfile
from pathlib import Path

import aiohttp
import pytest
import yaml

from kubesim.client import ApiStatusError, KubeClient, resource_path
from kubesim.cluster.cluster import Cluster
from kubesim.sim import MAX_SOCKET_PATH, KubeSim
from kubesim.watchlog import watch_until
from tests.e2e.controller.deployments import NS, deployment_manifest

pytestmark = pytest.mark.e2e


async def test_a_temporary_folder_too_deep_for_a_socket_puts_it_in_a_private_one_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    async with KubeSim() as sim:
        path = sim.local_socket
        assert path is not None
        assert len(os.fsencode(path)) <= MAX_SOCKET_PATH
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert sim.kubeconfig_path.is_relative_to(deep)  # the rest stays where TMPDIR says
        client = sim.local_client(sim.admin_token, "probe")
        try:
            namespaces = await client.request("GET", "/api/v1/namespaces")
        finally:
            await client.close()
        assert any(n["metadata"]["name"] == "default" for n in namespaces["items"])
    assert not path.parent.exists()


async def test_the_socket_is_private_and_removed_on_stop() -> None:
    async with KubeSim() as sim:
        path = sim.local_socket
        assert path is not None
        assert stat.S_ISSOCK(path.stat().st_mode)
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        kubeconfig = yaml.safe_load(sim.kubeconfig_path.read_text())
        assert kubeconfig["clusters"][0]["cluster"]["server"] == sim.url
        assert sim.url.startswith("https://127.0.0.1:")
    assert not path.exists()
    assert not path.parent.exists()
    with pytest.raises(RuntimeError, match="not serving"):
        sim.local_client(sim.admin_token, "probe")


async def test_the_socket_authenticates_and_authorizes_like_https(sim: KubeSim) -> None:
    nobody = sim.local_client("not-a-token", "probe")
    reader = sim.local_client(sim.service_account_token(NS, "nobody"), "probe")
    try:
        with pytest.raises(ApiStatusError) as unauthorized:
            await nobody.get(resource_path("v1", "pods", NS))
        assert unauthorized.value.code == 401
        with pytest.raises(ApiStatusError) as forbidden:
            await reader.get(resource_path("v1", "secrets", NS))
        assert forbidden.value.code == 403
    finally:
        await nobody.close()
        await reader.close()
    users = [(r.user, r.code) for r in sim.audit.records() if r.resource in ("pods", "secrets")]
    assert ("", 401) in users
    assert (f"system:serviceaccount:{NS}:nobody", 403) in users


async def test_plain_http_is_not_served_on_the_tls_port(sim: KubeSim) -> None:
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientError):
            await session.get(f"http://127.0.0.1:{sim.port}/api")


async def test_components_roll_out_over_the_socket_audited_under_their_identities(
    sim: KubeSim,
) -> None:
    """A Deployment rolls out with every component on the socket (no kubelet here: the
    pod is only created and scheduled), each request audited with its user and agent, and
    an external HTTPS client watches the same changes."""
    admin = KubeClient(sim.url, sim.admin_token, sim.ca_pem, user_agent="external")
    async with Cluster(sim, controllers=["deployment", "replicaset", "scheduler"],
                       nodes=["node-a"]):  # fmt: skip
        try:
            await admin.create(resource_path("apps/v1", "deployments", NS), deployment_manifest())
            pods = await watch_until(
                admin, "v1", "pods", "Pod", NS,
                lambda pods: any((p.get("spec") or {}).get("nodeName") for p in pods),
                bound=30.0,
            )  # fmt: skip
        finally:
            await admin.close()
    assert pods[0]["spec"]["nodeName"] == "node-a"
    records = sim.audit.records()
    by_user = {(r.user, r.verb, r.resource, r.subresource) for r in records if r.code < 300}
    assert ("system:kube-controller-manager", "create", "replicasets", "") in by_user
    assert ("system:kube-controller-manager", "create", "pods", "") in by_user
    assert ("system:kube-controller-manager", "list", "pods", "") in by_user
    assert ("system:kube-scheduler", "create", "pods", "binding") in by_user
    assert ("system:node:node-a", "update", "nodes", "status") in by_user
    agents = {r.user_agent for r in records if r.user == "system:kube-controller-manager"}
    assert any(agent.endswith(" deployment") for agent in agents)
    assert any(r.user == "kubernetes-admin" and r.user_agent == "external" for r in records)


async def test_a_watch_over_the_socket_sees_writes_made_over_https(sim: KubeSim) -> None:
    admin = KubeClient(sim.url, sim.admin_token, sim.ca_pem)
    local = sim.local_client(sim.admin_token, "local-watch")
    try:
        listed = await local.get(resource_path("v1", "configmaps", NS))
        version = listed["metadata"]["resourceVersion"]
        events: list[tuple[str, str]] = []

        async def watch() -> None:
            path = resource_path("v1", "configmaps", NS)
            async for event in local.watch(path, version, timeout_seconds=30):
                if event["type"] != "BOOKMARK":
                    events.append((event["type"], event["object"]["metadata"]["name"]))
                if len(events) == 2:
                    return

        watching = asyncio.create_task(watch())
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one"}}
        await admin.create(resource_path("v1", "configmaps", NS), body)
        await admin.delete(resource_path("v1", "configmaps", NS, "one"))
        await asyncio.wait_for(watching, 30)
        assert events == [("ADDED", "one"), ("DELETED", "one")]
    finally:
        await admin.close()
        await local.close()


async def test_the_socket_answers_as_https_does(sim: KubeSim) -> None:
    """Same status, body and Cache-Control on both ways in, for an object, a missing one, a
    discovery document and a watch."""
    https = KubeClient(sim.url, sim.admin_token, sim.ca_pem)
    local = sim.local_client(sim.admin_token, "probe")
    paths = ["/api/v1/namespaces/default", "/api/v1/namespaces/nope", "/apis",
             "/api/v1/namespaces?watch=true&timeoutSeconds=0"]  # fmt: skip
    try:
        for path in paths:
            answers = []
            for client in (https, local):
                async with client.session.get(client.server + path) as response:
                    answers.append((response.status, response.headers.get("Cache-Control"),
                                    response.headers.get("Content-Type"),
                                    await response.read()))  # fmt: skip
            assert answers[0] == answers[1], path
            assert answers[0][1] == "no-cache, private"
    finally:
        await https.close()
        await local.close()


async def test_neither_way_in_writes_an_access_log_line(
    sim: KubeSim, caplog: pytest.LogCaptureFixture
) -> None:
    """kubesim serves HTTPS without aiohttp's access log; its own components' requests on the
    socket are no different (a process logging at info, as the controller's does by default,
    would otherwise get a line for every request its kubesim serves itself)."""
    caplog.set_level(logging.INFO, logger="aiohttp.access")
    https = KubeClient(sim.url, sim.admin_token, sim.ca_pem)
    local = sim.local_client(sim.admin_token, "probe")
    try:
        for client in (https, local):
            await client.get(resource_path("v1", "namespaces"))
    finally:
        await https.close()
        await local.close()
    assert [r.getMessage() for r in caplog.records if r.name == "aiohttp.access"] == []
