"""The kubelet eviction manager's pure decisions (pkg/kubelet/eviction/helpers.go)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.cluster.pressure_eviction import (
    DISK,
    MEMORY,
    PIDS,
    admission_rejection,
    eviction_message,
    observed,
    rank_by_priority,
    rank_memory_pressure,
    signal_for,
    threshold_met,
)
from kubesim.cluster.quantity import parse_quantity

Obj = dict[str, Any]
MI = 2**20


def pod(name: str, request: str | None = None, priority: int = 0, qos: str = "Burstable",
        containers: tuple[str, ...] = ("app",)) -> Obj:  # fmt: skip
    specs = []
    for c in containers:
        spec: Obj = {"name": c}
        if request is not None:
            spec["resources"] = {"requests": {"memory": request}}
        specs.append(spec)
    return {"metadata": {"name": name, "uid": name}, "spec": {"priority": priority,
            "containers": specs}, "status": {"qosClass": qos}}  # fmt: skip


def test_the_seed_message_word_for_word() -> None:
    message, annotations = eviction_message(
        MEMORY, pod("p", "100Mi"), {"app": 300 * MI}, parse_quantity("100Mi"),
        observed(MEMORY, "87Mi"),
    )  # fmt: skip
    assert message == (
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 87Mi. "
        "Container app was using 300Mi, request is 100Mi, has larger consumption of memory. "
    )
    assert annotations == {"offending_containers": "app", "offending_containers_usage": "300Mi",
                           "starved_resource": "memory"}  # fmt: skip


def test_message_lists_only_containers_over_their_request() -> None:
    message, annotations = eviction_message(
        MEMORY, pod("p", None, containers=("app", "side", "idle")),
        {"app": 300 * MI + 1, "side": 5 * MI}, parse_quantity("1Gi"), observed(MEMORY, "512Mi"),
    )  # fmt: skip
    assert message == (
        "The node was low on resource: memory. Threshold quantity: 1Gi, available: 512Mi. "
        "Container app was using 314572801, request is 0, has larger consumption of memory. "
        "Container side was using 5Mi, request is 0, has larger consumption of memory. "
    )
    assert annotations["offending_containers"] == "app,side"
    assert annotations["offending_containers_usage"] == "314572801,5Mi"


@pytest.mark.parametrize(
    ("signal", "threshold", "available", "text"),
    [
        (PIDS, "100", "87", "The node was low on resource: pids. Threshold quantity: 100, "
                            "available: 87. "),
        (DISK, "10Gi", "1Gi", "The node was low on resource: ephemeral-storage. Threshold "
                              "quantity: 10Gi, available: 1Gi. "),
    ],
)  # fmt: skip
def test_other_signals(signal: Any, threshold: str, available: str, text: str) -> None:
    message, annotations = eviction_message(
        signal, pod("p"), {}, parse_quantity(threshold), observed(signal, available)
    )
    assert message == text
    assert annotations == {"offending_containers": "", "offending_containers_usage": "",
                           "starved_resource": signal.resource}  # fmt: skip


def test_signal_names() -> None:
    assert signal_for("memory") is MEMORY and signal_for("disk") is DISK
    assert signal_for("pid") is PIDS
    with pytest.raises(ValueError, match="unsupported eviction signal"):
        signal_for("gpu")


@given(st.integers(1, 2**40), st.integers(0, 2**40))
def test_threshold_met_when_less_is_available(threshold: int, available: int) -> None:
    met = threshold_met(parse_quantity(str(threshold)), observed(MEMORY, str(available)))
    assert met is (available < threshold)


def test_memory_ranking_exceeds_requests_then_priority_then_usage() -> None:
    usage = {"over-high": 200, "over-low-small": 150, "over-low-big": 900, "under-low": 10,
             "besteffort": 50}  # fmt: skip
    pods = [
        pod("under-low", "100Mi", priority=0),
        pod("over-high", "100Mi", priority=1000),
        pod("over-low-small", "100Mi", priority=0),
        pod("over-low-big", "100Mi", priority=0),
        pod("besteffort", None, priority=5000, qos="BestEffort"),
    ]
    ranked = rank_memory_pressure(pods, lambda p: {"app": usage[p["metadata"]["name"]] * MI})
    assert [p["metadata"]["name"] for p in ranked] == [
        "over-low-big",
        "over-low-small",
        "over-high",
        "besteffort",
        "under-low",
    ]


def test_pid_and_disk_ranking_by_priority() -> None:
    ranked = rank_by_priority([pod("b", priority=5), pod("a", priority=1), pod("c", priority=9)])
    assert [p["metadata"]["name"] for p in ranked] == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("conditions", "the_pod", "rejected"),
    [
        ([], pod("p", qos="BestEffort"), None),
        (["MemoryPressure"], pod("p", "1Mi"), None),
        (["MemoryPressure"], pod("p", qos="BestEffort"),
         "The node had condition: [MemoryPressure]. "),
        (["DiskPressure"], pod("p", "1Mi"), "The node had condition: [DiskPressure]. "),
        (["MemoryPressure", "PIDPressure"], pod("p", "1Mi"),
         "The node had condition: [MemoryPressure PIDPressure]. "),
        (["DiskPressure"], pod("p", priority=2_000_000_000), None),  # critical pods are admitted
    ],
)  # fmt: skip
def test_admission_under_pressure(
    conditions: list[str], the_pod: Obj, rejected: str | None
) -> None:
    assert admission_rejection(conditions, the_pod) == rejected


def test_best_effort_pod_tolerating_memory_pressure_is_admitted() -> None:
    tolerant = pod("p", qos="BestEffort")
    tolerant["spec"]["tolerations"] = [
        {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert admission_rejection(["MemoryPressure"], tolerant) is None
