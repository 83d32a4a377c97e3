"""Building evidence from raw Kubernetes JSON, including malformed JSON."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.termination.evidence import (
    MAX_RAW_VALUE_CHARS,
    ConditionState,
    ContainerTermination,
    EventRecord,
    EventsSnapshot,
    NodeSnapshot,
    OwnerRollout,
    PodSnapshot,
    Unavailable,
    UnavailableReason,
)
from graceful_drain.termination.kubelet import PressuredResource

T0 = datetime(2026, 11, 11, 11, 59, 50, tzinfo=UTC)

EVICTED_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web-7d9f-abcde",
        "namespace": "shop",
        "uid": "uid-1",
        "deletionTimestamp": "2026-11-11T11:59:50Z",
        "deletionGracePeriodSeconds": 30,
        "ownerReferences": [
            {"kind": "Node", "name": "n"},
            {"kind": "ReplicaSet", "name": "web-old"},
            {"kind": "ReplicaSet", "name": "web-7d9f", "controller": True},
        ],
    },
    "spec": {"nodeName": "node-a"},
    "status": {
        "phase": "Failed",
        "reason": "Evicted",
        "message": "The node was low on resource: memory. ",
        "conditions": [
            {"type": "Ready", "status": "False"},
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "TerminationByKubelet",
                "message": "The node was low on resource: memory. ",
                "lastTransitionTime": "2026-11-11T11:59:50Z",
            },
        ],
        "containerStatuses": [
            {
                "name": "app",
                "lastState": {
                    "terminated": {
                        "reason": "OOMKilled",
                        "exitCode": 137,
                        "finishedAt": "2026-11-11T11:00:00Z",
                    }
                },
            },
            {"name": "sidecar", "lastState": {}},
        ],
    },
}


def test_pod_from_object_reads_every_field() -> None:
    pod = PodSnapshot.from_object(EVICTED_POD)
    assert (pod.uid, pod.name, pod.namespace, pod.node_name) == (
        "uid-1",
        "web-7d9f-abcde",
        "shop",
        "node-a",
    )
    assert pod.deletion_timestamp == T0
    assert pod.deletion_grace_period_seconds == 30
    assert pod.disruption_target is not None
    assert pod.disruption_target.is_true
    assert pod.disruption_target.reason == "TerminationByKubelet"
    assert pod.disruption_target.last_transition_time == T0
    assert (pod.phase, pod.reason) == ("Failed", "Evicted")
    assert pod.last_terminations == (
        ContainerTermination("app", "OOMKilled", 137, datetime(2026, 11, 11, 11, tzinfo=UTC)),
    )
    assert pod.last_terminations[0].oom_killed
    assert pod.owner_replicaset == "web-7d9f"


def test_the_pods_replicaset_is_its_controller_as_kube_owners_reads_it() -> None:
    """One rule for a pod's owner (kube/owners.py), the one the detector's owner chain
    follows (signals.py): a ReplicaSet that owns the pod without being its controller is
    not its ReplicaSet."""
    metadata = {
        **EVICTED_POD["metadata"],
        "ownerReferences": [{"kind": "ReplicaSet", "name": "web-old"}],
    }
    assert PodSnapshot.from_object({**EVICTED_POD, "metadata": metadata}).owner_replicaset is None


MALFORMED_PODS: list[Any] = [
    None,
    "pod",
    [],
    {"metadata": []},
    {"metadata": {"uid": 7, "deletionTimestamp": "yesterday", "ownerReferences": "rs"}},
    {"metadata": {"deletionTimestamp": 1700000000, "deletionGracePeriodSeconds": True}},
    {"status": "Running"},
    {"status": {"conditions": {"type": "DisruptionTarget"}}},
    {"status": {"conditions": [None, 3, {"type": "DisruptionTarget", "status": True}]}},
    {"status": {"containerStatuses": [{"lastState": {"terminated": "OOMKilled"}}]}},
    {"status": {"containerStatuses": [{"lastState": {"terminated": {"exitCode": "137"}}}]}},
]


@pytest.mark.parametrize("raw", MALFORMED_PODS, ids=repr)
def test_pod_from_malformed_object_reads_as_absent(raw: Any) -> None:
    pod = PodSnapshot.from_object(raw)
    assert pod.uid is None
    assert pod.deletion_timestamp is None  # unparseable reads as unset: the safe direction
    assert pod.deletion_grace_period_seconds is None
    assert pod.owner_replicaset is None
    if pod.disruption_target is not None:
        assert not pod.disruption_target.is_true  # status must be the string "True"
    for termination in pod.last_terminations:
        assert termination.exit_code is None


@pytest.mark.parametrize(
    ("stamp", "expected"),
    [
        ("2026-11-11T11:59:50Z", T0),
        ("2026-11-11T11:59:50.000000Z", T0),  # MicroTime
        ("2026-11-11T12:59:50+01:00", T0),
        # v3: strict RFC 3339, so a cut stamp never reads as a deletion
        ("2026-11-11T11:59:50", None),
        ("2026-11-11T11:59", None),
        ("2026-11-11", None),
        ("11:59", None),
        ("", None),
    ],
)
def test_deletion_timestamps(stamp: str, expected: datetime | None) -> None:
    raw = {"metadata": {"deletionTimestamp": stamp}}
    assert PodSnapshot.from_object(raw).deletion_timestamp == expected


CORE_EVENT: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "x", "annotations": {"starved_resource": "memory"}},
    "involvedObject": {"kind": "Pod", "name": "web", "uid": "uid-1"},
    "reason": "Evicted",
    "type": "Warning",
    "message": "The node was low on resource: memory. ",
    "source": {"component": "kubelet", "host": "node-a"},
    "firstTimestamp": "2026-11-11T11:59:40Z",
    "lastTimestamp": "2026-11-11T11:59:50Z",
}

EVENTS_V1_EVENT: dict[str, Any] = {
    "apiVersion": "events.k8s.io/v1",
    "kind": "Event",
    "regarding": {"kind": "Pod", "name": "web", "uid": "uid-1"},
    "related": {"kind": "Pod", "name": "vip", "uid": "uid-9"},
    "reason": "Preempted",
    "action": "Preempting",
    "type": "Normal",
    "note": "Preempted by pod uid-9 on node node-a",
    "reportingController": "default-scheduler",
    "eventTime": "2026-11-11T11:59:30.000000Z",
    "series": {"count": 2, "lastObservedTime": "2026-11-11T11:59:50.000000Z"},
}


def test_core_v1_event() -> None:
    record = EventRecord.from_object(CORE_EVENT)
    assert (record.reason, record.type, record.source_component) == (
        "Evicted",
        "Warning",
        "kubelet",
    )
    assert record.from_kubelet
    assert (record.involved_uid, record.involved_kind) == ("uid-1", "Pod")
    assert record.starved_resource == "memory"
    assert record.observed_at == T0


def test_events_k8s_io_v1_event() -> None:
    record = EventRecord.from_object(EVENTS_V1_EVENT)
    assert record.source_component == "default-scheduler"
    assert not record.from_kubelet
    assert record.involved_uid == "uid-1"  # regarding, not related
    assert (record.reason, record.action) == ("Preempted", "Preempting")
    assert record.message == "Preempted by pod uid-9 on node node-a"
    assert record.observed_at == T0  # series.lastObservedTime


def test_events_k8s_io_kubelet_event_via_deprecated_source() -> None:
    raw = {"regarding": {"uid": "u"}, "deprecatedSource": {"component": "kubelet"}}
    assert EventRecord.from_object(raw).from_kubelet


@pytest.mark.parametrize(
    "raw", [{"items": [CORE_EVENT, EVENTS_V1_EVENT]}, [CORE_EVENT, EVENTS_V1_EVENT]]
)
def test_events_snapshot_from_list_or_event_list(raw: Any) -> None:
    snapshot = EventsSnapshot.from_object(raw)
    assert isinstance(snapshot, EventsSnapshot)
    assert [e.reason for e in snapshot.events] == ["Evicted", "Preempted"]


@pytest.mark.parametrize(
    "raw", [None, {}, {"items": None}, {"items": "x"}, {"items": {"a": 1}}, 5, "events"]
)
def test_an_events_answer_without_an_items_list_is_malformed(raw: Any) -> None:
    """v3: "no items" is not "no Evicted event" (that would let a drain verdict through);
    v4: it is malformed evidence, named by its field."""
    snapshot = EventsSnapshot.from_object(raw)
    assert snapshot.events == ()
    [problem] = snapshot.shape.malformed
    assert problem.split(":")[0] in {"items", "(the events list)"}


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        ([None], "items[1]: not an object (NoneType)"),
        ([1], "items[1]: not an object (int)"),
        (["x"], "items[1]: not an object (str)"),
    ],
)
def test_an_event_item_that_is_not_an_object_is_malformed(items: list[Any], problem: str) -> None:
    snapshot = EventsSnapshot.from_object({"items": [CORE_EVENT, *items]})
    assert snapshot.shape.malformed == (problem,)


def test_an_empty_items_list_is_read_and_empty() -> None:
    snapshot = EventsSnapshot.from_object({"kind": "EventList", "items": []})
    assert isinstance(snapshot, EventsSnapshot) and snapshot.events == ()


@pytest.mark.parametrize(
    ("status", "state"),
    [
        ("True", ConditionState.TRUE),
        ("False", ConditionState.FALSE),
        ("Unknown", ConditionState.UNKNOWN),
        ("true", ConditionState.UNKNOWN),
        ("TRUE", ConditionState.UNKNOWN),
        (True, ConditionState.UNKNOWN),
        (1, ConditionState.UNKNOWN),
        ("", ConditionState.UNKNOWN),
        (None, ConditionState.UNKNOWN),
        (["True"], ConditionState.UNKNOWN),
    ],
)
def test_disruption_target_status_is_compared_as_the_api_defines_it(
    status: object, state: ConditionState
) -> None:
    raw: dict[str, object] = {"type": "DisruptionTarget", "reason": "TerminationByKubelet"}
    if status is not None:
        raw["status"] = status
    pod = PodSnapshot.from_object(
        {
            "metadata": {"uid": "u", "name": "p", "namespace": "n"},
            "spec": {},
            "status": {"conditions": [raw]},
        }
    )
    condition = pod.disruption_target
    assert condition is not None
    assert condition.state is state
    # A status of the wrong type, or none at all, is malformed besides.
    malformed = any("status.conditions[0].status" in p for p in pod.shape.malformed)
    assert malformed is (not isinstance(status, str))
    assert condition.is_true is (state is ConditionState.TRUE)


NODE: dict[str, Any] = {
    "metadata": {"name": "node-a"},
    "spec": {
        "taints": [
            {"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"},
            {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"},
            "junk",
        ]
    },
    "status": {
        "conditions": [
            {"type": "MemoryPressure", "status": "True", "reason": "KubeletHasInsufficientMemory"},
            {"type": "PIDPressure", "status": "False"},
            {"type": "Ready", "status": "True"},
            None,
        ]
    },
}


def test_node_pressures_from_conditions_and_taints() -> None:
    node = NodeSnapshot.from_object(NODE)
    assert node.name == "node-a"
    pressures = {(p.resource, p.via, p.name) for p in node.pressures()}
    assert pressures == {
        (PressuredResource.MEMORY, "condition", "MemoryPressure"),
        (PressuredResource.EPHEMERAL_STORAGE, "taint", "node.kubernetes.io/disk-pressure"),
    }


@pytest.mark.parametrize("raw", [None, {}, {"status": {"conditions": "x"}}, {"spec": []}])
def test_node_from_malformed(raw: Any) -> None:
    assert NodeSnapshot.from_object(raw).pressures() == ()


@pytest.mark.parametrize(
    ("annotations", "present", "parsed"),
    [
        ({RESTARTED_AT_ANNOTATION: "2026-11-11T11:59:50Z"}, True, T0),
        ({RESTARTED_AT_ANNOTATION: "not a time"}, True, None),  # present all the same
        ({RESTARTED_AT_ANNOTATION: ""}, True, None),
        ({RESTARTED_AT_ANNOTATION: 1700000000}, True, None),
        # v3: only strict RFC 3339 is a time (no naive or date-only ISO forms)
        ({RESTARTED_AT_ANNOTATION: "2026-11-11T11:59:50"}, True, None),
        ({RESTARTED_AT_ANNOTATION: "2026-11-11 11:59:50Z"}, True, None),
        ({RESTARTED_AT_ANNOTATION: "2026-11-11"}, True, None),
        ({RESTARTED_AT_ANNOTATION: "2026-11-11T12:59:50+01:00"}, True, T0),
        ({"other": "x"}, False, None),
        (None, False, None),
    ],
)
def test_owner_rollout_marker(
    annotations: dict[str, str] | None, present: bool, parsed: datetime | None
) -> None:
    owner = OwnerRollout.from_object({"metadata": {"name": "web", "annotations": annotations}})
    assert owner.deployment == "web"
    assert owner.marker_present is present
    assert owner.restarted_at == parsed


def test_a_huge_stamp_is_repeated_cut_short() -> None:
    huge = "2026-11-11T11:59:50Z" + "x" * (8 * 1024 * 1024)
    owner = OwnerRollout.from_object({"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: huge}}})
    assert owner.marker_present and owner.restarted_at is None
    assert owner.restarted_at_raw is not None
    assert len(owner.restarted_at_raw) == MAX_RAW_VALUE_CHARS


def test_unavailable_reads_for_people() -> None:
    why = Unavailable(UnavailableReason.TIMEOUT, "no answer within 2.00s")
    assert str(why) == "timeout: no answer within 2.00s"
    assert str(Unavailable(UnavailableReason.FORBIDDEN)) == "forbidden"


def test_no_owning_deployment_has_no_marker() -> None:
    assert not OwnerRollout.no_deployment().marker_present
    assert OwnerRollout.no_deployment().deployment is None


# --- nothing raises, whatever the API server sent -------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=12,
)


def shaped(template: Any) -> st.SearchStrategy[Any]:
    """Objects with the template's keys (each optional) and arbitrary JSON or the
    template's own shape at every position, to reach the parsers' deep paths."""
    if isinstance(template, dict):
        return st.fixed_dictionaries(
            {}, optional={k: shaped(v) | json_values for k, v in template.items()}
        )
    if isinstance(template, list) and template:
        return st.lists(st.one_of(*(shaped(t) for t in template)) | json_values, max_size=3)
    return st.just(template) | json_values


@given(json_values | shaped(EVICTED_POD))
def test_pod_from_object_never_raises(raw: Any) -> None:
    PodSnapshot.from_object(raw)


@given(json_values | shaped({"items": [CORE_EVENT, EVENTS_V1_EVENT]}))
def test_events_from_object_never_raises(raw: Any) -> None:
    snapshot = EventsSnapshot.from_object(raw)
    if isinstance(snapshot, EventsSnapshot):
        for record in snapshot.events:
            _ = (record.observed_at, record.from_kubelet)


@given(json_values | shaped(NODE))
def test_node_from_object_never_raises(raw: Any) -> None:
    NodeSnapshot.from_object(raw).pressures()


@given(json_values | shaped({"metadata": {"name": "web", "annotations": {"a": "b"}}}))
def test_owner_from_object_never_raises(raw: Any) -> None:
    _ = OwnerRollout.from_object(raw).marker_present


@pytest.mark.parametrize("component", ["kube", 7, None, "default-scheduler"])
def test_an_event_is_the_kubelets_if_any_source_field_says_so(component: object) -> None:
    """v3: one damaged source field cannot hide the kubelet's record."""
    raw = {**CORE_EVENT, "source": {"component": component}, "reportingComponent": "kubelet"}
    assert EventRecord.from_object(raw).from_kubelet
