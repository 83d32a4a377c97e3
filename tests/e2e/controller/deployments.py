"""Deployments played by hand (no Deployment controller runs): manifests, status writes, the
webhook's stamp, the controller's informer cache of them, and the Events written about them.
For the reconciler, events, Lease and certificate tests."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Event
from lightkube.types import PatchType

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.controller.cache.cluster import ClusterCache
from graceful_drain.controller.decision.model import DeploymentInfo
from graceful_drain.kube.cache import ResourceCache
from graceful_drain.kube.timefmt import format_rfc3339
from kubesim.sim import KubeSim

from .conftest import DEADLINE, quick_backoff

NS = "default"
NAME = "web"
KUBECTL_TIMEOUT = 60.0

Obj = dict[str, Any]


def lightkube_client(sim: KubeSim) -> AsyncClient:
    return AsyncClient(KubeConfig.from_file(str(sim.kubeconfig_path)), field_manager="test")


class WatchedDeployments:
    """The controller's informer cache (controller/cache/cluster.py) of one namespace, with a
    way to wait for what it shows."""

    def __init__(self, client: AsyncClient, namespace: str = NS) -> None:
        self.cache = ClusterCache(client, namespaces=[namespace], backoff=quick_backoff)

    @property
    def source(self) -> ResourceCache[DeploymentInfo]:
        """What a Reconciler reads."""
        return self.cache.deployments

    def get(self, namespace: str, name: str) -> DeploymentInfo | None:
        return self.cache.deployment(namespace, name)

    async def wait_for(self, predicate: Callable[[], bool], within: float = DEADLINE) -> None:
        (informer,) = self.cache.deployments.informers
        async with asyncio.timeout(within):
            await informer.wait_for(predicate)


@asynccontextmanager
async def watched(client: AsyncClient) -> AsyncIterator[WatchedDeployments]:
    deployments = WatchedDeployments(client)
    await deployments.cache.start()
    try:
        async with asyncio.timeout(DEADLINE):
            await deployments.cache.wait_synced()
        yield deployments
    finally:
        await deployments.cache.stop()


# --- workloads --------------------------------------------------------------------------------


def deployment_manifest(
    name: str = NAME, *, template_annotations: bool = True, grace: int | None = None
) -> Obj:
    """`grace`: the template's terminationGracePeriodSeconds, for which restarted-at is kept
    after the rollout completed (30 s when absent)."""
    template_meta: Obj = {"labels": {"app": name}}
    if template_annotations:
        template_meta["annotations"] = {"team": "platform"}
    pod_spec: Obj = {"containers": [{"name": "app", "image": "nginx"}]}
    if grace is not None:
        pod_spec["terminationGracePeriodSeconds"] = grace
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": template_meta,
                "spec": pod_spec,
            },
        },
    }


async def get_deployment(client: AsyncClient, name: str = NAME) -> Obj:
    deployment = await client.get(Deployment, name, namespace=NS)
    raw: Obj = deployment.to_dict()
    return raw


async def write_status(client: AsyncClient, name: str, **status: int) -> None:
    """Play the Deployment controller: write the status subresource."""
    await client.patch(
        Deployment.Status, name, {"status": status}, namespace=NS, patch_type=PatchType.MERGE
    )


async def write_complete_status(client: AsyncClient, name: str = NAME) -> None:
    raw = await get_deployment(client, name)
    await write_status(
        client, name, observedGeneration=raw["metadata"]["generation"], replicas=1,
        updatedReplicas=1, readyReplicas=1, availableReplicas=1,
    )  # fmt: skip


async def stamp(client: AsyncClient, value: str, name: str = NAME) -> None:
    """What the webhook does on the first eviction: stamp restarted-at."""
    await client.patch(
        Deployment,
        name,
        {"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: value}}},
        namespace=NS,
        patch_type=PatchType.MERGE,
    )


def now_stamp() -> str:
    return format_rfc3339(datetime.now(UTC))


# --- events -----------------------------------------------------------------------------------


async def wait_for_event(
    client: AsyncClient, reason: str, name: str = NAME, within: float = DEADLINE
) -> Obj:
    """The first core/v1 Event with `reason` about Deployment `name`, from a watch."""
    async with asyncio.timeout(within):
        async for _, event in client.watch(
            Event, namespace=NS, fields={"involvedObject.name": name}
        ):
            raw: Obj = event.to_dict()
            if raw.get("reason") == reason:
                return raw
    raise AssertionError("the watch ended")  # pragma: no cover


async def events_about(client: AsyncClient, name: str = NAME) -> list[Obj]:
    return [
        event.to_dict()
        async for event in client.list(Event, namespace=NS, fields={"involvedObject.name": name})
    ]


async def kubectl(kubeconfig: Path, *args: str) -> str:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    result = await asyncio.to_thread(
        subprocess.run, ["kubectl", *args], capture_output=True, text=True, env=env,
        timeout=KUBECTL_TIMEOUT,
    )  # fmt: skip
    assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
    return result.stdout
