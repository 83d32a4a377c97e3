"""autoscaling/v2 HorizontalPodAutoscaler <-> autoscaling/v1, the conversion kube-apiserver
applies (pkg/apis/autoscaling/v1/conversion.go): both versions share one storage (v2), so
`kubectl autoscale` (kubectl <= 1.32 writes autoscaling/v1) and `kubectl get hpa` (v2)
see one object.

v1 knows one metric, the CPU utilization target (`targetCPUUtilizationPercentage`, and
`currentCPUUtilizationPercentage` in the status); v2's conditions travel in v1 as the
`autoscaling.alpha.kubernetes.io/conditions` annotation, as upstream. A v1 object without a
target gets v2's default of 80% CPU once stored, as upstream. Not carried: v2's other
metrics and behavior, which upstream keeps in further annotations of the v1 form.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from kubesim import jsoncodec
from kubesim.types import Obj

V1 = "autoscaling/v1"
V2 = "autoscaling/v2"
CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"


def _is_cpu_utilization(metric: Any) -> bool:
    if not isinstance(metric, dict) or metric.get("type") != "Resource":
        return False
    resource = metric.get("resource") or {}
    target = resource.get("target") or {}
    return bool(resource.get("name") == "cpu" and target.get("type") == "Utilization")


def to_v1(v2: Obj) -> Obj:
    out = jsoncodec.copy(v2)
    out["apiVersion"] = V1
    spec = out.get("spec")
    if isinstance(spec, dict):
        metrics = spec.pop("metrics", None) or []
        spec.pop("behavior", None)
        for metric in metrics:
            if _is_cpu_utilization(metric):
                value = metric["resource"]["target"].get("averageUtilization")
                if value is not None:
                    spec["targetCPUUtilizationPercentage"] = value
                break
    status = out.get("status")
    if isinstance(status, dict):
        status.setdefault("currentReplicas", 0)  # not omitempty in v1
        for current in status.pop("currentMetrics", None) or []:
            resource = (current or {}).get("resource") or {}
            if current.get("type") == "Resource" and resource.get("name") == "cpu":
                value = (resource.get("current") or {}).get("averageUtilization")
                if value is not None:
                    status["currentCPUUtilizationPercentage"] = value
        conditions = status.pop("conditions", None)
        if conditions:
            meta = out.setdefault("metadata", {})
            annotations = dict(meta.get("annotations") or {})
            annotations[CONDITIONS_ANNOTATION] = json.dumps(conditions, separators=(",", ":"))
            meta["annotations"] = annotations
    return out


def to_v2(v1: Obj) -> Obj:
    out = jsoncodec.copy(v1)
    out["apiVersion"] = V2
    spec = out.get("spec")
    if isinstance(spec, dict):
        target = spec.pop("targetCPUUtilizationPercentage", None)
        if target is not None:
            cpu = {"type": "Utilization", "averageUtilization": target}
            spec["metrics"] = [{"type": "Resource", "resource": {"name": "cpu", "target": cpu}}]
    status = out.get("status")
    meta = out.get("metadata") or {}
    annotations = dict(meta.get("annotations") or {})
    conditions = annotations.pop(CONDITIONS_ANNOTATION, None)
    if conditions is not None:
        if annotations:
            meta["annotations"] = annotations
        else:
            meta.pop("annotations", None)
    if isinstance(status, dict):
        current = status.pop("currentCPUUtilizationPercentage", None)
        if current is not None:
            status["currentMetrics"] = [{"type": "Resource", "resource": {
                "name": "cpu", "current": {"averageUtilization": current}}}]  # fmt: skip
        if conditions is not None:
            with contextlib.suppress(ValueError):
                status["conditions"] = json.loads(conditions)
    return out
