"""Informer decode cost and cache memory: lightkube models against raw JSON + slim views.

    PYTHONPATH=src python bench/informer_decode.py [--pods 2000]

Prints, per pod: the time to decode a realistic watch-event object (about 7 KiB of JSON, with
managedFields) into a lightkube `Pod` model, into plain dicts, and into the cached `PodInfo`
by either route; and the memory a cache retains per pod when it keeps the `PodInfo` only,
a raw dict, or a lightkube model. Figures are relative to one run on one machine.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import msgspec
from lightkube.core.decoders import decode_object
from lightkube.resources.core_v1 import Pod

from graceful_drain.controller.model import PodInfo


def realistic_pod(index: int) -> dict[str, Any]:
    name = f"checkout-api-7f9c8d6b5-{index:05d}"
    container = {
        "name": "app",
        "image": "registry.example.com/team/checkout-api:1.42.7",
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
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": "checkout-api-7f9c8d6b5-",
            "namespace": f"team-{index % 20}",
            "uid": f"5c1f0b7e-1d2a-4c3b-9e8f-{index:012d}",
            "resourceVersion": str(100000 + index),
            "creationTimestamp": "2024-05-01T12:00:00Z",
            "labels": {"app": "checkout-api", "pod-template-hash": "7f9c8d6b5", "tier": "backend"},
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "checkout-api-7f9c8d6b5",
                    "uid": "0d7b3a1e-aaaa-bbbb-cccc-000000000001",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2024-05-01T12:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {"f:labels": {f"f:{k}": {} for k in "abcdef"}},
                        "f:spec": {"f:containers": {'k:{"name":"app"}': {".": {}}}},
                    },
                },
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2024-05-01T12:00:05Z",
                    "fieldsType": "FieldsV1",
                    "subresource": "status",
                    "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}}},
                },
            ],
        },
        "spec": {
            "nodeName": f"ip-10-0-{index % 250}-{index % 200}.eu-west-1.compute.internal",
            "containers": [container],
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
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
        },
        "status": {
            "phase": "Running",
            "podIP": f"10.1.{index % 250}.{index % 200}",
            "hostIP": "10.0.1.2",
            "startTime": "2024-05-01T12:00:01Z",
            "qosClass": "Burstable",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": "2024-05-01T12:00:04Z"}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "image": container["image"],
                    "imageID": "registry.example.com/team/checkout-api@sha256:" + "ab" * 32,
                    "containerID": "containerd://" + "cd" * 32,
                    "state": {"running": {"startedAt": "2024-05-01T12:00:03Z"}},
                }
            ],
        },
    }


def per_item_micros(bodies: list[bytes], step: Callable[[bytes], object]) -> float:
    started = time.perf_counter()
    for body in bodies:
        step(body)
    return (time.perf_counter() - started) / len(bodies) * 1e6


def retained_bytes_per_item(bodies: list[bytes], build: Callable[[bytes], object]) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = {index: build(body) for index, body in enumerate(bodies)}
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return (after - before) / len(bodies)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=2000)
    count = parser.parse_args().pods
    bodies = [json.dumps(realistic_pod(i)).encode() for i in range(count)]
    decode = msgspec.json.Decoder().decode

    def model(body: bytes) -> object:
        return decode_object(body, Pod)

    def slim_via_model(body: bytes) -> object:
        return PodInfo.from_object(msgspec.to_builtins(decode_object(body, Pod)))

    def slim_via_dict(body: bytes) -> object:
        return PodInfo.from_object(decode(body))

    print(f"{count} pods, {sum(map(len, bodies)) / count / 1024:.1f} KiB of JSON each")
    print(f"{'route':<44}{'us/pod':>10}{'retained B/pod':>16}")
    rows = [
        ("lightkube Pod model (kept as is)", model),
        ("plain dict (kept as is)", decode),
        ("lightkube model -> dict -> PodInfo", slim_via_model),
        ("raw dict -> PodInfo (the informer)", slim_via_dict),
    ]
    for label, step in rows:
        per_item_micros(bodies[:200], step)  # warm-up
        micros = min(per_item_micros(bodies, step) for _ in range(3))
        retained = retained_bytes_per_item(bodies, step)
        print(f"{label:<44}{micros:>10.1f}{retained:>16.0f}")


if __name__ == "__main__":
    main()
