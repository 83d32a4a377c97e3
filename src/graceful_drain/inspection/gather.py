"""Reading what `plan` and `status` decide on, with get and list only (deploy/cli/)."""

from __future__ import annotations

from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.apps_v1 import Deployment, ReplicaSet
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event, Namespace, Node, Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget

from graceful_drain.controller.draining import is_being_drained
from graceful_drain.controller.events import DRAIN_TIMEOUT
from graceful_drain.controller.model import RESTARTED_AT_ANNOTATION
from graceful_drain.inspection.plan import NodeState, WebhookScope
from graceful_drain.inspection.reads import get_or_none, list_all
from graceful_drain.inspection.settings import DEFAULT_CONTROLLER_DEPLOYMENT
from graceful_drain.inspection.status import LeaderState, StatusState
from graceful_drain.inspection.webhook_health import eviction_webhook, webhook_health
from graceful_drain.kube.client import JsonDict, RawApi


class UnknownNode(LookupError):
    pass


async def controller_deployment(api: RawApi, namespace: str) -> JsonDict | None:
    return await get_or_none(api, Deployment, DEFAULT_CONTROLLER_DEPLOYMENT, namespace)


async def node_state(api: RawApi, node: str, webhook_configuration: str) -> NodeState:
    if await get_or_none(api, Node, node) is None:
        raise UnknownNode(f"node {node!r} not found")
    pods = await list_all(api, Pod, field_selector=f"spec.nodeName={node}")
    namespaces = sorted({pod["metadata"].get("namespace", "") for pod in pods})
    neighbours: list[JsonDict] = []
    replicasets: list[JsonDict] = []
    deployments: list[JsonDict] = []
    budgets: list[JsonDict] = []
    namespace_objects: dict[str, JsonDict] = {}
    for namespace in namespaces:
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
    configuration = await get_or_none(api, ValidatingWebhookConfiguration, webhook_configuration)
    webhook = eviction_webhook(configuration)
    return NodeState(
        node=node,
        pods=pods,
        neighbours=neighbours,
        replicasets=replicasets,
        deployments=deployments,
        budgets=budgets,
        namespaces=namespace_objects,
        webhook=None if webhook is None else WebhookScope(webhook.get("namespaceSelector")),
        staying_nodes=staying,
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
    configuration = await get_or_none(api, ValidatingWebhookConfiguration, webhook_configuration)
    lease = await get_or_none(api, Lease, lease_name, controller_namespace)
    return StatusState(
        deployments=deployments,
        replicasets=replicasets,
        pods=pods,
        cordoned=cordoned,
        timeout_events=events,
        webhook=await webhook_health(webhook_configuration, configuration, webhook_address),
        leader=LeaderState.of(lease, f"{controller_namespace}/{lease_name}"),
        leader_elect=leader_elect,
    )
