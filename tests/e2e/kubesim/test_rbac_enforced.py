"""RBAC from Role/RoleBinding objects, enforced on every request, with upstream 403 texts."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.client import ApiStatusError, KubeClient
from kubesim.sim import KubeSim

pytestmark = pytest.mark.e2e


async def _client_for_sa(sim: KubeSim, admin: KubeClient) -> KubeClient:
    await admin.create(
        "/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "reader"}}
    )
    await admin.create(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        {
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
        },
    )
    await admin.create(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        {
            "metadata": {"name": "reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "default"}],
        },
    )  # fmt: skip
    return KubeClient(sim.url, sim.service_account_token("default", "reader"), sim.ca_pem)


@pytest.fixture
async def admin(sim: KubeSim) -> Any:
    client = KubeClient(sim.url, sim.admin_token, sim.ca_pem)
    yield client
    await client.close()


async def test_role_grants_exactly_its_rules(sim: KubeSim, admin: KubeClient) -> None:
    reader = await _client_for_sa(sim, admin)
    try:
        listed = await reader.get("/api/v1/namespaces/default/pods")
        assert listed["items"] == []
        with pytest.raises(ApiStatusError) as err:
            await reader.create(
                "/api/v1/namespaces/default/pods/web/eviction",
                {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web"}},
            )
        assert err.value.code == 403
        assert err.value.status["reason"] == "Forbidden"
        assert err.value.status["message"] == (
            'pods "web" is forbidden: User "system:serviceaccount:default:reader" cannot '
            'create resource "pods/eviction" in API group "" in the namespace "default"'
        )
        with pytest.raises(ApiStatusError) as err:
            await reader.get("/api/v1/namespaces/kube-system/pods")
        assert err.value.code == 403
        assert err.value.status["message"].endswith('in the namespace "kube-system"')
    finally:
        await reader.close()


async def test_every_request_is_audited_with_its_code(sim: KubeSim, admin: KubeClient) -> None:
    reader = await _client_for_sa(sim, admin)
    try:
        await reader.get("/api/v1/namespaces/default/pods")
        with pytest.raises(ApiStatusError):
            await reader.get("/api/v1/nodes")
    finally:
        await reader.close()
    records = sim.audit.records(user="system:serviceaccount:default:reader")
    assert [(r.verb, r.resource, r.namespace, r.code) for r in records] == [
        ("list", "pods", "default", 200),
        ("list", "nodes", "", 403),
    ]


async def test_self_subject_access_review_answers_for_the_caller(
    sim: KubeSim, admin: KubeClient
) -> None:
    reader = await _client_for_sa(sim, admin)
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": "default", "verb": "get",
                                        "resource": "pods"}},
    }  # fmt: skip
    try:
        allowed = await reader.create(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review
        )
        review["spec"]["resourceAttributes"]["verb"] = "delete"  # type: ignore[index]
        denied = await reader.create(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review
        )
    finally:
        await reader.close()
    assert allowed["status"]["allowed"] is True
    assert denied["status"]["allowed"] is False


async def test_official_client_sees_403_status(sim: KubeSim) -> None:
    import asyncio

    import kubernetes
    from kubernetes.client.exceptions import ApiException

    path = sim.kubeconfig_path.parent / "nobody.kubeconfig"
    sim.write_kubeconfig(path, token=sim.user_token("nobody"), user="nobody")
    api = kubernetes.config.new_client_from_config(config_file=str(path))
    try:
        with pytest.raises(ApiException) as err:
            await asyncio.to_thread(kubernetes.client.CoreV1Api(api).list_node)
    finally:
        api.close()
    assert err.value.status == 403
    assert 'nodes is forbidden: User \\"nobody\\" cannot list resource \\"nodes\\" in API group' \
        in err.value.body  # fmt: skip
    assert "at the cluster scope" in err.value.body
