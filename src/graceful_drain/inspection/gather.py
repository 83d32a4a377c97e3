"""Reading what `plan` and `status` decide on, with get and list only (deploy/cli/)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import httpx2
from lightkube.core.exceptions import ApiError
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.apps_v1 import Deployment, ReplicaSet
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event, Namespace, Node, Pod, Service
from lightkube.resources.discovery_v1 import EndpointSlice
from lightkube.resources.policy_v1 import PodDisruptionBudget

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.controller.cache.nodeclaims import NodeClaim
from graceful_drain.controller.decision.deadline import deadlines_by_node
from graceful_drain.controller.decision.draining import is_being_drained
from graceful_drain.controller.writes.events import (
    DRAIN_TIMEOUT,
    DRAIN_WRITE_DEFERRED,
    DRAIN_WRITE_FAILED,
)
from graceful_drain.inspection.plan import NodeState, WebhookScope
from graceful_drain.inspection.reads import get_or_none, list_all
from graceful_drain.inspection.settings import DEFAULT_CONTROLLER_DEPLOYMENT
from graceful_drain.inspection.status import LeaderState, StatusState
from graceful_drain.inspection.webhook_health import (
    SERVICE_NAME_LABEL,
    ServiceBackend,
    WebhookHealth,
    eviction_webhook,
    webhook_health,
)
from graceful_drain.kube.client import JsonDict, RawApi, http_status
from graceful_drain.kube.meta import HTTP_FORBIDDEN, HTTP_NOT_FOUND


class UnknownNode(LookupError):
    pass


async def controller_deployment(api: RawApi, namespace: str) -> JsonDict | None:
    return await get_or_none(api, Deployment, DEFAULT_CONTROLLER_DEPLOYMENT, namespace)


async def _service_backend(api: RawApi, webhook: Mapping[str, Any] | None) -> ServiceBackend | None:
    """The Service a `service` clientConfig names and its EndpointSlices; None for a `url`.
    What this user may not read (or this API server does not serve) is left unknown."""
    service = ((webhook or {}).get("clientConfig") or {}).get("service")
    if not service:
        return None
    name, namespace = str(service.get("name", "")), str(service.get("namespace", ""))
    try:
        found = await get_or_none(api, Service, name, namespace)
    except ApiError as error:
        if http_status(error) != HTTP_FORBIDDEN:
            raise
        return None
    try:
        slices: list[JsonDict] | None = [
            item
            for item in await list_all(api, EndpointSlice, namespace)
            if ((item.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL) == name
        ]
    except (ApiError, httpx2.HTTPStatusError) as error:  # the latter: an API not served at all
        if http_status(error) not in (HTTP_FORBIDDEN, HTTP_NOT_FOUND):
            raise
        slices = None
    return ServiceBackend(found, slices)


async def registered_webhook(
    api: RawApi, configuration_name: str, address: str | None
) -> tuple[Mapping[str, Any] | None, WebhookHealth]:
    """The configuration's webhook on pods/eviction, and whether it protects evictions."""
    configuration = await get_or_none(api, ValidatingWebhookConfiguration, configuration_name)
    webhook = eviction_webhook(configuration)
    backend = await _service_backend(api, webhook)
    health = await webhook_health(configuration_name, configuration, address, backend)
    return webhook, health


async def node_deadlines(api: RawApi) -> dict[str, datetime]:
    """Node -> Karpenter's termination deadline, from its NodeClaims (decision/deadline.py);
    empty where NodeClaims are not served (no Karpenter) or this user may not list them."""
    try:
        claims = await list_all(api, NodeClaim)
    except (ApiError, httpx2.HTTPStatusError) as error:
        if http_status(error) not in (HTTP_FORBIDDEN, HTTP_NOT_FOUND):
            raise
        return {}
    return deadlines_by_node(claims)


async def node_state(
    api: RawApi, node: str, webhook_configuration: str, webhook_address: str | None = None
) -> NodeState:
    if await get_or_none(api, Node, node) is None:
        raise UnknownNode(f"node {node!r} not found")
    pods = await list_all(api, Pod, field_selector=f"spec.nodeName={node}")
    namespaces = sorted({pod["metadata"].get("namespace", "") for pod in pods})
    neighbours: list[JsonDict] = []
    replicasets: list[JsonDict] = []
    deployments: list[JsonDict] = []
    budgets: list[JsonDict] = []
    namespace_objects: dict[str, JsonDict] = {}
    write_events: list[JsonDict] = []
    for namespace in namespaces:
        write_events += await list_all(
            api, Event, namespace, field_selector=f"reason={DRAIN_WRITE_DEFERRED}"
        )
        neighbours += await list_all(api, Pod, namespace)
        replicasets += await list_all(api, ReplicaSet, namespace)
        deployments += await list_all(api, Deployment, namespace)
        budgets += await list_all(api, PodDisruptionBudget, namespace)
        found = await get_or_none(api, Namespace, namespace)
        if found is not None:
            namespace_objects[namespace] = found
    staying = frozenset(
        n["metadata"]["name"]
        for n in await list_all(api, Node)
        if n["metadata"].get("name") != node and not is_being_drained(n)
    )
    webhook, health = await registered_webhook(api, webhook_configuration, webhook_address)
    return NodeState(
        node=node,
        pods=pods,
        neighbours=neighbours,
        replicasets=replicasets,
        deployments=deployments,
        budgets=budgets,
        namespaces=namespace_objects,
        webhook=None if webhook is None else WebhookScope(webhook.get("namespaceSelector")),
        health=health,
        staying_nodes=staying,
        node_deadline=(await node_deadlines(api)).get(node),
        write_events=write_events,
    )


async def status_state(
    api: RawApi,
    *,
    controller_namespace: str,
    lease_name: str,
    leader_elect: bool,
    webhook_configuration: str,
    webhook_address: str | None,
) -> StatusState:
    deployments = await list_all(api, Deployment)
    namespaces = sorted(
        {
            d["metadata"].get("namespace", "")
            for d in deployments
            if RESTARTED_AT_ANNOTATION in (d["metadata"].get("annotations") or {})
        }
    )
    replicasets: list[JsonDict] = []
    pods: list[JsonDict] = []
    for namespace in namespaces:
        replicasets += await list_all(api, ReplicaSet, namespace)
        pods += await list_all(api, Pod, namespace)
    nodes = await list_all(api, Node)
    cordoned = frozenset(n["metadata"]["name"] for n in nodes if is_being_drained(n))
    events = await list_all(api, Event, field_selector=f"reason={DRAIN_TIMEOUT}")
    write_events = [
        event
        for reason in (DRAIN_WRITE_DEFERRED, DRAIN_WRITE_FAILED)
        for event in await list_all(api, Event, field_selector=f"reason={reason}")
    ]
    _, health = await registered_webhook(api, webhook_configuration, webhook_address)
    lease = await get_or_none(api, Lease, lease_name, controller_namespace)
    return StatusState(
        deployments=deployments,
        replicasets=replicasets,
        pods=pods,
        cordoned=cordoned,
        timeout_events=events,
        webhook=health,
        leader=LeaderState.of(lease, f"{controller_namespace}/{lease_name}"),
        leader_elect=leader_elect,
        node_deadlines=await node_deadlines(api),
        write_events=write_events,
    )
