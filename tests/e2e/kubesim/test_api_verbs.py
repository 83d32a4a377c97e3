"""kubesim's verbs and error paths, through the official client and lightkube."""

from __future__ import annotations

import asyncio
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.core_v1 import ConfigMap, Namespace

from kubesim.client import ApiStatusError, KubeClient
from kubesim.sim import KubeSim

pytestmark = pytest.mark.e2e


def _cm(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}}


async def test_create_get_and_generate_name(core: kubernetes.client.CoreV1Api) -> None:
    created = await asyncio.to_thread(
        core.create_namespaced_config_map, "default", _cm("", generateName="gen-")
    )
    name = created.metadata.name
    assert name.startswith("gen-") and len(name) == len("gen-") + 5
    assert created.metadata.uid and created.metadata.creation_timestamp is not None
    fetched = await asyncio.to_thread(core.read_namespaced_config_map, name, namespace="default")
    assert fetched.metadata.resource_version == created.metadata.resource_version


async def test_already_exists_is_409(core: kubernetes.client.CoreV1Api) -> None:
    await asyncio.to_thread(core.create_namespaced_config_map, "default", _cm("dup"))
    with pytest.raises(ApiException) as err:
        await asyncio.to_thread(core.create_namespaced_config_map, "default", _cm("dup"))
    assert err.value.status == 409
    assert '"reason":"AlreadyExists"' in err.value.body
    assert 'configmaps \\"dup\\" already exists' in err.value.body


async def test_not_found_status_body(raw: KubeClient) -> None:
    with pytest.raises(ApiStatusError) as err:
        await raw.get("/apis/apps/v1/namespaces/default/deployments/nope")
    assert err.value.code == 404
    assert err.value.status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'deployments.apps "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "group": "apps", "kind": "deployments"},
        "code": 404,
    }


async def test_create_in_missing_namespace_is_404(lk: AsyncClient) -> None:
    with pytest.raises(ApiError) as err:
        await lk.create(ConfigMap(metadata=ObjectMeta(namespace="missing", name="x")))
    assert err.value.status.code == 404
    assert err.value.status.message == 'namespaces "missing" not found'


async def test_list_pages_with_limit_and_continue(core: kubernetes.client.CoreV1Api) -> None:
    for i in range(5):
        await asyncio.to_thread(core.create_namespaced_config_map, "default", _cm(f"page-{i}"))
    first = await asyncio.to_thread(core.list_namespaced_config_map, "default", limit=2)
    assert [c.metadata.name for c in first.items] == ["page-0", "page-1"]
    assert first.metadata.remaining_item_count == 3
    second = await asyncio.to_thread(
        core.list_namespaced_config_map, "default", limit=2, _continue=first.metadata._continue
    )
    assert [c.metadata.name for c in second.items] == ["page-2", "page-3"]
    third = await asyncio.to_thread(
        core.list_namespaced_config_map, "default", limit=2, _continue=second.metadata._continue
    )
    assert [c.metadata.name for c in third.items] == ["page-4"]
    assert not third.metadata._continue


async def test_update_with_stale_resource_version_is_409(lk: AsyncClient) -> None:
    cm = await lk.create(
        ConfigMap(metadata=ObjectMeta(namespace="default", name="c"), data={"a": "1"})
    )
    cm.data = {"a": "2"}
    updated = await lk.replace(cm)
    assert updated.data == {"a": "2"}
    assert updated.metadata.resourceVersion != cm.metadata.resourceVersion
    cm.data = {"a": "3"}  # still carries the old resourceVersion
    with pytest.raises(ApiError) as err:
        await lk.replace(cm)
    assert err.value.status.code == 409
    assert err.value.status.reason == "Conflict"
    assert err.value.status.message == (
        'Operation cannot be fulfilled on configmaps "c": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


async def test_no_op_update_keeps_resource_version(lk: AsyncClient) -> None:
    cm = await lk.create(
        ConfigMap(metadata=ObjectMeta(namespace="default", name="same"), data={"a": "1"})
    )
    again = await lk.replace(cm)
    assert again.metadata.resourceVersion == cm.metadata.resourceVersion


async def test_dry_run_create_and_delete_change_nothing(
    core: kubernetes.client.CoreV1Api, sim: KubeSim
) -> None:
    before = sim.store.revision
    await asyncio.to_thread(core.create_namespaced_config_map, "default", _cm("dry"), dry_run="All")
    with pytest.raises(ApiException) as err:
        await asyncio.to_thread(core.read_namespaced_config_map, "dry", namespace="default")
    assert err.value.status == 404
    await asyncio.to_thread(core.create_namespaced_config_map, "default", _cm("kept"))
    after_create = sim.store.revision
    await asyncio.to_thread(core.delete_namespaced_config_map, "kept", "default", dry_run="All")
    assert sim.store.revision == after_create == before + 1
    await asyncio.to_thread(core.read_namespaced_config_map, "kept", "default")


async def test_invalid_dry_run_value_is_422_on_the_options(raw: KubeClient) -> None:
    with pytest.raises(ApiStatusError) as err:
        await raw.request(
            "POST", "/api/v1/namespaces/default/configmaps", _cm("x"), {"dryRun": "Some"}
        )
    assert err.value.code == 422
    assert err.value.status["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Some"]: '
        'supported values: "All"'
    )
    assert err.value.status["details"]["causes"][0]["reason"] == "FieldValueNotSupported"


async def test_delete_precondition_uid_mismatch_is_409(lk: AsyncClient, raw: KubeClient) -> None:
    await lk.create(ConfigMap(metadata=ObjectMeta(namespace="default", name="pre")))
    options = {"preconditions": {"uid": "not-the-uid"}}
    with pytest.raises(ApiStatusError) as err:
        await raw.delete("/api/v1/namespaces/default/configmaps/pre", options)
    assert err.value.code == 409
    assert err.value.status["message"] == (
        'Operation cannot be fulfilled on ConfigMap "pre": the UID in the precondition '
        "(not-the-uid) does not match the UID in record "
        f"({(await raw.get('/api/v1/namespaces/default/configmaps/pre'))['metadata']['uid']}). "
        "The object might have been deleted and then recreated"
    )
    assert err.value.status["details"] == {"name": "pre", "kind": "ConfigMap"}


async def test_finalizers_hold_deletion_until_removed(lk: AsyncClient) -> None:
    meta = ObjectMeta(namespace="default", name="fin", finalizers=["example.com/hold"])
    await lk.create(ConfigMap(metadata=meta))
    await lk.delete(ConfigMap, "fin", namespace="default")
    held = await lk.get(ConfigMap, "fin", namespace="default")
    assert held.metadata.deletionTimestamp is not None
    held.metadata.finalizers = []
    await lk.replace(held)
    with pytest.raises(ApiError) as err:
        await lk.get(ConfigMap, "fin", namespace="default")
    assert err.value.status.code == 404


async def _wait_gone(lk: AsyncClient, kind: Any, name: str, namespace: str | None) -> None:
    """Wait for a DELETED event, watching from the version we read (no missed events)."""
    try:
        current = await lk.get(kind, name, namespace=namespace)
    except ApiError:
        return

    async def deleted() -> None:
        async for event, obj in lk.watch(
            kind, namespace=namespace, resource_version=current.metadata.resourceVersion
        ):
            if event == "DELETED" and obj.metadata.name == name:
                return

    await asyncio.wait_for(deleted(), 10)


async def test_background_garbage_collection_deletes_dependents(lk: AsyncClient) -> None:
    owner = await lk.create(ConfigMap(metadata=ObjectMeta(namespace="default", name="owner")))
    ref = OwnerReference(
        apiVersion="v1", kind="ConfigMap", name="owner", uid=str(owner.metadata.uid)
    )
    await lk.create(
        ConfigMap(metadata=ObjectMeta(namespace="default", name="dep", ownerReferences=[ref]))
    )
    await lk.delete(ConfigMap, "owner", namespace="default")
    await _wait_gone(lk, ConfigMap, "dep", namespace="default")


async def test_orphan_propagation_keeps_dependents(lk: AsyncClient, raw: KubeClient) -> None:
    owner = await lk.create(ConfigMap(metadata=ObjectMeta(namespace="default", name="o2")))
    ref = OwnerReference(apiVersion="v1", kind="ConfigMap", name="o2", uid=str(owner.metadata.uid))
    await lk.create(
        ConfigMap(metadata=ObjectMeta(namespace="default", name="d2", ownerReferences=[ref]))
    )
    await raw.delete("/api/v1/namespaces/default/configmaps/o2", {"propagationPolicy": "Orphan"})
    await _wait_gone(lk, ConfigMap, "o2", namespace="default")
    dependent = await lk.get(ConfigMap, "d2", namespace="default")
    assert not dependent.metadata.ownerReferences


async def test_namespace_deletion_removes_content(lk: AsyncClient) -> None:
    await lk.create(Namespace(metadata=ObjectMeta(name="doomed")))
    await lk.create(ConfigMap(metadata=ObjectMeta(namespace="doomed", name="x")))
    await lk.delete(Namespace, "doomed")
    await _wait_gone(lk, Namespace, "doomed", None)
    with pytest.raises(ApiError):
        await lk.get(ConfigMap, "x", namespace="doomed")


async def test_bad_token_is_401(sim: KubeSim) -> None:
    client = KubeClient(sim.url, "wrong", sim.ca_pem)
    try:
        with pytest.raises(ApiStatusError) as err:
            await client.get("/api/v1/namespaces")
        assert err.value.code == 401
        assert err.value.status["message"] == "Unauthorized"
    finally:
        await client.close()


async def test_invalid_object_is_422_with_causes(sim: KubeSim) -> None:
    api = kubernetes.config.new_client_from_config(config_file=str(sim.kubeconfig_path))
    apps = kubernetes.client.AppsV1Api(api)
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "bad"},
        "spec": {
            "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "b"}},
                         "spec": {"containers": [{"name": "c", "image": "x"}]}},
        },
    }  # fmt: skip
    try:
        with pytest.raises(ApiException) as err:
            await asyncio.to_thread(apps.create_namespaced_deployment, "default", body)
    finally:
        api.close()
    assert err.value.status == 422
    assert '"reason":"Invalid"' in err.value.body
    assert 'Deployment.apps \\"bad\\" is invalid: spec.template.metadata.labels' in err.value.body
    assert "`selector` does not match template `labels`" in err.value.body


async def test_delete_collection_honours_the_label_selector(
    core: kubernetes.client.CoreV1Api,
) -> None:
    for name, tier in (("a", "web"), ("b", "web"), ("c", "db")):
        await asyncio.to_thread(
            core.create_namespaced_config_map, "default", _cm(name, labels={"tier": tier})
        )
    await asyncio.to_thread(
        core.delete_collection_namespaced_config_map, "default", label_selector="tier=web"
    )
    left = await asyncio.to_thread(core.list_namespaced_config_map, "default")
    assert [c.metadata.name for c in left.items] == ["c"]


async def test_lightkube_patch_types_and_failed_test_op(lk: AsyncClient) -> None:
    from lightkube.types import PatchType

    await lk.create(ConfigMap(metadata=ObjectMeta(namespace="default", name="p"), data={"a": "1"}))
    merged = await lk.patch(ConfigMap, "p", {"data": {"b": "2"}}, namespace="default")
    assert merged.data == {"a": "1", "b": "2"}
    ops = [{"op": "test", "path": "/data/a", "value": "1"},
           {"op": "replace", "path": "/data/a", "value": "9"}]  # fmt: skip
    patched = await lk.patch(ConfigMap, "p", ops, namespace="default", patch_type=PatchType.JSON)
    assert patched.data == {"a": "9", "b": "2"}
    with pytest.raises(ApiError) as err:
        await lk.patch(ConfigMap, "p", ops, namespace="default", patch_type=PatchType.JSON)
    assert err.value.status.code == 422
    assert err.value.status.reason == "Invalid"


async def test_label_and_field_selectors_on_list(core: kubernetes.client.CoreV1Api) -> None:
    for name, tier in (("x", "web"), ("y", "db")):
        await asyncio.to_thread(
            core.create_namespaced_config_map, "default", _cm(name, labels={"tier": tier})
        )
    by_label = await asyncio.to_thread(
        core.list_namespaced_config_map, "default", label_selector="tier in (db)"
    )
    assert [c.metadata.name for c in by_label.items] == ["y"]
    by_field = await asyncio.to_thread(
        core.list_namespaced_config_map, "default", field_selector="metadata.name!=y"
    )
    assert [c.metadata.name for c in by_field.items] == ["x"]
    with pytest.raises(ApiException) as err:
        await asyncio.to_thread(
            core.list_namespaced_config_map, "default", field_selector="data.k=v"
        )
    assert err.value.status == 400


async def test_a_dry_run_finalize_leaves_the_stored_namespace_as_it_was(raw: KubeClient) -> None:
    await raw.request("POST", "/api/v1/namespaces", {"metadata": {"name": "fin-dry"}})
    before = await raw.request("GET", "/api/v1/namespaces/fin-dry")
    finalize = {**before, "spec": {"finalizers": []}}
    answer = await raw.request(
        "PUT", "/api/v1/namespaces/fin-dry/finalize", finalize,
        params={"dryRun": "All", "fieldManager": "finalizer-test"},
    )  # fmt: skip
    assert answer["spec"]["finalizers"] == []
    after = await raw.request("GET", "/api/v1/namespaces/fin-dry")
    assert after == before
