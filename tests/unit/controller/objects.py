"""The controller's test objects, built in one place: the pod `kubectl drain` evicts, its
ReplicaSet and Deployment (slim, as the cache keeps them, and raw, as the API server sends
them), the eviction request and the AdmissionReview kube-apiserver sends for it.

Every module of tests/unit/controller builds its cases from these (`pod(...)`,
`deployment(...)` for a variant), so a field added to `PodInfo` or `DeploymentInfo` is
filled in here once. `test_objects_agree_with_the_decoder` (test_controller_model.py)
checks the slim objects are what the decoder makes of the raw ones.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from bench.objects import eviction_review

from graceful_drain.annotations import COMPLETED_AT_ANNOTATION, RESTARTED_AT_ANNOTATION
from graceful_drain.controller.decision.model import (
    TEMPLATE_RESTARTED_AT_ANNOTATION,
    DeploymentInfo,
    PodInfo,
    ReplicaSetInfo,
)
from graceful_drain.controller.decision.request import EvictionRequest

Obj = dict[str, Any]

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
UID = "705ab4f5-6393-11e8-b7cc-42010a800002"  # the AdmissionReview's request uid
ENABLED = "graceful-drain.stonal.com/enabled"  # spelled out: the documented annotation
NAMESPACE = "default"
POD_NAME = "web-5d9-abcde"

POD = PodInfo(
    namespace=NAMESPACE, name=POD_NAME, uid="pod-uid", node_name="node-a", terminating=False,
    phase="Running", ready=True, owner_kind="ReplicaSet", owner_replicaset="web-5d9",
)  # fmt: skip
REPLICASET = ReplicaSetInfo(NAMESPACE, "web-5d9", "rs-uid", "web")
# One replica, Ready, rolling out with a surge of 1, not stamped: the webhook would hold an
# eviction of POD and stamp it.
DEPLOYMENT = DeploymentInfo(
    namespace=NAMESPACE, name="web", uid="dep-uid", resource_version="42", generation=3,
    deleting=False, has_annotations=True, replicas=1, strategy_type="RollingUpdate",
    max_surge=1, paused=False, observed_generation=3, status_replicas=1, updated_replicas=1,
    ready_replicas=1, available_replicas=1, restarted_at=None, restarted_at_raw=None,
    template_restarted_at=None,
)  # fmt: skip
# What the webhook reads from `review()`'s request, as a drain client's eviction.
REQUEST = EvictionRequest(
    uid="req-1", operation="CREATE", group="", version="v1", resource="pods",
    sub_resource="eviction", namespace=NAMESPACE, name=POD_NAME, dry_run=False,
    username="system:serviceaccount:kube-system:cluster-autoscaler",
)  # fmt: skip


def pod(**changes: Any) -> PodInfo:
    return replace(POD, **changes)


def deployment(**changes: Any) -> DeploymentInfo:
    return replace(DEPLOYMENT, **changes)


def review(**request_changes: Any) -> Obj:
    """An AdmissionReview as kube-apiserver sends it for `kubectl drain` evicting POD
    (bench/objects.py's `eviction_review`, the one builder), with `request_changes` set on its
    request."""
    admin = {"username": "kubernetes-admin", "groups": ["system:masters"]}
    document = eviction_review(NAMESPACE, POD_NAME, uid=UID, user=admin,
                               precondition_uid="pod-uid")  # fmt: skip
    document["request"].update(request_changes)
    return document


def review_body(**request_changes: Any) -> bytes:
    """`review()` as the bytes of the webhook's POST body."""
    return json.dumps(review(**request_changes)).encode()


def raw_pod() -> Obj:
    """POD as the API server sends it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": POD_NAME,
            "namespace": NAMESPACE,
            "uid": "pod-uid",
            "resourceVersion": "100",
            "labels": {"app": "web", "pod-template-hash": "5d9"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-5d9",
                    "uid": "rs-uid",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"nodeName": "node-a", "containers": [{"name": "web", "image": "nginx"}]},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "True"},
                {"type": "ContainersReady", "status": "True"},
            ],
        },
    }


def raw_replicaset() -> Obj:
    """REPLICASET as the API server sends it."""
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": "web-5d9",
            "namespace": NAMESPACE,
            "uid": "rs-uid",
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "controller": True}
            ],
        },
    }


def raw_deployment(
    *,
    restarted_at: str | None = None,
    template: str | None = None,
    generation: int = 2,
    observed: int = 2,
    replicas: int = 1,
    status_replicas: int = 1,
    updated: int = 1,
    ready: int = 1,
    available: int = 1,
    deleting: bool = False,
    template_annotations: bool = True,
    paused: bool = False,
    completed_at: str | None = None,
    grace: int | None = None,
) -> Obj:
    """The Deployment `web` as the API server sends it, with the fields the reconciler reads
    made to order (by default one replica, Ready, not stamped, generation 2 observed)."""
    annotations = {} if restarted_at is None else {RESTARTED_AT_ANNOTATION: restarted_at}
    if completed_at is not None:
        annotations[COMPLETED_AT_ANNOTATION] = completed_at
    pod_spec: Obj = {"containers": [{"name": "c"}]}
    if grace is not None:
        pod_spec["terminationGracePeriodSeconds"] = grace
    template_meta: Obj = {"labels": {"app": "web"}}
    if template_annotations:
        template_meta["annotations"] = {"team": "platform"}
        if template is not None:
            template_meta["annotations"][TEMPLATE_RESTARTED_AT_ANNOTATION] = template
    metadata: Obj = {
        "name": "web",
        "namespace": "default",
        "uid": "dep-uid",
        "resourceVersion": "42",
        "generation": generation,
        "annotations": annotations,
    }
    if deleting:
        metadata["deletionTimestamp"] = "2024-05-01T11:59:00Z"
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "paused": paused,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": template_meta, "spec": pod_spec},
        },
        "status": {
            "observedGeneration": observed,
            "replicas": status_replicas,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": available,
        },
    }
