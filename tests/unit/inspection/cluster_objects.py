"""Raw API objects for the pure plan/status tests, shaped as the API server returns them."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from graceful_drain.inspection.webhook_health import WebhookHealth
from graceful_drain.kube.timefmt import format_rfc3339

Obj = dict[str, Any]
NODE = "node-a"


def owner(obj: Obj) -> Obj:
    metadata = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": metadata["name"],
            "uid": metadata["uid"], "controller": True}  # fmt: skip


def deployment(
    name: str, *, namespace: str = "default", replicas: int = 1, ready: int | None = None,
    rolling: Obj | None = None, strategy: str = "RollingUpdate", paused: bool = False,
    annotations: dict[str, str] | None = None,
) -> Obj:  # fmt: skip
    ready = replicas if ready is None else ready
    spec: Obj = {"replicas": replicas, "paused": paused, "strategy": {"type": strategy}}
    if strategy == "RollingUpdate":
        spec["strategy"]["rollingUpdate"] = rolling or {"maxSurge": 1, "maxUnavailable": 0}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                     "generation": 1, "resourceVersion": "1",
                     "annotations": annotations or {}},
        "spec": spec,
        "status": {"observedGeneration": 1, "replicas": replicas, "updatedReplicas": replicas,
                   "readyReplicas": ready, "availableReplicas": ready},
    }  # fmt: skip


def replicaset(of: Obj) -> Obj:
    name = of["metadata"]["name"]
    return {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": f"{name}-rs", "namespace": of["metadata"]["namespace"],
                     "uid": f"uid-{name}-rs", "ownerReferences": [owner(of)]},
    }  # fmt: skip


def pod(
    name: str, *, of: Obj | None = None, namespace: str = "default", node: str = NODE,
    ready: bool = True, labels: dict[str, str] | None = None, created: datetime | None = None,
    ready_after: timedelta | None = None, annotations: dict[str, str] | None = None,
    volumes: list[Obj] | None = None, probe: Obj | None = None,
) -> Obj:  # fmt: skip
    metadata: Obj = {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                     "labels": labels or {}, "annotations": annotations or {}}  # fmt: skip
    if of is not None:
        metadata["ownerReferences"] = [owner(of)]
    condition: Obj = {"type": "Ready", "status": "True" if ready else "False"}
    if created is not None:
        metadata["creationTimestamp"] = format_rfc3339(created)
        if ready_after is not None:
            condition["lastTransitionTime"] = format_rfc3339(created + ready_after)
    container: Obj = {"name": "app", "image": "registry.example/app:1"}
    if probe is not None:
        container["readinessProbe"] = probe
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": metadata,
        "spec": {"nodeName": node, "containers": [container], "volumes": volumes or []},
        "status": {"phase": "Running", "conditions": [condition]},
    }  # fmt: skip


def budget(name: str, labels: dict[str, str], *, allowed: int, healthy: int, desired: int) -> Obj:
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": {"selector": {"matchLabels": labels}},
        "status": {"observedGeneration": 1, "disruptionsAllowed": allowed,
                   "currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": healthy},
    }  # fmt: skip


def daemonset(name: str) -> Obj:
    metadata = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": metadata}


def namespace(name: str) -> Obj:
    labels = {"kubernetes.io/metadata.name": name}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


SERVICE = "graceful-drain-webhook.graceful-drain.svc"
# The webhook as webhook_health judges it: answering, down behind a registered url, absent.
PROTECTED = WebhookHealth("graceful-drain", True, "valid", "verified", "127.0.0.1:8443", SERVICE,
                          "answers", "answered", "Ignore")  # fmt: skip
DOWN = WebhookHealth("graceful-drain", True, "valid", "unreachable", "127.0.0.1:9",
                     "127.0.0.1", "could not connect to 127.0.0.1:9", "not-checked",
                     "Ignore")  # fmt: skip
UNVERIFIED = WebhookHealth("graceful-drain", True, "valid", "not-checked", None, SERVICE,
                           "reachable from inside the cluster only", "not-checked",
                           "Ignore")  # fmt: skip
ABSENT = WebhookHealth("graceful-drain", False, "missing", "not-checked", None, None, "absent")
