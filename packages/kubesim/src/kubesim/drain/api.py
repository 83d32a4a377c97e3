"""The API calls drain clients make, on kubesim's raw JSON client."""

from __future__ import annotations

from kubesim.types import Obj

from ..client import STRATEGIC_MERGE_PATCH, ApiStatusError, KubeClient, resource_path

LIST_CHUNK = 500  # kubectl drain's default --chunk-size


def pod_key(pod: Obj) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def status_message(err: ApiStatusError) -> str:
    """What Go prints for a StatusError (`err.Error()`): the Status message."""
    return str(err.status.get("message") or err)


async def get_node(client: KubeClient, name: str) -> Obj:
    return await client.get(resource_path("v1", "nodes", name=name))


async def patch_node(client: KubeClient, name: str, patch: Obj) -> Obj:
    path = resource_path("v1", "nodes", name=name)
    return await client.patch(path, patch, STRATEGIC_MERGE_PATCH)


async def replace_node(client: KubeClient, node: Obj) -> Obj:
    return await client.replace(resource_path("v1", "nodes", name=node["metadata"]["name"]), node)


async def list_pods_on_node(client: KubeClient, node: str, label_selector: str = "") -> list[Obj]:
    """All namespaces, `fieldSelector=spec.nodeName=<node>`, followed chunk by chunk."""
    params = {"fieldSelector": f"spec.nodeName={node}", "limit": str(LIST_CHUNK)}
    if label_selector:
        params["labelSelector"] = label_selector
    pods: list[Obj] = []
    while True:
        listed = await client.get(resource_path("v1", "pods"), params)
        pods.extend(listed.get("items") or [])
        token = (listed.get("metadata") or {}).get("continue")
        if not token:
            return pods
        params = {**params, "continue": token}


async def get_pod(client: KubeClient, namespace: str, name: str) -> Obj | None:
    """The pod, or None when the API says 404."""
    try:
        return await client.get(resource_path("v1", "pods", namespace, name))
    except ApiStatusError as err:
        if err.code == 404:
            return None
        raise


async def evict(
    client: KubeClient, pod: Obj, *, api_version: str = "policy/v1",
    grace_period_seconds: int | None = None, uid_precondition: str | None = None,
) -> None:  # fmt: skip
    """POST an Eviction for the pod; raises ApiStatusError on refusal (429, 404, 409...)."""
    meta = pod["metadata"]
    options: Obj = {}
    if grace_period_seconds is not None:
        options["gracePeriodSeconds"] = grace_period_seconds
    if uid_precondition is not None:
        options["preconditions"] = {"uid": uid_precondition}
    body: Obj = {
        "apiVersion": api_version,
        "kind": "Eviction",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
    }
    if options:
        body["deleteOptions"] = options
    await client.create(
        resource_path("v1", "pods", meta["namespace"], meta["name"], "eviction"), body
    )


async def delete_pod(client: KubeClient, pod: Obj, grace_period_seconds: int | None) -> None:
    meta = pod["metadata"]
    options = None if grace_period_seconds is None else {"gracePeriodSeconds": grace_period_seconds}
    await client.delete(resource_path("v1", "pods", meta["namespace"], meta["name"]), options)


async def eviction_group_version(client: KubeClient) -> str | None:
    """Where the server serves pods/eviction, found through discovery as kubectl does."""
    resources = await client.get("/api/v1")
    for resource in resources.get("resources") or []:
        if resource.get("name") == "pods/eviction" and resource.get("kind") == "Eviction":
            group, version = resource.get("group"), resource.get("version")
            if group and version:
                return f"{group}/{version}"
    return None


def typed(obj: Obj, kind: str, api_version: str) -> Obj:
    """The object with its kind and apiVersion (list items come without), for event references."""
    return {**obj, "kind": kind, "apiVersion": api_version}
