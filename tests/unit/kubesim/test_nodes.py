"""Node conditions (nodestatus setters), lifecycle taints and the container runtime helpers."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.cluster.containerruntime import CrashBackoff, IpPool, go_duration, normalize_image
from kubesim.cluster.node_lifecycle import reconciled_taints
from kubesim.cluster.nodestatus import NodeShape, node_object, update_conditions

Obj = dict[str, Any]
T0, T1 = "2024-01-01T00:00:00Z", "2024-01-01T00:00:10Z"


def test_first_sync_sets_all_conditions_ready_last() -> None:
    conditions, events = update_conditions([], [], T0)
    assert [c["type"] for c in conditions] == [
        "MemoryPressure",
        "DiskPressure",
        "PIDPressure",
        "Ready",
    ]
    assert conditions[0] == {"type": "MemoryPressure", "status": "False",
                             "reason": "KubeletHasSufficientMemory",
                             "message": "kubelet has sufficient memory available",
                             "lastHeartbeatTime": T0, "lastTransitionTime": T0}  # fmt: skip
    assert conditions[3] == {"type": "Ready", "status": "True", "reason": "KubeletReady",
                             "message": "kubelet is posting ready status",
                             "lastHeartbeatTime": T0, "lastTransitionTime": T0}  # fmt: skip
    # the setters record transitions from Unknown, and no NodeReady for a new condition
    assert events == ["NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID"]


def test_pressure_transition_and_heartbeat() -> None:
    first, _ = update_conditions([], [], T0)
    pressed, events = update_conditions(first, ["MemoryPressure"], T1)
    memory = pressed[0]
    assert (memory["status"], memory["reason"], memory["message"]) == (
        "True",
        "KubeletHasInsufficientMemory",
        "kubelet has insufficient memory available",
    )
    assert memory["lastTransitionTime"] == T1
    assert events == ["NodeHasInsufficientMemory"]
    # unchanged conditions only get a heartbeat
    assert pressed[1]["lastTransitionTime"] == T0 and pressed[1]["lastHeartbeatTime"] == T1
    assert pressed[3]["lastTransitionTime"] == T0 and pressed[3]["lastHeartbeatTime"] == T1
    _, events = update_conditions(pressed, ["DiskPressure", "PIDPressure"], T1)
    assert events == ["NodeHasSufficientMemory", "NodeHasDiskPressure", "NodeHasInsufficientPID"]


def test_ready_again_records_node_ready() -> None:
    not_ready = [{"type": "Ready", "status": "False", "lastTransitionTime": T0}]
    conditions, events = update_conditions(not_ready, [], T1)
    assert events[-1] == "NodeReady" and conditions[-1]["lastTransitionTime"] == T1


def test_registered_node() -> None:
    node = node_object("n1", NodeShape(cpu="2", labels={"zone": "a"}, unschedulable=True),
                       "172.18.0.2", "10.244.1.0/24")  # fmt: skip
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "n1"
    assert node["metadata"]["labels"]["zone"] == "a"
    assert node["spec"]["unschedulable"] is True
    assert node["spec"]["taints"] == [
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    ]
    assert node["status"]["allocatable"]["cpu"] == "2"
    assert node["status"]["addresses"][0] == {"type": "InternalIP", "address": "172.18.0.2"}


# node lifecycle controller: doNoScheduleTaintingPass


def node_with(conditions: list[Obj], taints: list[Obj], unschedulable: bool = False) -> Obj:
    return {"metadata": {"name": "n"}, "spec": {"taints": taints, "unschedulable": unschedulable},
            "status": {"conditions": conditions}}  # fmt: skip


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (node_with([{"type": "MemoryPressure", "status": "False"}], []), None),
        (node_with([{"type": "MemoryPressure", "status": "True"}], []),
         [{"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule", "timeAdded": T0}]),
        (node_with([{"type": "MemoryPressure", "status": "False"}],
                   [{"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"},
                    {"key": "mine", "effect": "NoSchedule"}]),
         [{"key": "mine", "effect": "NoSchedule"}]),
        (node_with([{"type": "Ready", "status": "Unknown"},
                    {"type": "PIDPressure", "status": "True"}], [], unschedulable=True),
         [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": T0},
          {"key": "node.kubernetes.io/pid-pressure", "effect": "NoSchedule", "timeAdded": T0},
          {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": T0}]),
        (node_with([], [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
                   unschedulable=True), None),
        (node_with([], [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]), []),
        # a NoExecute taint with a managed key is someone else's
        (node_with([], [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]), None),
    ],
)  # fmt: skip
def test_condition_taints(node: Obj, expected: list[Obj] | None) -> None:
    assert reconciled_taints(node, T0) == expected


# container runtime helpers


@pytest.mark.parametrize(
    ("image", "normalized"),
    [
        ("nginx", "docker.io/library/nginx:latest"),
        ("nginx:1.25", "docker.io/library/nginx:1.25"),
        ("bitnami/redis:7", "docker.io/bitnami/redis:7"),
        ("registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.9"),
        ("localhost:5000/app", "localhost:5000/app:latest"),
        ("busybox@sha256:abc", "docker.io/library/busybox@sha256:abc"),
    ],
)
def test_normalize_image(image: str, normalized: str) -> None:
    assert normalize_image(image)[0] == normalized


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(10, "10s"), (20, "20s"), (80, "1m20s"), (160, "2m40s"), (300, "5m0s"), (0.05, "50ms"),
     (0.0015, "1.5ms"), (1.5, "1.5s"), (3600, "1h0m0s"), (0, "0s")],
)  # fmt: skip
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_crash_backoff_sequence_like_the_kubelet() -> None:
    backoff = CrashBackoff(10, 300)
    delays = []
    now = 0.0
    for _ in range(8):
        delay = backoff.next_delay(now)
        delays.append(delay)
        now += delay + 1  # the container runs a second each time
    assert delays == [0, 10, 20, 40, 80, 160, 300, 300]
    assert backoff.next_delay(now + 601 + 300) == 0  # quiet for twice the cap: reset


@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=30))
def test_ip_pool_never_hands_out_an_address_twice(owners: list[str]) -> None:
    pool = IpPool("10.244.1.0/29")
    held: dict[str, str] = {}
    for owner in owners:
        if owner in held:
            pool.release(owner)
            del held[owner]
        else:
            held[owner] = pool.allocate(owner)
        assert len(set(held.values())) == len(held)
        assert "10.244.1.1" not in held.values()
