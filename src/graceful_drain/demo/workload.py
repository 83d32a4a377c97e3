"""The demo's cluster: two nodes, one single-replica Deployment (scenarios/eviction-dance.yaml).

The Deployment can surge (maxSurge 1, maxUnavailable 0), prefers node-a (the node drained) and
declares its simulated behaviour with kubesim's pod annotations: a start delay, a readiness
delay and a short graceful exit.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kubesim.cluster.behaviour import EXIT_DELAY, READY_DELAY, START_DELAY
from kubesim.cluster.nodestatus import NodeShape

Obj = dict[str, Any]

NAMESPACE = "default"
DEPLOYMENT = "web"
DRAINED_NODE = "node-a"
SPARE_NODE = "node-b"
START_DELAY_SECONDS = 0.5  # image pull and container start
EXIT_DELAY_SECONDS = 0.5  # graceful shutdown after SIGTERM


def nodes() -> dict[str, NodeShape]:
    def shape(zone: str) -> NodeShape:
        return NodeShape(cpu="2", memory="4Gi", labels={"topology.kubernetes.io/zone": zone})

    return {DRAINED_NODE: shape("zone-a"), SPARE_NODE: shape("zone-b")}


def seconds_text(seconds: float) -> str:
    """A duration kubesim's behaviour annotations read: "3s", "0.25s"."""
    return f"{seconds:g}s"


def deployment(ready_delay: timedelta) -> Obj:
    labels = {"app": DEPLOYMENT}
    prefer_drained_node = {
        "weight": 100,
        "preference": {
            "matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [DRAINED_NODE]}
            ]
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": DEPLOYMENT, "namespace": NAMESPACE},
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
                        START_DELAY: seconds_text(START_DELAY_SECONDS),
                        READY_DELAY: seconds_text(ready_delay.total_seconds()),
                        EXIT_DELAY: seconds_text(EXIT_DELAY_SECONDS),
                    },
                },
                "spec": {
                    "terminationGracePeriodSeconds": 30,
                    "affinity": {
                        "nodeAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [prefer_drained_node]
                        }
                    },
                    "containers": [
                        {
                            "name": DEPLOYMENT,
                            "image": "nginx:1.27",
                            "ports": [{"containerPort": 80}],
                            "readinessProbe": {
                                "httpGet": {"path": "/", "port": 80},
                                "periodSeconds": 1,
                            },
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ],
                },
            },
        },
    }
