"""What the drain tests run on the two nodes, and how a test holds the reconciler back."""

from __future__ import annotations

import asyncio
from typing import Any

from graceful_drain.controller.decision.model import TEMPLATE_RESTARTED_AT_ANNOTATION
from kubesim.apiserver.errors import ApiError
from kubesim.apiserver.server import AdmissionAttributes
from kubesim.cluster.behaviour import NEVER_READY, READY_DELAY
from kubesim.sim import KubeSim

from .installed import CONTROLLER_USER, WORKLOADS

Obj = dict[str, Any]


def web(
    name: str = "web", *, replicas: int = 1, ready_delay: str = "200ms", never_ready: bool = False
) -> Obj:
    """A Deployment that can surge (maxSurge 1, maxUnavailable 0) and prefers node-a."""
    labels = {"app": name}
    behaviour = {READY_DELAY: ready_delay}
    if never_ready:
        behaviour[NEVER_READY] = "true"
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": WORKLOADS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {"labels": labels, "annotations": behaviour},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "affinity": preferring_node_a(),
                    "containers": [{
                        "name": "app", "image": "registry.example/web:1",
                        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}},
                    }],
                },
            },
        },
    }  # fmt: skip


def preferring_node_a() -> Obj:
    """A pod's affinity that prefers node-a (the node the drain tests drain)."""
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100,
        "preference": {"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-a"]},
        ]},
    }]}}  # fmt: skip


def with_strategy(deployment: Obj, **rolling_update: Any) -> Obj:
    deployment["spec"]["strategy"]["rollingUpdate"] = rolling_update
    return deployment


def annotated(deployment: Obj, annotations: dict[str, str]) -> Obj:
    deployment["metadata"]["annotations"] = annotations
    return deployment


def statefulset(name: str) -> Obj:
    """A one-replica StatefulSet whose pod (`<name>-0`) prefers node-a."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": WORKLOADS},
        "spec": {
            "replicas": 1, "serviceName": name, "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "affinity": preferring_node_a(),
                    "containers": [{"name": "db", "image": "registry.example/db:1"}],
                },
            },
        },
    }  # fmt: skip


def pod_on(node: str, name: str, owner: Obj | None = None, ordinal: int = 0) -> Obj:
    """A pod bound to `node` (its kubelet runs it), controlled by `owner` if given."""
    metadata: Obj = {"name": name, "namespace": WORKLOADS, "labels": {"app": name}}
    if owner is not None:
        metadata["name"] = f"{owner['metadata']['name']}-{ordinal}"
        metadata["labels"] = dict(owner["spec"]["selector"]["matchLabels"])
        metadata["ownerReferences"] = [{
            "apiVersion": owner["apiVersion"], "kind": owner["kind"],
            "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True,
        }]  # fmt: skip
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": metadata,
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 5,
                 "containers": [{"name": "app", "image": "registry.example/app:1"}]},
    }  # fmt: skip


class TemplateRestartBlocker:
    """An admission step inside kubesim refusing (503) the controller's writes of the pod
    template's restartedAt while `blocking`: the webhook's stamp goes through, the rollout the
    reconciler would start does not. `attempts` is set once one was refused."""

    def __init__(self, sim: KubeSim) -> None:
        self.blocking = True
        self.attempts = asyncio.Event()
        sim.server.admitters.append(self)

    async def __call__(self, attrs: AdmissionAttributes) -> None:
        if not self.blocking or attrs.rt.plural != "deployments" or attrs.subresource:
            return
        if attrs.operation != "UPDATE" or attrs.user.username != CONTROLLER_USER:
            return
        if template_restarted_at(attrs.object) != template_restarted_at(attrs.old_object):
            self.attempts.set()
            raise ApiError(503, "held back by the test: the reconciler's rollout")


def template_restarted_at(deployment: Obj | None) -> str | None:
    if deployment is None:
        return None
    template = deployment.get("spec", {}).get("template", {})
    return (template.get("metadata", {}).get("annotations") or {}).get(
        TEMPLATE_RESTARTED_AT_ANNOTATION
    )
