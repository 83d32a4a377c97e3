"""Reading the kubelet's eviction messages (formats from pkg/kubelet/eviction/helpers.go,
eviction_manager.go, preemption/preemption.go and nodeshutdown)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.termination.kubelet import (
    KubeletTermination,
    PressuredResource,
    kubelet_termination_kind,
    parse_eviction_message,
)

MEMORY = PressuredResource.MEMORY
DISK = PressuredResource.EPHEMERAL_STORAGE
PID = PressuredResource.PID
OTHER = PressuredResource.OTHER

# (message, starved_resource annotation, resource, kubelet's name, threshold, available)
MESSAGES = [
    (
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 87Mi. ",
        None,
        MEMORY,
        "memory",
        "100Mi",
        "87Mi",
    ),
    (
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: -2300Ki. "
        "Container app was using 1Gi, request is 512Mi, has larger consumption of memory. ",
        None,
        MEMORY,
        "memory",
        "100Mi",
        "-2300Ki",
    ),
    (
        "The node was low on resource: ephemeral-storage. Container prometheus was using 20Ki, "
        "which exceeds its request of 0. ",
        None,
        DISK,
        "ephemeral-storage",
        None,
        None,
    ),
    ("The node was low on resource: inodes. ", None, DISK, "inodes", None, None),
    ("The node was low on resource: pids. ", None, PID, "pids", None, None),
    ("The node was low on resource: memory.", None, MEMORY, "memory", None, None),
    ("The node was low on resource: hugepages-2Mi. ", None, OTHER, "hugepages-2Mi", None, None),
    ("The node had condition: [DiskPressure]. ", None, DISK, "DiskPressure", None, None),
    ("The node had condition: [PIDPressure]. ", None, PID, "PIDPressure", None, None),
    (
        "The node had condition: [MemoryPressure DiskPressure]. ",
        None,
        OTHER,
        "MemoryPressure DiskPressure",
        None,
        None,
    ),
    (
        'Container app exceeded its local ephemeral storage limit "1Gi". ',
        None,
        DISK,
        "ephemeral-storage",
        None,
        None,
    ),
    (
        "Pod ephemeral local storage usage exceeds the total limit of containers 2Gi. ",
        None,
        DISK,
        "ephemeral-storage",
        None,
        None,
    ),
    (
        'Usage of EmptyDir volume "cache" exceeds the limit "1Gi". ',
        None,
        DISK,
        "ephemeral-storage",
        None,
        None,
    ),
    ("garbled", "memory", MEMORY, "memory", None, None),
    (None, "pids", PID, "pids", None, None),
    (
        "The node was low on resource: memory. Threshold quantity: 1Gi, available: 10Mi. ",
        "ephemeral-storage",  # the structured annotation wins over the text
        DISK,
        "ephemeral-storage",
        "1Gi",
        "10Mi",
    ),
]


@pytest.mark.parametrize(
    ("message", "starved", "resource", "name", "threshold", "available"), MESSAGES
)
def test_parse_eviction_message(
    message: str | None,
    starved: str | None,
    resource: PressuredResource,
    name: str | None,
    threshold: str | None,
    available: str | None,
) -> None:
    parsed = parse_eviction_message(message, starved)
    assert parsed.recognised
    assert (parsed.resource, parsed.resource_name) == (resource, name)
    assert (parsed.threshold, parsed.available) == (threshold, available)


@pytest.mark.parametrize(
    "message",
    [None, "", "garbage", "Pod was terminated in response to imminent node shutdown."],
)
def test_unrecognised_messages_are_other(message: str | None) -> None:
    parsed = parse_eviction_message(message)
    assert not parsed.recognised
    assert parsed.resource is OTHER


@given(st.one_of(st.none(), st.text()), st.one_of(st.none(), st.text()))
def test_parse_eviction_message_never_raises(message: str | None, starved: str | None) -> None:
    assert parse_eviction_message(message, starved).resource in PressuredResource


KINDS = [
    ("Evicted", (), KubeletTermination.EVICTION),
    (None, ("The node was low on resource: memory. ",), KubeletTermination.EVICTION),
    ("Preempting", (), KubeletTermination.PREEMPTION),
    (None, ("Preempted in order to admit critical pod",), KubeletTermination.PREEMPTION),
    (
        "Terminated",
        ("Pod was terminated in response to imminent node shutdown.",),
        KubeletTermination.NODE_SHUTDOWN,
    ),
    ("Shutdown", (), KubeletTermination.NODE_SHUTDOWN),  # v1.21
    ("Terminated", (), KubeletTermination.UNKNOWN),  # too generic on its own
    (None, (None, "Eviction API: evicting"), KubeletTermination.UNKNOWN),
    (None, (), KubeletTermination.UNKNOWN),
]


@pytest.mark.parametrize(("reason", "messages", "kind"), KINDS)
def test_kubelet_termination_kind(
    reason: str | None, messages: tuple[str | None, ...], kind: KubeletTermination
) -> None:
    assert kubelet_termination_kind(reason, *messages) is kind
