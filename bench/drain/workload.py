"""What part 3 drains: N single-replica Deployments on node-a, room for them on node-b.

Each Deployment can surge (maxSurge 1, maxUnavailable 0), prefers node-a so that all its
pods start there, becomes Ready R after it starts (kubesim's `sim.kubesim.io/ready-delay`),
and exits at once on SIGTERM. With `pdb`, each also gets a PodDisruptionBudget
`minAvailable: 1`. Pure: the manifests and the scenario around them.
"""

from __future__ import annotations

from typing import Any

from kubesim.cluster.behaviour import EXIT_DELAY, READY_DELAY, START_DELAY
from kubesim.scenario import DrainSpec, MeasureSpec, NodeSpec, Scenario

NAMESPACE = "shop"
DRAINED_NODE = "node-a"
OTHER_NODE = "node-b"
Obj = dict[str, Any]


def deployment_name(index: int) -> str:
    return f"app-{index:03d}"


def deployment(name: str, ready_delay: float, namespace: str = NAMESPACE) -> Obj:
    labels = {"app": name}
    prefer_drained_node = {
        "preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100,
            "preference": {"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [DRAINED_NODE]},
            ]},
        }],
    }  # fmt: skip
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {
                        START_DELAY: "0s",
                        READY_DELAY: f"{ready_delay:g}s",
                        EXIT_DELAY: "0s",
                    },
                },
                "spec": {
                    "terminationGracePeriodSeconds": 30,
                    "affinity": {"nodeAffinity": prefer_drained_node},
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.example.com/app:1.0",
                            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                        }
                    ],
                },
            },
        },
    }


def pdb(name: str) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": name}}},
    }


def scenario(client: str, count: int, ready_delay: float, parameters: dict[str, Any],
             *, with_pdb: bool) -> Scenario:  # fmt: skip
    names = tuple(deployment_name(i) for i in range(count))
    manifests: list[Obj] = [deployment(name, ready_delay) for name in names]
    if with_pdb:
        manifests += [pdb(name) for name in names]
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "250"}
    return Scenario(
        name=f"drain-{client}-{count}",
        nodes=(NodeSpec(DRAINED_NODE, capacity=capacity), NodeSpec(OTHER_NODE, capacity=capacity)),
        manifests=tuple(manifests),
        drains=(DrainSpec(DRAINED_NODE, client, 0.0, parameters),),
        measure=MeasureSpec(NAMESPACE, names),
    )
