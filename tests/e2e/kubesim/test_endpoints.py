"""kubesim's endpoints controller, end to end with the scheduler and simulated kubelets: a
Service's Endpoints and EndpointSlice follow the pods it selects (Ready ones as addresses,
a named targetPort resolved), and go with the Service. Every wait is on a watch."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.client import KubeClient, resource_path
from kubesim.cluster.cluster import Cluster
from kubesim.cluster.endpoints import SERVICE_NAME_LABEL
from kubesim.sim import KubeSim
from kubesim.watchlog import watch_until

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
NS = "default"


def deployment(replicas: int) -> Obj:
    labels = {"app": "web"}
    container = {
        "name": "web",
        "image": "nginx",
        "ports": [{"name": "http", "containerPort": 8080}],
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [container],
                                       "terminationGracePeriodSeconds": 0}}},
    }  # fmt: skip


SERVICE = {
    "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
    "spec": {"selector": {"app": "web"}, "ports": [{"name": "h", "port": 80,
                                                    "targetPort": "http"}]},
}  # fmt: skip


def addresses(count: int) -> Any:
    def holds(items: list[Obj]) -> bool:
        subsets = [s for e in items for s in e.get("subsets") or []]
        ready = [a for s in subsets for a in s.get("addresses") or []]
        ports = [p for s in subsets for p in s.get("ports") or []]
        return (
            len(items) == 1
            and len(ready) == count
            and all(p == {"name": "h", "port": 8080, "protocol": "TCP"} for p in ports)
        )

    return holds


def slice_endpoints(count: int) -> Any:
    def holds(items: list[Obj]) -> bool:
        ready = [e for s in items for e in s.get("endpoints") or []
                 if e["conditions"]["ready"]]  # fmt: skip
        return (
            len(items) == 1
            and items[0]["metadata"]["labels"][SERVICE_NAME_LABEL] == "web"
            and items[0]["ports"] == [{"name": "h", "port": 8080, "protocol": "TCP"}]
            and len(ready) == count
        )

    return holds


async def test_endpoints_follow_the_selected_pods(sim: KubeSim, raw: KubeClient) -> None:
    async with Cluster(sim, nodes=["node-a", "node-b"]):
        deployments = resource_path("apps/v1", "deployments", NS)
        await raw.create(deployments, deployment(2))
        await raw.create(resource_path("v1", "services", NS), SERVICE)
        await watch_until(raw, "v1", "endpoints", "Endpoints", NS, addresses(2))
        await watch_until(raw, "discovery.k8s.io/v1", "endpointslices", "EndpointSlice", NS,
                          slice_endpoints(2))  # fmt: skip

        await raw.patch(f"{deployments}/web", {"spec": {"replicas": 1}})
        await watch_until(raw, "v1", "endpoints", "Endpoints", NS, addresses(1))
        await watch_until(raw, "discovery.k8s.io/v1", "endpointslices", "EndpointSlice", NS,
                          slice_endpoints(1))  # fmt: skip

        await raw.delete(resource_path("v1", "services", NS) + "/web")
        await watch_until(raw, "v1", "endpoints", "Endpoints", NS, lambda items: not items)
        await watch_until(raw, "discovery.k8s.io/v1", "endpointslices", "EndpointSlice", NS,
                          lambda items: not items)  # fmt: skip
