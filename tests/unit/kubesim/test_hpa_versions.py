"""autoscaling/v1 <-> autoscaling/v2 HorizontalPodAutoscalers as kube-apiserver converts
them: the CPU utilization target and current value, v2's conditions in v1's annotation,
v1's currentReplicas always written, and a round trip that loses nothing v1 can hold."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kubesim.apiserver.hpa_versions import CONDITIONS_ANNOTATION, to_v1, to_v2

Obj = dict[str, Any]
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def cpu(target: int) -> Obj:
    return {"type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                   "averageUtilization": target}}}  # fmt: skip


def test_v2_to_v1() -> None:
    condition = {"type": "AbleToScale", "status": "True", "reason": "x",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
    memory = {"type": "Resource", "resource": {"name": "memory", "target": {
        "type": "AverageValue", "averageValue": "1Gi"}}}  # fmt: skip
    v2: Obj = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
          "metadata": {"name": "web"},
          "spec": {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 3,
                   "metrics": [memory, cpu(60)]},
          "status": {"desiredReplicas": 2, "conditions": [condition],
                     "currentMetrics": [{"type": "Resource", "resource": {
                         "name": "cpu", "current": {"averageUtilization": 42}}}]}}  # fmt: skip
    v1 = to_v1(v2)
    assert v1["apiVersion"] == "autoscaling/v1"
    assert v1["spec"] == {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 3,
                          "targetCPUUtilizationPercentage": 60}  # fmt: skip
    assert v1["status"] == {"desiredReplicas": 2, "currentReplicas": 0,
                            "currentCPUUtilizationPercentage": 42}  # fmt: skip
    assert json.loads(v1["metadata"]["annotations"][CONDITIONS_ANNOTATION]) == [condition]
    back = to_v2(v1)
    assert back["status"]["conditions"] == [condition]
    assert "annotations" not in back["metadata"]
    assert v2["spec"]["metrics"] == [memory, cpu(60)]  # the input is left as it was


@given(
    minimum=st.integers(1, 10), maximum=st.integers(10, 20),
    target=st.one_of(st.none(), st.integers(1, 100)),
    desired=st.integers(0, 20), current=st.integers(0, 20),
)  # fmt: skip
def test_v1_round_trip(
    minimum: int, maximum: int, target: int | None, desired: int, current: int
) -> None:
    spec: Obj = {"scaleTargetRef": REF, "minReplicas": minimum, "maxReplicas": maximum}
    if target is not None:
        spec["targetCPUUtilizationPercentage"] = target
    v1 = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
          "metadata": {"name": "web"}, "spec": spec,
          "status": {"desiredReplicas": desired, "currentReplicas": current}}  # fmt: skip
    v2 = to_v2(v1)
    assert v2["apiVersion"] == "autoscaling/v2"
    assert ("metrics" in v2["spec"]) == (target is not None)
    assert to_v1(v2) == v1
