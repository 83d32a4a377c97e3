"""Property tests of the classifier over arbitrary evidence."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import given, settings
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


# --- malformed evidence is never more voluntary than absent evidence (v3) ---------------
#
# Raw API JSON, as the collectors get it, is built into Evidence exactly as the detector
# builds it; one field anywhere in it is then removed (the baseline) or damaged — a string
# cut short, or a value of another JSON type — and the damaged evidence must never drain
# where the baseline sheds.

MOMENT = datetime(2026, 11, 11, 12, 0, tzinfo=UTC)
OURS = "uid-ours"
Json = Any

DELETION_STAMPS = [
    "2026-11-11T12:00:30Z",
    "2026-11-11T12:00:30.123456Z",
    "2026-11-11T13:00:30+01:00",
]
RESTART_STAMPS = [
    "2026-11-11T11:58:00Z",
    "2026-11-11T11:58:00.123456Z",
    "2026-11-11T12:58:00+01:00",
]
KUBELET_MESSAGES = [
    "The node was low on resource: memory. Threshold quantity: 100Mi, available: 87Mi. ",
    "Preempted in order to admit critical pod",
    "Pod was terminated in response to imminent node shutdown.",
    'Container app exceeded its local ephemeral storage limit "1Gi". ',
]
CONDITION_REASONS = [
    "EvictionByEvictionAPI", "EvictionByEvictionAPI", "PreemptionByScheduler",
    "DeletionByTaintManager", "DeletionByPodGC", "TerminationByKubelet",
]  # fmt: skip


@st.composite
def raw_pod(draw: st.DrawFn) -> Json:
    meta: dict[str, Json] = {"name": "web-7d9f-abcde", "namespace": "shop", "uid": OURS}
    if draw(st.booleans()):
        meta["deletionTimestamp"] = draw(st.sampled_from(DELETION_STAMPS))
        meta["deletionGracePeriodSeconds"] = 30
    conditions: list[Json] = [{"type": "Ready", "status": "True"}]
    if draw(st.booleans()):
        conditions.append({
            "type": "DisruptionTarget",
            "status": draw(st.sampled_from(["True", "True", "False", "Unknown"])),
            "reason": draw(st.sampled_from(CONDITION_REASONS)),
            "message": draw(st.sampled_from(["Eviction API: evicting", *KUBELET_MESSAGES])),
            "lastTransitionTime": "2026-11-11T11:59:59Z",
        })  # fmt: skip
    status: dict[str, Json] = {"phase": "Running", "conditions": conditions}
    if draw(st.integers(0, 3)) == 0:
        status["reason"] = draw(st.sampled_from(["Evicted", "Preempting", "Terminated"]))
        status["message"] = draw(st.sampled_from(KUBELET_MESSAGES))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": "node-a", "terminationGracePeriodSeconds": 30},
            "status": status}  # fmt: skip


@st.composite
def raw_event(draw: st.DrawFn) -> Json:
    uid = draw(st.sampled_from([OURS, OURS, OURS, "uid-other"]))
    reason = draw(st.sampled_from(["Evicted", "Evicted", "Preempted", "Preempting", "Killing"]))
    component = draw(st.sampled_from(["kubelet", "kubelet", "default-scheduler", "descheduler"]))
    message = draw(st.sampled_from(["Preempted by pod x on node node-a", *KUBELET_MESSAGES]))
    if draw(st.booleans()):  # core/v1, as the kubelet's recorder writes it
        return {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "annotations": {"starved_resource": "memory"}},
            "involvedObject": {"kind": "Pod", "name": "web-7d9f-abcde", "uid": uid},
            "reason": reason, "message": message,
            "type": draw(st.sampled_from(["Warning", "Normal"])),
            "source": {"component": component, "host": "node-a"},
            "reportingComponent": component,
            "firstTimestamp": "2026-11-11T11:59:58Z", "lastTimestamp": "2026-11-11T11:59:58Z",
        }  # fmt: skip
    return {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
        "regarding": {"kind": "Pod", "name": "web-7d9f-abcde", "uid": uid},
        "reason": reason, "note": message, "type": "Warning", "action": "Preempting",
        "reportingController": component, "deprecatedSource": {"component": component},
        "eventTime": "2026-11-11T11:59:58.000000Z",
    }  # fmt: skip


raw_events = st.lists(raw_event(), max_size=3).map(
    lambda items: {"apiVersion": "v1", "kind": "EventList", "metadata": {}, "items": items}
)
raw_node = st.builds(
    lambda pressure, taint: {
        "metadata": {"name": "node-a"},
        "spec": {
            "taints": [{"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}]
            if taint
            else []
        },
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": pressure},
                {"type": "Ready", "status": "True"},
            ]
        },
    },
    st.sampled_from(["False", "False", "True"]),
    st.integers(0, 3).map(lambda n: n == 0),
)
raw_deployment = st.one_of(
    st.just({"metadata": {"name": "web"}}),
    st.sampled_from(RESTART_STAMPS).map(
        lambda stamp: {"metadata": {"name": "web", "annotations": {RESTARTED_AT: stamp}}}
    ),
)
RESTARTED_AT = "graceful-drain.stonal.com/restarted-at"


def evidence_from_raw(raw: dict[str, Json]) -> Evidence:
    """As the collectors build it (signals.py); a pod that could not be read stays so."""
    pod = raw["pod"]
    return Evidence(
        OURS,
        pod if isinstance(pod, Unavailable) else PodSnapshot.from_object(pod),
        EventsSnapshot.from_object(raw["events"]),
        NodeSnapshot.from_object(raw["node"]),
        OwnerRollout.from_object(raw["deployment"]),
    )


def paths(value: Json, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found: list[tuple[str | int, ...]] = []
    children: list[tuple[str | int, Json]] = []
    if isinstance(value, dict):
        children = list(value.items())
    elif isinstance(value, list):
        children = list(enumerate(value))
    for key, child in children:
        found.append((*prefix, key))
        found.extend(paths(child, (*prefix, key)))
    return found


def changed(raw: Json, path: tuple[str | int, ...], change: Any) -> Json:
    """A deep copy of `raw` with `change(parent, key)` applied at `path`."""
    copy = json.loads(json.dumps(raw))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    change(parent, path[-1])
    return copy


OTHER_TYPES: list[Json] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    1.5,
    "",
    "x",
    "True",
    [],
    ["x"],
    {},
    {"k": "v"},
]


def same_type(a: Json, b: Json) -> bool:
    def kind(value: Json) -> type:
        return float if type(value) is int else type(value)  # JSON has one number type

    return kind(a) is kind(b)


def damages(value: Json) -> list[tuple[str, Json]]:
    """Every damage tried on one field: cut short (at each separator, where a cut stamp or
    name still looks whole — "2026-11-11T12:00", "kube" — and at its first and last
    characters), and replaced by a value of each other JSON type."""
    found: list[tuple[str, Json]] = []
    if isinstance(value, str) and value:
        ends = {0, 1, len(value) - 1} | {i for i, c in enumerate(value) if i and not c.isalnum()}
        found += [
            (f"cut to {value[:end]!r}", value[:end]) for end in sorted(ends) if end < len(value)
        ]
    found += [(f"= {other!r}", other) for other in OTHER_TYPES if not same_type(other, value)]
    return found


def drains(raw: dict[str, Json], rollout_timeout: timedelta) -> bool:
    verdict = classify(evidence_from_raw(raw), MOMENT, 30, 3600, rollout_timeout)
    assert Fact.CLASSIFIER_ERROR not in {item.fact for item in verdict.evidence}
    return verdict.action is Action.DRAIN_GRACEFULLY


@settings(max_examples=60, deadline=None)  # each example tries every field, every damage
@given(
    pod=raw_pod() | st.just(Unavailable(UnavailableReason.NOT_FOUND, "gone")),
    events=raw_events,
    node=raw_node,
    deployment=raw_deployment,
    rollout_timeout=st.sampled_from([timedelta(minutes=10), timedelta(minutes=1)]),
)
def test_malformed_evidence_is_never_more_voluntary_than_absent_evidence(
    pod: Json, events: Json, node: Json, deployment: Json, rollout_timeout: timedelta
) -> None:
    """Every field of the raw evidence, each damage of it: never a drain where the same
    evidence without that field sheds."""
    raw = {"pod": pod, "events": events, "node": node, "deployment": deployment}
    tree = {k: v for k, v in raw.items() if not isinstance(v, Unavailable)}

    def remove(parent: Json, key: str | int) -> None:
        del parent[key]

    for path in (p for p in paths(tree) if len(p) >= 2):
        value: Json = tree
        for key in path:
            value = value[key]
        absent_drains: bool | None = None
        for how, replacement in damages(value):

            def damage(parent: Json, key: str | int, new: Json = replacement) -> None:
                parent[key] = new

            if not drains({**raw, **changed(tree, path, damage)}, rollout_timeout):
                continue
            if absent_drains is None:
                absent_drains = drains({**raw, **changed(tree, path, remove)}, rollout_timeout)
            assert absent_drains, f"{path} {how} (was {value!r}) drains; absent, it sheds"


@given(raw_pod(), raw_events, raw_node, raw_deployment)
def test_the_raw_generator_reaches_both_answers(
    pod: Json, events: Json, node: Json, deployment: Json
) -> None:
    """Not a property: keeps the generator honest (it must produce drains and sheds)."""
    raw = {"pod": pod, "events": events, "node": node, "deployment": deployment}
    drains(raw, timedelta(minutes=10))
