"""Node-pressure eviction decisions, as pure functions after pkg/kubelet/eviction.

helpers.go: the signal -> condition/resource maps, `rankMemoryPressure`
(exceeds requests, then priority, then usage above request),
`rankPIDPressure`, `rankDiskPressureFunc` and `evictionMessage` (note the
trailing space after every sentence, as upstream). eviction_manager.go:
`Admit` for pods arriving under pressure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kubesim.cluster.podstatus import go_list
from kubesim.cluster.quantity import Format, Quantity, parse_or_zero
from kubesim.cluster.scheduling import pod_priority, pod_requests, tolerations_tolerate
from kubesim.types import Obj

REASON = "Evicted"
NODE_LOW_FMT = "The node was low on resource: {}. "
NODE_CONDITION_FMT = "The node had condition: {}. "
CONTAINER_FMT = "Container {} was using {}, request is {}, has larger consumption of {}. "
THRESHOLD_MET_FMT = "Threshold quantity: {}, available: {}. "
OFFENDING_CONTAINERS = "offending_containers"
OFFENDING_CONTAINERS_USAGE = "offending_containers_usage"
STARVED_RESOURCE = "starved_resource"
TERMINATION_BY_KUBELET = "TerminationByKubelet"
# eviction_manager.go: hard thresholds kill with this override (the runtime's floor is 2s)
IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS = 1
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000  # scheduling.SystemCriticalPriority


@dataclass(frozen=True, slots=True)
class Signal:
    name: str  # the eviction signal, e.g. memory.available
    resource: str  # the resource named in messages and the starved_resource annotation
    condition: str  # the node condition it drives
    condition_reason: str  # the kubelet's reason while the condition is True
    taint: str  # the node lifecycle controller's NoSchedule taint for the condition
    format: Format  # how the summary API quantity prints


MEMORY = Signal(
    "memory.available",
    "memory",
    "MemoryPressure",
    "KubeletHasInsufficientMemory",
    "node.kubernetes.io/memory-pressure",
    "BinarySI",
)
DISK = Signal(
    "nodefs.available",
    "ephemeral-storage",
    "DiskPressure",
    "KubeletHasDiskPressure",
    "node.kubernetes.io/disk-pressure",
    "BinarySI",
)
PIDS = Signal(
    "pid.available",
    "pids",
    "PIDPressure",
    "KubeletHasInsufficientPID",
    "node.kubernetes.io/pid-pressure",
    "DecimalSI",
)

SIGNALS: dict[str, Signal] = {
    "memory": MEMORY,
    "memory.available": MEMORY,
    "ephemeral-storage": DISK,
    "disk": DISK,
    "nodefs.available": DISK,
    "pids": PIDS,
    "pid": PIDS,
    "pid.available": PIDS,
}


def signal_for(resource: str) -> Signal:
    try:
        return SIGNALS[resource]
    except KeyError:
        raise ValueError(f"unsupported eviction signal {resource}") from None


def threshold_met(threshold: Quantity, available: Quantity) -> bool:
    """`thresholdsMet` for OpLessThan: the threshold quantity exceeds what is available."""
    return threshold.cmp(available) > 0


def observed(signal: Signal, available: str) -> Quantity:
    """An observation as the summary API reports it (an int64 in the signal's format)."""
    return Quantity.from_int(parse_or_zero(available).value(), signal.format)


def is_critical(pod: Obj) -> bool:
    """`kubelettypes.IsCriticalPod` for API pods: system-critical priority."""
    return pod_priority(pod) >= SYSTEM_CRITICAL_PRIORITY


def container_request(pod: Obj, container: str, resource: str) -> Quantity:
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") == container:
            requests = (c.get("resources") or {}).get("requests") or {}
            if resource in requests:
                return parse_or_zero(requests[resource])
    return Quantity(0)


Usage = Callable[[Obj], Mapping[str, int]]  # pod -> container name -> working set bytes


def rank_memory_pressure(pods: list[Obj], usage: Usage) -> list[Obj]:
    """`rankMemoryPressure`: over-request pods first, then low priority, then the hungriest."""

    def key(pod: Obj) -> tuple[bool, int, int]:
        used = sum(usage(pod).values())
        request = pod_requests(pod).memory
        return (not used > request, pod_priority(pod), -(used - request))

    return sorted(pods, key=key)


def rank_by_priority(pods: list[Obj]) -> list[Obj]:
    """`rankPIDPressure` / `rankDiskPressureFunc` when no per-pod usage is known: priority."""
    return sorted(pods, key=pod_priority)


def eviction_message(
    signal: Signal,
    pod: Obj,
    container_usage: Mapping[str, int] | None,
    threshold: Quantity,
    available: Quantity,
) -> tuple[str, dict[str, str]]:
    """`evictionMessage`: the status/event message and the event's annotations."""
    message = NODE_LOW_FMT.format(signal.resource) + THRESHOLD_MET_FMT.format(threshold, available)
    if container_usage is None:
        return message, {}
    offenders, usages = [], []
    if signal is MEMORY:
        for c in (pod.get("spec") or {}).get("containers") or []:
            name = c.get("name", "")
            if name not in container_usage:
                continue
            used = Quantity.from_int(container_usage[name], "BinarySI")
            request = container_request(pod, name, signal.resource)
            if used.cmp(request) > 0:
                message += CONTAINER_FMT.format(name, used, request, signal.resource)
                offenders.append(name)
                usages.append(str(used))
    annotations = {
        OFFENDING_CONTAINERS: ",".join(offenders),
        OFFENDING_CONTAINERS_USAGE: ",".join(usages),
        STARVED_RESOURCE: signal.resource,
    }
    return message, annotations


def is_best_effort(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("qosClass") == "BestEffort"


def admission_rejection(pressure_conditions: list[str], pod: Obj) -> str | None:
    """`managerImpl.Admit`: the rejection message, or None when the pod is admitted."""
    if not pressure_conditions or is_critical(pod):
        return None
    if pressure_conditions == ["MemoryPressure"]:
        if not is_best_effort(pod):
            return None
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        if tolerations_tolerate(tolerations, {"key": MEMORY.taint, "effect": "NoSchedule"}):
            return None
    return NODE_CONDITION_FMT.format(go_list(pressure_conditions))
