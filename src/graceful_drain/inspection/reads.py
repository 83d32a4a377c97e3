"""The read-only API calls of `plan` and `status` (get and list only), as raw JSON."""

from __future__ import annotations

from typing import Any

from lightkube.core.exceptions import ApiError
from lightkube.core.resource import NamespacedResource, Resource

from graceful_drain.kube.client import RawApi, decode, http_status
from graceful_drain.kube.meta import HTTP_NOT_FOUND

JsonDict = dict[str, Any]
PAGE_SIZE = 500
ALL_NAMESPACES = "*"  # lightkube's spelling; None would mean the kubeconfig's namespace


async def list_all(
    api: RawApi,
    resource: type[Resource],
    namespace: str | None = None,
    *,
    field_selector: str | None = None,
) -> list[JsonDict]:
    """Every object, page by page; `namespace` None: all namespaces."""
    if namespace is None and issubclass(resource, NamespacedResource):
        namespace = ALL_NAMESPACES
    items: list[JsonDict] = []
    token: str | None = None
    while True:
        page = await api.list_page(
            resource, namespace, limit=PAGE_SIZE, continue_token=token,
            field_selector=field_selector,
        )  # fmt: skip
        items.extend(item for item in map(decode, page.items) if isinstance(item, dict))
        token = page.continue_token
        if not token:
            return items


async def get_or_none(
    api: RawApi, resource: type[Resource], name: str, namespace: str | None = None
) -> JsonDict | None:
    try:
        return await api.get(resource, name, namespace)
    except ApiError as error:
        if http_status(error) == HTTP_NOT_FOUND:
            return None
        raise
