"""What the kubelet writes when it terminates a pod, and how to read it back.

Message formats are the kubelet's own (checked against kubernetes/kubernetes):

* ``pkg/kubelet/eviction/helpers.go`` — node-pressure evictions.
  ``nodeLowMessageFmt = "The node was low on resource: %v. "`` followed, when
  known, by ``thresholdMetMessageFmt = "Threshold quantity: %v, available: %v. "``
  and per-container usage.  The resource is a ``v1.ResourceName``: ``memory``,
  ``ephemeral-storage``, or the eviction manager's internal ``inodes`` / ``pids``.
  The event also carries the annotation ``starved_resource`` (``StarvedResourceKey``).
  Admission rejections use ``nodeConditionMessageFmt = "The node had condition: %v. "``
  (a Go slice, e.g. ``[DiskPressure]``).
* ``pkg/kubelet/eviction/eviction_manager.go`` — local-storage limit evictions:
  ``"Container %s exceeded its local ephemeral storage limit %q. "``,
  ``"Pod ephemeral local storage usage exceeds the total limit of containers %s. "``,
  ``"Usage of EmptyDir volume %q exceeds the limit %q. "``.  Status reason and
  event reason are ``Evicted`` (``eviction.Reason``), event type Warning.
* ``pkg/kubelet/preemption/preemption.go`` — critical-pod admission preemption:
  status reason and Warning event reason ``Preempting``, message
  ``"Preempted in order to admit critical pod"``.
* ``pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go`` — graceful node
  shutdown: status reason ``Terminated`` (``Shutdown`` before v1.22), message
  ``"Pod was terminated in response to imminent node shutdown."``.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import NamedTuple

EVICTED_REASON = "Evicted"
PREEMPTING_REASON = "Preempting"
KUBELET_PREEMPTION_MESSAGE = "Preempted in order to admit critical pod"
LEGACY_NODE_SHUTDOWN_REASON = "Shutdown"  # v1.21; later versions use "Terminated" + the message
NODE_SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
KUBELET_COMPONENT = "kubelet"
STARVED_RESOURCE_ANNOTATION = "starved_resource"


class PressuredResource(StrEnum):
    """The node resource whose exhaustion caused a kubelet eviction."""

    MEMORY = "memory"
    EPHEMERAL_STORAGE = "ephemeral-storage"
    PID = "pid"
    OTHER = "other"  # the kubelet named something else, or the message was unreadable


# Inode exhaustion is a DiskPressure signal (nodefs/imagefs inodesFree), hence
# ephemeral-storage; the kubelet's own name is kept next to it in the evidence.
_RESOURCE_NAMES: dict[str, PressuredResource] = {
    "memory": PressuredResource.MEMORY,
    "ephemeral-storage": PressuredResource.EPHEMERAL_STORAGE,
    "inodes": PressuredResource.EPHEMERAL_STORAGE,
    "pids": PressuredResource.PID,
}

PRESSURE_CONDITIONS: dict[str, PressuredResource] = {
    "MemoryPressure": PressuredResource.MEMORY,
    "DiskPressure": PressuredResource.EPHEMERAL_STORAGE,
    "PIDPressure": PressuredResource.PID,
}

PRESSURE_TAINTS: dict[str, PressuredResource] = {
    "node.kubernetes.io/memory-pressure": PressuredResource.MEMORY,
    "node.kubernetes.io/disk-pressure": PressuredResource.EPHEMERAL_STORAGE,
    "node.kubernetes.io/pid-pressure": PressuredResource.PID,
}

# Patterns, compiled by `re` (and cached) when a kubelet message is first parsed: a
# classification with no Evicted event never needs them, and the detector starts inside a
# pod's grace period.
_NODE_LOW = r"The node was low on resource: (?P<resource>\S+?)\.(?:\s|$)"
_THRESHOLD = r"Threshold quantity: (?P<threshold>[^,]+), available: (?P<available>\S+?)\.(?:\s|$)"
_NODE_CONDITION = r"The node had condition: \[?(?P<conditions>[^\]]*?)\]?\.(?:\s|$)"
_LOCAL_STORAGE = (
    r"exceeded its local ephemeral storage limit"
    r"|Pod ephemeral local storage usage exceeds the total limit"
    r"|Usage of EmptyDir volume .* exceeds the limit"
)


class EvictionMessage(NamedTuple):
    """What a kubelet eviction message (or event annotation) says about the resource."""

    recognised: bool  # one of the kubelet's eviction formats matched
    resource: PressuredResource
    resource_name: str | None = None  # the kubelet's own word: memory, inodes, [DiskPressure]…
    threshold: str | None = None
    available: str | None = None


def resource_from_name(name: str) -> PressuredResource:
    return _RESOURCE_NAMES.get(name.strip(), PressuredResource.OTHER)


def parse_eviction_message(
    message: str | None, starved_resource: str | None = None
) -> EvictionMessage:
    """Read the pressured resource from a kubelet eviction message; never raises."""
    text = message or ""
    threshold = re.search(_THRESHOLD, text)
    quantity = threshold.group("threshold") if threshold else None
    available = threshold.group("available") if threshold else None
    if starved_resource:
        return EvictionMessage(
            True, resource_from_name(starved_resource), starved_resource, quantity, available
        )
    node_low = re.search(_NODE_LOW, text)
    if node_low:
        name = node_low.group("resource")
        return EvictionMessage(True, resource_from_name(name), name, quantity, available)
    node_condition = re.search(_NODE_CONDITION, text)
    if node_condition:
        names = node_condition.group("conditions").split()
        resources = [PRESSURE_CONDITIONS[n] for n in names if n in PRESSURE_CONDITIONS]
        resource = resources[0] if len(resources) == 1 else PressuredResource.OTHER
        return EvictionMessage(True, resource, node_condition.group("conditions"))
    if re.search(_LOCAL_STORAGE, text):
        return EvictionMessage(True, PressuredResource.EPHEMERAL_STORAGE, "ephemeral-storage")
    return EvictionMessage(False, PressuredResource.OTHER)


class KubeletTermination(StrEnum):
    """Why the kubelet itself terminated a pod, from status reason and messages."""

    EVICTION = "eviction"
    PREEMPTION = "preemption"
    NODE_SHUTDOWN = "node_shutdown"
    UNKNOWN = "unknown"


def kubelet_termination_kind(
    status_reason: str | None, *messages: str | None
) -> KubeletTermination:
    texts = [m for m in messages if m]
    if status_reason == EVICTED_REASON or any(parse_eviction_message(m).recognised for m in texts):
        return KubeletTermination.EVICTION
    if status_reason == PREEMPTING_REASON or any(
        m.startswith(KUBELET_PREEMPTION_MESSAGE) for m in texts
    ):
        return KubeletTermination.PREEMPTION
    if status_reason == LEGACY_NODE_SHUTDOWN_REASON or NODE_SHUTDOWN_MESSAGE in texts:
        return KubeletTermination.NODE_SHUTDOWN
    return KubeletTermination.UNKNOWN
