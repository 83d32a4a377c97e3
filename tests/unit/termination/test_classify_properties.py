"""Property tests of the classifier over arbitrary evidence."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
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


def records(cls: Any, *args: Any, **kwargs: Any) -> st.SearchStrategy[Any]:
    """`st.builds` of an evidence record, whose fields not given keep their defaults (for a
    NamedTuple, `st.builds` draws those too: a random `shape` would add malformed reads
    that no property here is about)."""
    given = set(cls._fields[: len(args)]) | set(kwargs)
    kept = {name: st.just(value) for name, value in cls._field_defaults.items()
            if name not in given}  # fmt: skip
    return st.builds(cls, *args, **kept, **kwargs)


uids = maybe(UIDS)
known_uids = st.one_of(st.sampled_from(UIDS[:2]), uids)
unavailable = records(Unavailable, st.sampled_from(UnavailableReason), st.text(max_size=10))

conditions = records(
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
terminations = records(
    ContainerTermination,
    maybe(["app"]),
    maybe(["OOMKilled", "Error", "Completed"]),
    st.none() | st.integers(),
    times,
)


def pods_of(uid: st.SearchStrategy[str | None]) -> st.SearchStrategy[PodSnapshot]:
    return records(
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
    return records(
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
nodes = records(
    NodeSnapshot,
    maybe(["node-a"]),
    st.lists(
        records(
            NodeCondition,
            maybe(["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]),
            maybe(["True", "False", "Unknown"]),
        ),
        max_size=4,
    ).map(tuple),
    st.lists(records(NodeTaint, maybe(["node.kubernetes.io/memory-pressure"])), max_size=2).map(
        tuple
    ),
)
owners = records(OwnerRollout, maybe(["web"]), maybe(["2026-11-11T11:58:00Z"]), times)


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
    kubelet_evicted = record._replace(
        reason="Evicted",
        type="Warning",
        source_component="kubelet",
        involved_uid=ev.pod_uid,
    )
    known = ev.events.events if isinstance(ev.events, EventsSnapshot) else ()
    ev = ev._replace(events=EventsSnapshot((*known, kubelet_evicted)), trigger=Trigger.SIGTERM)
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
    mismatched = other._replace(uid=f"not-{ev.pod_uid}")
    with_other = classify(ev._replace(pod=mismatched), at, grace, retention)
    # Another incarnation under our name means ours is gone: as the API's 404 says.
    gone = Unavailable(UnavailableReason.NOT_FOUND, why.detail)
    without_pod = classify(ev._replace(pod=gone), at, grace, retention)
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


Pick = Callable[[Sequence[Any]], Any]  # choose one of the options


def build_pod(pick: Pick) -> Json:
    meta: dict[str, Json] = {"name": "web-7d9f-abcde", "namespace": "shop", "uid": OURS}
    if pick([True, False]):
        meta["deletionTimestamp"] = pick(DELETION_STAMPS)
        meta["deletionGracePeriodSeconds"] = 30
    conditions: list[Json] = [{"type": "Ready", "status": "True"}]
    if pick([True, False]):
        conditions.append({
            "type": "DisruptionTarget",
            "status": pick(["True", "True", "False", "Unknown"]),
            "reason": pick(CONDITION_REASONS),
            "message": pick(["Eviction API: evicting", *KUBELET_MESSAGES]),
            "lastTransitionTime": "2026-11-11T11:59:59Z",
        })  # fmt: skip
    status: dict[str, Json] = {"phase": "Running", "conditions": conditions}
    if pick(range(4)) == 0:
        status["reason"] = pick(["Evicted", "Preempting", "Terminated"])
        status["message"] = pick(KUBELET_MESSAGES)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": "node-a", "terminationGracePeriodSeconds": 30},
            "status": status}  # fmt: skip


def build_event(pick: Pick) -> Json:
    uid = pick([OURS, OURS, OURS, "uid-other"])
    reason = pick(["Evicted", "Evicted", "Preempted", "Preempting", "Killing"])
    component = pick(["kubelet", "Kubelet", "kubelet", "default-scheduler", "karpenter"])
    message = pick(["Preempted by pod x on node node-a", "Evicted pod", *KUBELET_MESSAGES])
    if pick([True, False]):  # core/v1, as the kubelet's recorder writes it
        return {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "annotations": {"starved_resource": "memory"}},
            "involvedObject": {"kind": "Pod", "name": "web-7d9f-abcde", "uid": uid},
            "reason": reason, "message": message,
            "type": pick(["Warning", "Normal"]),
            "source": {"component": component, "host": "node-a"},
            "reportingComponent": component,
            "firstTimestamp": "2026-11-11T11:59:58Z", "lastTimestamp": "2026-11-11T11:59:58Z",
        }  # fmt: skip
    return {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
        "regarding": {"kind": "Pod", "name": "web-7d9f-abcde", "uid": uid},
        "reason": reason, "note": message, "type": pick(["Warning", "Normal"]),
        "action": "Preempting", "reportingController": component,
        "deprecatedSource": {"component": component},
        "eventTime": "2026-11-11T11:59:58.000000Z",
    }  # fmt: skip


def build_events(pick: Pick) -> Json:
    items = [build_event(pick) for _ in range(pick([0, 0, 1, 1, 2, 3]))]
    return {"apiVersion": "v1", "kind": "EventList", "metadata": {}, "items": items}


def build_node(pick: Pick) -> Json:
    taint = pick(range(6)) == 0
    return {
        "metadata": {"name": "node-a"},
        "spec": {
            "taints": [{"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}]
            if taint
            else []
        },
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": pick(["False", "False", "False", "True"])},
                {"type": "Ready", "status": "True"},
            ]
        },
    }


def build_deployment(pick: Pick) -> Json:
    if pick([True, False]):
        return {"metadata": {"name": "web"}}
    return {"metadata": {"name": "web", "annotations": {RESTARTED_AT: pick(RESTART_STAMPS)}}}


def build_raw(pick: Pick) -> dict[str, Json]:
    gone = Unavailable(UnavailableReason.NOT_FOUND, "gone")
    return {
        "pod": build_pod(pick) if pick(range(4)) else gone,
        "events": build_events(pick),
        "node": build_node(pick),
        "deployment": build_deployment(pick),
    }


@st.composite
def raw_evidence(draw: st.DrawFn) -> dict[str, Json]:
    return build_raw(lambda options: draw(st.sampled_from(list(options))))


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


STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T")
IMPLAUSIBLE_STAMPS = ["3000-01-01T00:00:00Z", "1970-01-01T00:00:00Z", "2026-11-13T12:00:00Z"]
CLOSED_VALUES = {"True", "False", "Unknown"}  # a condition's status: a cut is no legal value


def damages(value: Json) -> list[tuple[str, Json]]:
    """Every damage tried on one field: replaced by a value of each other JSON type; a
    timestamp or a condition status cut short (at each separator, where a cut stamp still
    looks whole — "2026-11-11T12:00" — and at its first and last characters); a timestamp
    moved to an implausible time (the year 3000, 1970, two days ahead).  A name, reason or
    key cut to another well-formed string ("Ev", a taint "n") is not damage but another
    world (an event with another reason), which no reader can tell apart."""
    found: list[tuple[str, Json]] = []
    if isinstance(value, str) and value and (STAMP.match(value) or value in CLOSED_VALUES):
        ends = {0, 1, len(value) - 1} | {i for i, c in enumerate(value) if i and not c.isalnum()}
        found += [
            (f"cut to {value[:end]!r}", value[:end]) for end in sorted(ends) if end < len(value)
        ]
    if isinstance(value, str) and STAMP.match(value):
        found += [(f"= {stamp!r}", stamp) for stamp in IMPLAUSIBLE_STAMPS]
    found += [(f"= {other!r}", other) for other in OTHER_TYPES if not same_type(other, value)]
    return found


def verdict_of(raw: dict[str, Json], rollout_timeout: timedelta) -> Verdict:
    verdict = classify(evidence_from_raw(raw), MOMENT, 30, 3600, rollout_timeout)
    assert Fact.CLASSIFIER_ERROR not in {item.fact for item in verdict.evidence}
    return verdict


def drains(raw: dict[str, Json], rollout_timeout: timedelta) -> bool:
    return verdict_of(raw, rollout_timeout).action is Action.DRAIN_GRACEFULLY


# Keys whose absence is another world, not a damaged read: the API server omits them when
# they are empty (a node without taints, a pod without a status reason), so no reader can
# tell "removed" from "never there".  They are still corrupted like every other field.
OPTIONAL_FACTS = {
    ("node", "spec", "taints"),
    ("pod", "status", "reason"),
    ("pod", "status", "message"),
}
FAILED_READS = [
    Unavailable(UnavailableReason.TIMEOUT, "no answer within the deadline"),
    Unavailable(UnavailableReason.FORBIDDEN, "HTTP 403"),
    Unavailable(UnavailableReason.ERROR, "HTTP 500"),
]
SIGNALS = ("pod", "events", "node", "deployment")


Mutation = tuple[str, tuple[str | int, ...], Json]  # (what, where, with what)


def mutated(raw: dict[str, Json], mutation: Mutation) -> dict[str, Json]:
    how, path, replacement = mutation
    if how == "fail":
        return {**raw, str(path[0]): replacement}
    tree = {k: v for k, v in raw.items() if not isinstance(v, Unavailable)}

    def apply(parent: Json, key: str | int) -> None:
        if how == "remove":
            del parent[key]
        else:
            parent[key] = replacement

    return {**raw, **changed(tree, path, apply)}


def mutation_at(raw: dict[str, Json], choice: int) -> Mutation:
    """The `choice`-th single mutation of `raw`: a piece (a signal's read, or a field at any
    depth), then what is done to it."""
    tree = {k: v for k, v in raw.items() if not isinstance(v, Unavailable)}
    pieces: list[tuple[str | int, ...]] = [(signal,) for signal in tree]
    pieces += [p for p in paths(tree) if len(p) >= 2]
    piece = pieces[choice % len(pieces)]
    choice //= len(pieces)
    if len(piece) == 1:
        return ("fail", piece, FAILED_READS[choice % len(FAILED_READS)])
    value: Json = tree
    for key in piece:
        value = value[key]
    shape = tuple(k if isinstance(k, str) else 0 for k in piece)
    ops: list[tuple[str, Json]] = []
    if not isinstance(piece[-1], int) and shape not in OPTIONAL_FACTS:
        ops.append(("remove", None))
    # JSON null is absence to the API server: for an optional key, another world too.
    ops += [op for op in damages(value) if shape not in OPTIONAL_FACTS or op[1] is not None]
    how, replacement = ops[choice % len(ops)]
    return (how, piece, replacement)


@settings(max_examples=10_000, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32), choice=st.integers(min_value=0))
def test_removing_or_corrupting_any_piece_never_makes_the_answer_more_voluntary(
    seed: int, choice: int
) -> None:
    """Issue 42: one piece of generated evidence — a signal's whole read (timed out,
    forbidden, failed), a key the API server writes, a value, a list item — removed or
    corrupted (another JSON type, not an object, a cut or implausible timestamp) never
    turns a shed into a drain.  One mutation per example, the evidence built from a seed
    (Hypothesis draws two integers, which keeps 10,000 examples to seconds)."""
    rng = random.Random(seed)
    raw = build_raw(rng.choice)
    rollout_timeout = rng.choice([timedelta(minutes=10), timedelta(minutes=1)])
    if drains(raw, rollout_timeout):
        return  # nothing is more voluntary than a drain
    mutation = mutation_at(raw, choice)
    assert not drains(mutated(raw, mutation), rollout_timeout), (seed, mutation)


@settings(max_examples=300, deadline=None)
@given(raw=raw_evidence(), choice=st.integers(min_value=0))
def test_the_same_property_over_drawn_evidence(raw: dict[str, Json], choice: int) -> None:
    """The property above, with Hypothesis drawing every field (slower; shrinks better)."""
    if drains(raw, timedelta(minutes=10)):
        return
    mutation = mutation_at(raw, choice)
    assert not drains(mutated(raw, mutation), timedelta(minutes=10)), mutation


def test_the_generator_reaches_both_answers_and_every_kind_of_evidence() -> None:
    """Not a property: keeps the generator honest.  Over 2,000 seeds it must produce drains
    and sheds, and sheds decided by an Evicted event, by node pressure and by malformed
    evidence once mutated."""
    facts: set[Fact] = set()
    actions: set[Action] = set()
    for seed in range(2_000):
        rng = random.Random(seed)
        raw = build_raw(rng.choice)
        verdict = verdict_of(raw, timedelta(minutes=10))
        actions.add(verdict.action)
        facts.add(verdict.deciding_item.fact)
        facts.add(
            verdict_of(
                mutated(raw, mutation_at(raw, seed)), timedelta(minutes=10)
            ).deciding_item.fact
        )
    assert actions == {Action.DRAIN_GRACEFULLY, Action.SHED_LOAD_AND_EXIT_FAST}
    assert {
        Fact.KUBELET_EVICTED_EVENT, Fact.NODE_PRESSURE, Fact.EVIDENCE_MALFORMED,
        Fact.DISRUPTION_TARGET, Fact.DELETION_REQUESTED, Fact.ROLLOUT_MARKER,
    } <= facts, facts  # fmt: skip
