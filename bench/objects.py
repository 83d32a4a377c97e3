"""Realistic raw JSON for Pods, ReplicaSets and Deployments, as an API server sends them, and
the AdmissionReview it sends the webhook for an eviction (the one builder of it: the benchmark,
the unit tests and the end-to-end tests all post this one).

Shapes follow what a real cluster holds (containers with env and probes, projected token
volume, default tolerations, managedFields, status conditions), so decode and memory figures
are not flattered by toy objects. Everything is a pure function of its arguments.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION

JsonObject = dict[str, Any]

IMAGE = "registry.example.com/team/checkout-api:1.42.7"
CREATED_AT = "2024-05-01T12:00:00Z"


def object_uid(kind: str, index: int) -> str:
    """A stable UUID-shaped uid per kind and index."""
    prefix = {"Pod": "5c1f0b7e", "ReplicaSet": "0d7b3a1e", "Deployment": "9a4e2c6f"}.get(
        kind, "00000000"
    )
    return f"{prefix}-1d2a-4c3b-9e8f-{index:012d}"


def node_name(index: int) -> str:
    return f"ip-10-0-{index % 250}-{index % 200}.eu-west-1.compute.internal"


def _managed_fields(subresource_status: bool) -> list[JsonObject]:
    fields: list[JsonObject] = [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": CREATED_AT,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {f"f:{key}": {} for key in "abcdef"}},
                "f:spec": {"f:containers": {'k:{"name":"app"}': {".": {}}}},
            },
        }
    ]
    if subresource_status:
        fields.append(
            {
                "manager": "kubelet",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2024-05-01T12:00:05Z",
                "fieldsType": "FieldsV1",
                "subresource": "status",
                "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}}},
            }
        )
    return fields


def container(name: str = "app") -> JsonObject:
    return {
        "name": name,
        "image": IMAGE,
        "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
        "env": [{"name": f"SETTING_{n}", "value": f"value-{n}"} for n in range(12)],
        "resources": {
            "limits": {"memory": "512Mi"},
            "requests": {"cpu": "250m", "memory": "256Mi"},
        },
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5},
        "volumeMounts": [
            {"name": "kube-api-access", "mountPath": "/var/run/secrets", "readOnly": True}
        ],
    }


def pod_spec(node: str | None) -> JsonObject:
    spec: JsonObject = {
        "containers": [container()],
        "volumes": [
            {
                "name": "kube-api-access",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                    ]
                },
            }
        ],
        "serviceAccountName": "checkout-api",
        "tolerations": [
            {
                "key": f"node.kubernetes.io/{taint}",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }
            for taint in ("not-ready", "unreachable")
        ],
    }
    if node is not None:
        spec["nodeName"] = node
    return spec


def pod_status(index: int, *, ready: bool) -> JsonObject:
    flag = "True" if ready else "False"
    return {
        "phase": "Running",
        "podIP": f"10.1.{index % 250}.{index % 200}",
        "hostIP": "10.0.1.2",
        "startTime": "2024-05-01T12:00:01Z",
        "qosClass": "Burstable",
        "conditions": [
            {"type": kind, "status": status, "lastTransitionTime": "2024-05-01T12:00:04Z"}
            for kind, status in (
                ("Initialized", "True"),
                ("Ready", flag),
                ("ContainersReady", flag),
                ("PodScheduled", "True"),
            )
        ],
        "containerStatuses": [
            {
                "name": "app",
                "ready": ready,
                "restartCount": 0,
                "started": True,
                "image": IMAGE,
                "imageID": "registry.example.com/team/checkout-api@sha256:" + "ab" * 32,
                "containerID": "containerd://" + "cd" * 32,
                "state": {"running": {"startedAt": "2024-05-01T12:00:03Z"}},
            }
        ],
    }


def pod(
    index: int,
    *,
    namespace: str,
    name: str,
    replicaset: str | None,
    ready: bool = True,
    terminating: bool = False,
) -> JsonObject:
    """A running pod (owned by `replicaset`, or bare when None), as listed by the API server."""
    metadata: JsonObject = {
        "name": name,
        "namespace": namespace,
        "uid": object_uid("Pod", index),
        "resourceVersion": str(100000 + index),
        "creationTimestamp": CREATED_AT,
        "labels": {"app": "checkout-api", "pod-template-hash": "7f9c8d6b5", "tier": "backend"},
        "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
        "managedFields": _managed_fields(subresource_status=True),
    }
    if replicaset is not None:
        metadata["generateName"] = f"{replicaset}-"
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": replicaset,
                "uid": "0d7b3a1e-aaaa-bbbb-cccc-000000000001",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    if terminating:
        metadata["deletionTimestamp"] = "2024-05-01T12:30:00Z"
        metadata["deletionGracePeriodSeconds"] = 30
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": pod_spec(node_name(index)),
        "status": pod_status(index, ready=ready),
    }


def replicaset(index: int, *, namespace: str, name: str, deployment: str,
               replicas: int) -> JsonObject:  # fmt: skip
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": object_uid("ReplicaSet", index),
            "resourceVersion": str(50000 + index),
            "generation": 1,
            "creationTimestamp": CREATED_AT,
            "labels": {"app": deployment, "pod-template-hash": "7f9c8d6b5"},
            "annotations": {"deployment.kubernetes.io/revision": "1"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": deployment,
                    "uid": object_uid("Deployment", index),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": _managed_fields(subresource_status=False),
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": deployment, "pod-template-hash": "7f9c8d6b5"}},
            "template": {
                "metadata": {"labels": {"app": deployment, "pod-template-hash": "7f9c8d6b5"}},
                "spec": pod_spec(None),
            },
        },
        "status": {
            "replicas": replicas,
            "fullyLabeledReplicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "observedGeneration": 1,
        },
    }


def deployment(
    index: int,
    *,
    namespace: str,
    name: str,
    replicas: int,
    ready_replicas: int | None = None,
    strategy: str = "RollingUpdate",
    restarted_at: str | None = None,
    annotations: dict[str, str] | None = None,
    deleting: bool = False,
) -> JsonObject:
    ready = replicas if ready_replicas is None else ready_replicas
    metadata: JsonObject = {
        "name": name,
        "namespace": namespace,
        "uid": object_uid("Deployment", index),
        "resourceVersion": str(20000 + index),
        "generation": 1,
        "creationTimestamp": CREATED_AT,
        "labels": {"app": name},
        "annotations": {"deployment.kubernetes.io/revision": "1", **(annotations or {})},
        "managedFields": _managed_fields(subresource_status=False),
    }
    if restarted_at is not None:
        metadata["annotations"][RESTARTED_AT_ANNOTATION] = restarted_at
    if deleting:
        metadata["deletionTimestamp"] = "2024-05-01T12:30:00Z"
        metadata["finalizers"] = ["foregroundDeletion"]
    strategy_spec: JsonObject = {"type": strategy}
    if strategy == "RollingUpdate":
        strategy_spec["rollingUpdate"] = {"maxSurge": "25%", "maxUnavailable": "25%"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": strategy_spec,
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec(None)},
        },
        "status": {
            "observedGeneration": 1,
            "replicas": max(replicas, ready),
            "updatedReplicas": replicas,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
            ],
        },
    }


def service_account_user(namespace: str, name: str, uid: str) -> JsonObject:
    """A ServiceAccount's userInfo, as kube-apiserver fills it in from the caller's token."""
    return {
        "username": f"system:serviceaccount:{namespace}:{name}",
        "uid": uid,
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}",
                   "system:authenticated"],
    }  # fmt: skip


CLUSTER_AUTOSCALER_USER = service_account_user(
    "kube-system", "cluster-autoscaler", "9e1b3c4d-0000-0000-0000-000000000001"
)


def eviction_review(
    namespace: str, pod: str, *, uid: str | None = None,
    user: JsonObject = CLUSTER_AUTOSCALER_USER, dry_run: bool = False,
    precondition_uid: str | None = None,
) -> JsonObject:  # fmt: skip
    """The AdmissionReview v1 kube-apiserver sends a validating webhook for POST
    pods/{pod}/eviction (apiserver's pkg/admission/plugin/webhook/request/admissionreview.go,
    CreateV1AdmissionReview): `uid` the request's (a fresh one unless given), `user` who
    evicts (copied: the caller may change the review), the Eviction's deleteOptions with a
    uid precondition when `precondition_uid` is given (as Karpenter sends it), else empty (as
    kubectl drain sends it)."""
    delete_options: JsonObject = {}
    if precondition_uid is not None:
        delete_options["preconditions"] = {"uid": precondition_uid}
    request: JsonObject = {
        "uid": str(uuid.uuid4()) if uid is None else uid,
        "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "eviction",
        "requestKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "requestSubResource": "eviction",
        "name": pod,
        "namespace": namespace,
        "operation": "CREATE",
        "userInfo": copy.deepcopy(user),
        "object": {
            "kind": "Eviction",
            "apiVersion": "policy/v1",
            "metadata": {"name": pod, "namespace": namespace, "creationTimestamp": None},
            "deleteOptions": delete_options,
        },
        "oldObject": None,
        "dryRun": dry_run,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
