"""Property tests of the classifier over arbitrary evidence."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.termination.classify import classify
from graceful_drain.termination.evidence import (
    ContainerTermination,
    DisruptionTargetCondition,
    EventRecord,
    EventsSnapshot,
    Evidence,
    NodeCondition,
    NodeSnapshot,
    NodeTaint,
    OwnerRollout,
    PodSnapshot,
    Trigger,
    Unavailable,
    UnavailableReason,
)
from graceful_drain.termination.verdict import Action, Cause, Fact, Source, Verdict

UIDS = ["uid-a", "uid-b", ""]


def maybe(values: list[str]) -> st.SearchStrategy[str | None]:
    """Half the time a meaningful value, else absent or noise."""
    return st.one_of(st.sampled_from(values), st.none() | st.text(max_size=6))


times = st.none() | st.datetimes(
    timezones=st.sampled_from(
        [None, UTC, timezone(timedelta(hours=14)), timezone(-timedelta(hours=12))]
    )
)
messages = maybe(
    [
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 87Mi. ",
        "The node was low on resource: inodes. ",
        "The node had condition: [DiskPressure]. ",
        'Usage of EmptyDir volume "x" exceeds the limit "1Gi". ',
        "Preempted in order to admit critical pod",
        "Pod was terminated in response to imminent node shutdown.",
    ]
)
uids = maybe(UIDS)
known_uids = st.one_of(st.sampled_from(UIDS[:2]), uids)
unavailable = st.builds(Unavailable, st.sampled_from(UnavailableReason), st.text(max_size=10))

conditions = st.builds(
    DisruptionTargetCondition,
    maybe(["True", "False"]),
    maybe(
        [
            "EvictionByEvictionAPI",
            "PreemptionByScheduler",
            "DeletionByTaintManager",
            "DeletionByPodGC",
            "TerminationByKubelet",
        ]
    ),
    messages,
    times,
)
terminations = st.builds(
    ContainerTermination,
    maybe(["app"]),
    maybe(["OOMKilled", "Error", "Completed"]),
    st.none() | st.integers(),
    times,
)


def pods_of(uid: st.SearchStrategy[str | None]) -> st.SearchStrategy[PodSnapshot]:
    return st.builds(
        PodSnapshot,
        uid=uid,
        deletion_timestamp=times,
        deletion_grace_period_seconds=st.none() | st.integers(),
        disruption_target=st.none() | conditions,
        phase=maybe(["Running", "Failed"]),
        reason=maybe(["Evicted", "Preempting", "Terminated", "Shutdown"]),
        message=messages,
        last_terminations=st.lists(terminations, max_size=3).map(tuple),
    )


def events_of(uid: st.SearchStrategy[str | None]) -> st.SearchStrategy[EventRecord]:
    return st.builds(
        EventRecord,
        reason=maybe(["Evicted", "Preempted", "Preempting"]),
        type=maybe(["Warning", "Normal"]),
        source_component=maybe(["kubelet", "default-scheduler"]),
        involved_uid=uid,
        message=messages,
        starved_resource=maybe(["memory", "pids", "inodes"]),
        first_timestamp=times,
        last_timestamp=times,
        event_time=times,
    )


pods = pods_of(uids)
event_records = events_of(uids)
nodes = st.builds(
    NodeSnapshot,
    maybe(["node-a"]),
    st.lists(
        st.builds(
            NodeCondition,
            maybe(["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]),
            maybe(["True", "False", "Unknown"]),
        ),
        max_size=4,
    ).map(tuple),
    st.lists(st.builds(NodeTaint, maybe(["node.kubernetes.io/memory-pressure"])), max_size=2).map(
        tuple
    ),
)
owners = st.builds(OwnerRollout, maybe(["web"]), maybe(["2026-11-11T11:58:00Z"]), times)


@st.composite
def evidence_with(draw: st.DrawFn, uid: st.SearchStrategy[str | None] = known_uids) -> Evidence:
    """Evidence whose pod and events are usually, but not always, about this UID."""
    own = draw(uid)
    attributable = st.one_of(st.just(own), st.just(own), uids)
    records = st.lists(events_of(attributable), max_size=4).map(lambda e: EventsSnapshot(tuple(e)))
    return Evidence(
        own,
        draw(pods_of(attributable) | unavailable),
        draw(records | unavailable),
        draw(nodes | unavailable),
        draw(owners | unavailable),
        draw(st.sampled_from(Trigger)),
    )


now = st.datetimes(timezones=st.sampled_from([None, UTC]))
seconds = st.integers(min_value=-(10**6), max_value=10**9)


def assert_well_formed(verdict: Verdict) -> None:
    assert verdict.evidence
    decisive = [item for item in verdict.evidence if item.decisive]
    assert len(decisive) == 1
    assert decisive[0].source is verdict.decided_by
    assert all(item.fact is not Fact.CLASSIFIER_ERROR for item in verdict.evidence)
    assert "\n" not in verdict.summary()
    json.loads(verdict.to_json())


@given(evidence_with(), now, seconds, seconds)
def test_classify_is_total(ev: Evidence, at: datetime, grace: int, retention: int) -> None:
    verdict = classify(ev, at, grace, retention)
    assert_well_formed(verdict)
    if ev.trigger is Trigger.SIGTERM:
        assert verdict.action is not Action.REPORT_ONLY
        assert verdict.cause is not Cause.OOM_KILLED  # OOM kills never deliver SIGTERM
        assert (verdict.action is Action.DRAIN_GRACEFULLY) == (verdict.cause is Cause.VOLUNTARY)
    else:
        assert verdict.action is Action.REPORT_ONLY


@given(evidence_with(), now, seconds, seconds)
def test_a_drain_always_rests_on_a_voluntary_marker(
    ev: Evidence, at: datetime, grace: int, retention: int
) -> None:
    verdict = classify(ev, at, grace, retention)
    if verdict.action is Action.DRAIN_GRACEFULLY:
        assert verdict.deciding_item.fact in {
            Fact.DISRUPTION_TARGET,
            Fact.DELETION_REQUESTED,
            Fact.ROLLOUT_MARKER,
        }


@given(uids, unavailable, unavailable, unavailable, unavailable, now, seconds, seconds)
def test_nothing_readable_sheds_load(
    uid: str | None,
    pod: Unavailable,
    events: Unavailable,
    node: Unavailable,
    owner: Unavailable,
    at: datetime,
    grace: int,
    retention: int,
) -> None:
    verdict = classify(Evidence(uid, pod, events, node, owner), at, grace, retention)
    assert (verdict.cause, verdict.action) == (Cause.INDETERMINATE, Action.SHED_LOAD_AND_EXIT_FAST)
    assert verdict.decided_by is Source.CLASSIFIER


@given(
    evidence_with(st.sampled_from(["uid-a", "uid-b"])),
    event_records,
    now,
    seconds,
    seconds,
)
def test_a_kubelet_eviction_of_this_uid_never_drains(
    ev: Evidence, record: EventRecord, at: datetime, grace: int, retention: int
) -> None:
    kubelet_evicted = replace(
        record,
        reason="Evicted",
        type="Warning",
        source_component="kubelet",
        involved_uid=ev.pod_uid,
    )
    known = ev.events.events if isinstance(ev.events, EventsSnapshot) else ()
    ev = replace(ev, events=EventsSnapshot((*known, kubelet_evicted)), trigger=Trigger.SIGTERM)
    verdict = classify(ev, at, grace, retention)
    assert verdict.action is Action.SHED_LOAD_AND_EXIT_FAST


@given(evidence_with(st.sampled_from(["uid-a", "uid-b"])), pods, unavailable, now, seconds, seconds)
def test_a_pod_object_with_another_uid_is_never_evidence(
    ev: Evidence,
    other: PodSnapshot,
    why: Unavailable,
    at: datetime,
    grace: int,
    retention: int,
) -> None:
    mismatched = replace(other, uid=f"not-{ev.pod_uid}")
    with_other = classify(replace(ev, pod=mismatched), at, grace, retention)
    without_pod = classify(replace(ev, pod=why), at, grace, retention)
    assert (with_other.cause, with_other.action, with_other.resource, with_other.decided_by) == (
        without_pod.cause,
        without_pod.action,
        without_pod.resource,
        without_pod.decided_by,
    )
    assert Fact.POD_UID_MISMATCH in {item.fact for item in with_other.evidence}
