"""The Node object a kubelet registers and the conditions it keeps, after
pkg/kubelet/kubelet_node_status.go and pkg/kubelet/nodestatus/setters.go.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kubesim import jsoncodec
from kubesim.types import Obj

KUBELET_VERSION = "v1.32.0"
CONTAINER_RUNTIME_VERSION = "containerd://1.7.22"
KUBELET_PORT = 10250

# condition type -> {pressure?: (reason, message, event reason)}, in setter order
PRESSURE_TEXT: dict[str, dict[bool, tuple[str, str, str]]] = {
    "MemoryPressure": {
        True: (
            "KubeletHasInsufficientMemory",
            "kubelet has insufficient memory available",
            "NodeHasInsufficientMemory",
        ),
        False: (
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
            "NodeHasSufficientMemory",
        ),
    },
    "DiskPressure": {
        True: ("KubeletHasDiskPressure", "kubelet has disk pressure", "NodeHasDiskPressure"),
        False: (
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
            "NodeHasNoDiskPressure",
        ),
    },
    "PIDPressure": {
        True: (
            "KubeletHasInsufficientPID",
            "kubelet has insufficient PID available",
            "NodeHasInsufficientPID",
        ),
        False: (
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
            "NodeHasSufficientPID",
        ),
    },
}
READY_REASON = "KubeletReady"
READY_MESSAGE = "kubelet is posting ready status"


@dataclass(frozen=True, slots=True)
class NodeShape:
    """What a simulated machine offers: capacity, and how it registers."""

    cpu: str = "4"
    memory: str = "16Gi"
    pods: str = "110"
    ephemeral_storage: str = "100Gi"
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Obj] = ()
    unschedulable: bool = False
    allocatable: Mapping[str, str] | None = None  # defaults to capacity (no reservations)


def node_status_event(node: str, reason: str) -> str:
    """`recordNodeStatusEvent`'s message."""
    return f"Node {node} status is now: {reason}"


def update_conditions(
    conditions: Iterable[Obj], pressure: Iterable[str], now: str
) -> tuple[list[Obj], list[str]]:
    """Run the pressure and Ready setters once, as a status sync does.

    Returns the new conditions (Ready last, as upstream insists) and the node
    event reasons the setters record on transitions.
    """
    under = set(pressure)
    current = [jsoncodec.copy(c) for c in conditions if isinstance(c, dict)]
    events: list[str] = []
    by_type = {c.get("type"): c for c in current}
    out: list[Obj] = [c for c in current if c.get("type") not in (*PRESSURE_TEXT, "Ready")]
    for kind, texts in PRESSURE_TEXT.items():
        condition = by_type.get(kind) or {"type": kind, "status": "Unknown"}
        condition["lastHeartbeatTime"] = now
        wanted = "True" if kind in under else "False"
        if condition.get("status") != wanted:
            reason, message, event = texts[kind in under]
            condition.update(status=wanted, reason=reason, message=message, lastTransitionTime=now)
            events.append(event)
        out.append(condition)
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": READY_REASON,
        "message": READY_MESSAGE,
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    old_ready = by_type.get("Ready")
    if old_ready is not None:
        if old_ready.get("status") == "True":
            ready["lastTransitionTime"] = old_ready.get("lastTransitionTime", now)
        else:
            events.append("NodeReady")
    out.append(ready)
    return out, events


def default_labels(name: str) -> dict[str, str]:
    return {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
    }


def capacity_of(shape: NodeShape) -> dict[str, str]:
    return {
        "cpu": shape.cpu,
        "memory": shape.memory,
        "pods": shape.pods,
        "ephemeral-storage": shape.ephemeral_storage,
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }


def node_object(name: str, shape: NodeShape, host_ip: str, pod_cidr: str) -> Obj:
    """The Node a kubelet registers (`initialNode`), before its first status sync."""
    capacity = capacity_of(shape)
    allocatable = {**capacity, **(shape.allocatable or {})}
    taints = [dict(t) for t in shape.taints]
    if shape.unschedulable and not any(
        t.get("key") == "node.kubernetes.io/unschedulable" for t in taints
    ):
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    spec: Obj = {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr]}
    if taints:
        spec["taints"] = taints
    if shape.unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {**default_labels(name), **shape.labels},
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "addresses": [
                {"type": "InternalIP", "address": host_ip},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": KUBELET_PORT}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": "",
                "containerRuntimeVersion": CONTAINER_RUNTIME_VERSION,
                "kernelVersion": "6.8.0-kubesim",
                "kubeProxyVersion": KUBELET_VERSION,
                "kubeletVersion": KUBELET_VERSION,
                "machineID": "",
                "operatingSystem": "linux",
                "osImage": "kubesim simulated node",
                "systemUUID": "",
            },
        },
    }
