"""The shipped RBAC, proven from kube-apiserver's own audit log: the controller's requests
are never refused, and every verb its roles grant is used by some path of the controller."""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kubesim.client import ApiStatusError
from realcluster.cluster import RealCluster
from tests.e2e.controller.rbac_usage import Pair, describe, granted_to

from .apiproxy import ApiProxy, Seen
from .harness import (
    CONTROLLER_USER,
    NAMESPACE,
    SERVICE_ACCOUNT,
    Installation,
    admin_client,
    kubectl,
    kubectl_json,
    pods,
    refused,
    requests_of,
    start_cold_controller,
    watch_objects,
    web,
)

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]

Obj = dict[str, Any]


def used_pairs(records: list[Obj]) -> set[Pair]:
    pairs = set()
    for record in records:
        ref = record.get("objectRef") or {}
        if not ref.get("resource"):
            continue
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        pairs.add((ref.get("apiGroup", ""), resource, record["verb"]))
    return pairs


async def applied_rbac(cluster: RealCluster) -> list[Obj]:
    listed = await kubectl_json(
        cluster.kubeconfig_path, "get", "clusterroles,clusterrolebindings,roles,rolebindings",
        "--all-namespaces",
    )  # fmt: skip
    return list(listed["items"])


async def one_drain(cluster: RealCluster, namespace: str, node: str) -> None:
    drained = await kubectl(cluster.kubeconfig_path, "drain", node, "--ignore-daemonsets",
                            "--timeout=100s", check=False)  # fmt: skip
    assert drained.code == 0, drained.stderr
    await watch_objects(cluster, "apps/v1", "deployments", "Deployment", namespace,
                        lambda ds: ds[0].get("status", {}).get("readyReplicas") == 1)  # fmt: skip
    await kubectl(cluster.kubeconfig_path, "uncordon", node)


async def test_the_controller_uses_exactly_what_its_roles_grant_and_is_never_refused(
    installation: Installation, real_cluster: RealCluster, namespace: str, tmp_path: Path
) -> None:
    admin = real_cluster.kubeconfig_path
    since = datetime.now(UTC)  # the session's other tests make the controller refuse on purpose
    # A first install: no Lease and no certificate Secrets yet (create, a new CA whose
    # caBundle the controller patches in)...
    await kubectl(admin, "delete", "lease", "graceful-drain", "-n", NAMESPACE,
                  "--ignore-not-found")  # fmt: skip
    await kubectl(admin, "delete", "secret", "graceful-drain-webhook-tls",
                  "graceful-drain-webhook-tls-ca", "-n", NAMESPACE,
                  "--ignore-not-found")  # fmt: skip
    first = await installation.start_controller("graceful-drain-0")
    first.stop()
    # ...then a Secret whose content is unusable (update), and a Lease to take over.
    await kubectl(
        admin,
        "patch",
        "secret",
        "graceful-drain-webhook-tls",
        "-n",
        NAMESPACE,
        "--type=json",
        "-p",
        '[{"op": "replace", "path": "/data/tls.crt", "value": "bm90IGEgY2VydA=="}]',
    )
    client = admin_client(real_cluster, "rbac-paths")
    deployment = f"/apis/apps/v1/namespaces/{namespace}/deployments/web"
    edits: list[str] = []

    async def edit_before_the_first_stamp(seen: Seen) -> int | None:
        """Someone edits the Deployment just before the first stamp (the JSON patch that pins
        the uid) lands: kube-apiserver answers it 409 and the webhook reads the Deployment
        live, which is what its `get deployments` is for."""
        if not edits and seen.is_("PATCH", deployment) and b'"/metadata/uid"' in seen.body:
            await client.patch(deployment, {"metadata": {"labels": {"edited": "yes"}}})
            edits.append("edited")
        return None  # relayed: the real server decides

    proxy = await ApiProxy(real_cluster.server, real_cluster.ca_pem).start()
    proxy.rules.append(edit_before_the_first_stamp)
    replicas = [
        await installation.start_controller("graceful-drain-1", api=proxy),
        await installation.start_controller("graceful-drain-2", api=proxy),
    ]
    try:
        manifest = web(namespace, ready_delay="1s")
        await kubectl(admin, "apply", "-f", "-", stdin=json.dumps(manifest))
        await watch_objects(
            real_cluster,
            "apps/v1",
            "deployments",
            "Deployment",
            namespace,
            lambda ds: ds[0].get("status", {}).get("readyReplicas") == 1,
        )
        # Two drains of the same Deployment: the first stamp meets the edit above (409, then
        # the live read); the second GracefulDrainStarted folds into the first Event (patch).
        await one_drain(real_cluster, namespace, "node-a")
        await one_drain(real_cluster, namespace, "node-b")
        # An eviction of a pod no cache holds: the webhook's live GET (then 404, allowed).
        with pytest.raises(ApiStatusError) as missing:
            await client.request(
                "POST", f"/api/v1/namespaces/{namespace}/pods/no-such-pod/eviction",
                {"apiVersion": "policy/v1", "kind": "Eviction",
                 "metadata": {"name": "no-such-pod", "namespace": namespace}},
            )  # fmt: skip
        assert missing.value.code == 404
        # A replica whose ReplicaSet list is held back serves the webhook cold: it reads the
        # evicted pod's ReplicaSet live, which is what its `get replicasets` is for.
        for replica in replicas:
            replica.stop()
        listed = asyncio.Event()

        async def hold_the_replicaset_list(seen: Seen) -> int | None:
            if seen.method == "GET" and not seen.watch and seen.path.endswith("/replicasets"):
                await listed.wait()
            return None

        cold_api = await ApiProxy(real_cluster.server, real_cluster.ca_pem).start()
        cold_api.rules.append(hold_the_replicaset_list)
        cold = await start_cold_controller(installation, cold_api, "graceful-drain-3")
        try:
            [pod] = await pods(real_cluster, namespace)
            name = pod["metadata"]["name"]
            with contextlib.suppress(ApiStatusError):  # held (429) or not: either reads it
                await client.request(
                    "POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
                    {"apiVersion": "policy/v1", "kind": "Eviction",
                     "metadata": {"name": name, "namespace": namespace}},
                )  # fmt: skip
            assert any(s.is_("GET", f"/replicasets/{pod['metadata']['ownerReferences'][0]['name']}")
                       for s in cold_api.seen)  # fmt: skip
        finally:
            listed.set()
            cold.stop()
            await cold_api.stop()
    finally:
        for replica in replicas:
            replica.stop()
        await proxy.stop()
        await client.close()

    assert edits == ["edited"]
    records = requests_of(real_cluster, CONTROLLER_USER, since)
    granted = granted_to(await applied_rbac(real_cluster), NAMESPACE, SERVICE_ACCOUNT)
    used = used_pairs(records)
    assert any(  # the stamp the edit overtook
        r["verb"] == "patch" and r["objectRef"].get("resource") == "deployments"
        and r["responseStatus"].get("code") == 409 for r in records
    )  # fmt: skip
    assert refused(records) == []
    assert describe(used - granted) == []
    # Karpenter's NodeClaims are read only where served: without its CRDs (this session may
    # not have run the Karpenter tests yet) the list is answered 404 and no watch follows.
    if any(r["objectRef"].get("resource") == "nodeclaims"
           and r["responseStatus"].get("code") == 404 for r in records):  # fmt: skip
        used.add(("karpenter.sh", "nodeclaims", "watch"))
    assert describe(granted - used) == [], sorted(
        f"{r['verb']} {r['objectRef'].get('resource')} {r['responseStatus'].get('code')}"
        for r in records
    )
