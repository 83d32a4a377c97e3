"""Deadlines the drain client will enforce (controller/decision/deadline.py): Karpenter's
NodeClaim termination timestamp, the pod's delete time, what is said about it, and the webhook's
429 and GracefulDrainDeadline Warning built on it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.controller.decision.deadline import (
    KARPENTER_TERMINATION_ANNOTATION,
    NodeClaimInfo,
    PodDeadline,
    deadline_json,
    deadlines_by_node,
    parse_termination_timestamp,
    pod_deadline,
)
from graceful_drain.controller.decision.lookups import PodFound
from graceful_drain.controller.decision.model import ObjectRef, PodInfo
from graceful_drain.controller.decision.table import DecisionConfig
from graceful_drain.controller.serving.metrics import Metrics
from graceful_drain.controller.serving.webhook import EvictionWebhook
from graceful_drain.controller.writes.events import (
    DRAIN_DEADLINE,
    DeadlineAhead,
    DrainEvents,
)
from graceful_drain.kube.events import WARNING
from graceful_drain.kube.timefmt import format_rfc3339
from tests.unit.controller.objects import NOW, POD
from tests.unit.controller.test_webhook_loop import (
    FakeCluster,
    ListRecorder,
    Rig,
    ScriptedPatcher,
    answer,
)

DEADLINE = NOW + timedelta(seconds=42)


# --- parsing: what Karpenter writes (Go's time.RFC3339) and what it refuses ------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-05-01T12:00:42Z", datetime(2024, 5, 1, 12, 0, 42, tzinfo=UTC)),
        ("2024-05-01T14:00:42+02:00", datetime(2024, 5, 1, 12, 0, 42, tzinfo=UTC)),
        ("2024-05-01T12:00:42.5Z", datetime(2024, 5, 1, 12, 0, 42, 500000, tzinfo=UTC)),
        ("2024-05-01 12:00:42", None),  # not RFC 3339: time.Parse refuses it too
        ("2024-05-01T12:00:42", None),  # no zone
        ("", None),
        ("tomorrow", None),
        (None, None),
        (1714564842, None),  # raw JSON may hold anything
        ({"t": 1}, None),
    ],
)
def test_parse_termination_timestamp(value: object, expected: datetime | None) -> None:
    assert parse_termination_timestamp(value) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            {"metadata": {"name": "c1", "annotations": {
                KARPENTER_TERMINATION_ANNOTATION: "2024-05-01T12:00:42Z"}},
             "status": {"nodeName": "node-k"}},
            NodeClaimInfo("c1", "node-k", datetime(2024, 5, 1, 12, 0, 42, tzinfo=UTC)),
        ),
        ({"metadata": {"name": "c2"}, "status": {"nodeName": "node-k"}},
         NodeClaimInfo("c2", "node-k", None)),
        ({"metadata": {"name": "c3", "annotations": {KARPENTER_TERMINATION_ANNOTATION: "soon"}}},
         NodeClaimInfo("c3", "", None)),
        ({"metadata": "x", "status": ["y"]}, NodeClaimInfo("", "", None)),
        ({}, NodeClaimInfo("", "", None)),
    ],
)  # fmt: skip
def test_nodeclaim_slim_view(raw: dict[str, Any], expected: NodeClaimInfo) -> None:
    assert NodeClaimInfo.from_object(raw) == expected


def test_deadlines_by_node_keeps_the_earliest_and_skips_what_says_nothing() -> None:
    def claim(name: str, node: str | None, value: str | None) -> dict[str, Any]:
        annotations = {} if value is None else {KARPENTER_TERMINATION_ANNOTATION: value}
        status = {} if node is None else {"nodeName": node}
        return {"metadata": {"name": name, "annotations": annotations}, "status": status}

    claims = [
        claim("a", "node-a", "2024-05-01T12:10:00Z"),
        claim("a2", "node-a", "2024-05-01T12:05:00Z"),
        claim("b", "node-b", None),
        claim("c", None, "2024-05-01T12:00:00Z"),
        claim("d", "node-d", "garbage"),
        "not a claim",
    ]
    assert deadlines_by_node(claims) == {"node-a": datetime(2024, 5, 1, 12, 5, tzinfo=UTC)}
    assert deadlines_by_node(None) == {}


# --- the pod's deadline and what is said about it -------------------------------------------


@pytest.mark.parametrize(
    ("grace", "now", "delete_at", "outage", "says"),
    [
        (5, NOW, DEADLINE - timedelta(seconds=5), "may",
         ["at 2024-05-01T12:00:37Z (in 37s;", "less the pod's 5s grace period",
          "may have no Ready pod"]),
        (30, NOW, DEADLINE - timedelta(seconds=30), "may", ["(in 12s;"]),
        (42, NOW, NOW, "will", ["passed", "will have no Ready pod", "expect an outage"]),
        (600, NOW, DEADLINE - timedelta(seconds=600), "will", ["passed"]),
        (None, NOW, DEADLINE, "may",
         ["by 2024-05-01T12:00:42Z at the latest", "(in 42s;"]),
        (0, DEADLINE + timedelta(seconds=1), DEADLINE, "will", ["passed"]),
    ],
)  # fmt: skip
def test_pod_deadline(grace: int | None, now: datetime, delete_at: datetime, outage: str,
                      says: list[str]) -> None:  # fmt: skip
    deadline = PodDeadline("node-k", DEADLINE, grace)
    assert deadline.delete_at == delete_at
    assert deadline.outage(now) == outage
    sentence = deadline.sentence(now, "default/web")
    assert "node node-k's Karpenter terminationGracePeriod ends at 2024-05-01T12:00:42Z" in sentence
    for part in says:
        assert part in sentence, sentence
    assert len(sentence) < 400


def test_no_deadline_without_a_node_or_an_annotation() -> None:
    assert pod_deadline("", DEADLINE, 5) is None
    assert pod_deadline("node-k", None, 5) is None
    assert pod_deadline("node-k", DEADLINE, 5) == PodDeadline("node-k", DEADLINE, 5)


def test_deadline_json() -> None:
    assert deadline_json(None, NOW) is None
    assert deadline_json(PodDeadline("node-k", DEADLINE, 5), NOW) == {
        "source": KARPENTER_TERMINATION_ANNOTATION, "node": "node-k",
        "nodeDeadline": "2024-05-01T12:00:42Z", "podGraceSeconds": 5,
        "deleteAt": "2024-05-01T12:00:37Z", "secondsLeft": 37.0, "outage": "may",
    }  # fmt: skip


# --- properties: malformed input never crashes, never claims more than it knows --------------

ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=8,
)
TIMESTAMP_TEXT = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
).map(format_rfc3339)


@given(value=ANY_JSON | TIMESTAMP_TEXT | st.text(max_size=40))
def test_any_annotation_parses_to_none_or_what_it_says(value: object) -> None:
    parsed = parse_termination_timestamp(value)
    if parsed is not None:
        assert isinstance(value, str)
        assert parsed.tzinfo is not None
        # Karpenter writes to the second: the instant read back writes the same text
        if "." not in value and value.endswith("Z"):
            assert format_rfc3339(parsed) == value


@given(claim=ANY_JSON, annotation=ANY_JSON | TIMESTAMP_TEXT, node=ANY_JSON)
def test_any_nodeclaim_is_read_without_raising(claim: object, annotation: object,
                                               node: object) -> None:  # fmt: skip
    raw = {"metadata": {"name": "c", "annotations": {KARPENTER_TERMINATION_ANNOTATION: annotation}},
           "status": {"nodeName": node}}  # fmt: skip
    info = NodeClaimInfo.from_object(raw)
    assert info.terminates_at == parse_termination_timestamp(annotation)
    assert info.node_name == (node if isinstance(node, str) else "")
    deadlines_by_node([raw, claim])
    if isinstance(claim, dict):
        NodeClaimInfo.from_object(claim)


@given(
    deadline=st.datetimes(timezones=st.just(UTC)),
    now=st.datetimes(timezones=st.just(UTC)),
    grace=st.none() | st.integers(min_value=0, max_value=2**63 - 1),
)
def test_the_deadline_never_claims_more_than_it_knows(deadline: datetime, now: datetime,
                                                      grace: int | None) -> None:  # fmt: skip
    pod = PodDeadline("node-k", deadline, grace)
    # the pod goes no later than the node, and exactly grace seconds before it when known
    assert pod.delete_at <= deadline
    if grace is not None and pod.delete_at != datetime.min.replace(tzinfo=UTC):
        assert deadline - pod.delete_at == timedelta(seconds=grace)
    assert pod.left(now) >= timedelta(0)
    # "will" (an outage is certain) only once the delete time has passed; else "may"
    assert pod.outage(now) == ("will" if pod.delete_at <= now else "may")
    sentence = pod.sentence(now, "default/web")
    assert ("will have no Ready pod" in sentence) == (pod.outage(now) == "will")
    assert len(sentence) < 400
    assert deadline_json(pod, now) is not None


# --- the webhook's 429 and the Warning --------------------------------------------------------


def deadline_rig(deadlines: dict[str, datetime], pod: PodInfo = POD) -> Rig:
    cluster, patcher, metrics, recorder = (FakeCluster(pod=PodFound(pod)), ScriptedPatcher(),
                                           Metrics(), ListRecorder())  # fmt: skip
    webhook = EvictionWebhook(
        cluster, patcher, config=DecisionConfig(), metrics=metrics,
        events=DrainEvents(recorder), clock=lambda: NOW, deadlines=deadlines.get,
    )  # fmt: skip
    return Rig(cluster, patcher, webhook, metrics, recorder.events)


async def test_a_held_eviction_names_the_deadline_and_warns_once_per_drain() -> None:
    rig = deadline_rig({"node-a": DEADLINE}, replace(POD, grace_seconds=5))
    first = await answer(rig)  # rollout-requested: stamped, 429
    assert first["allowed"] is False and first["status"]["code"] == 429
    message = first["status"]["message"]
    assert "default/web" in message
    assert "Karpenter deletes this pod at 2024-05-01T12:00:37Z (in 37s;" in message, message
    second = await answer(rig)  # held again (the fake keeps no stamp: requested again)
    assert second["allowed"] is False
    warnings = [e for e in rig.events if e.reason == DRAIN_DEADLINE]
    assert len(warnings) == 1, rig.events
    [warning] = warnings
    assert warning.type == WARNING
    assert warning.regarding.name == "web"
    assert warning.message.startswith(f"Eviction of pod {POD.name} from node node-a held: ")
    assert f"Karpenter deletes pod {POD.name} at 2024-05-01T12:00:37Z" in warning.message


async def test_no_deadline_on_the_node_says_nothing_more() -> None:
    rig = deadline_rig({"node-b": DEADLINE})
    response = await answer(rig)
    assert response["allowed"] is False
    assert "Karpenter" not in response["status"]["message"]
    assert not [e for e in rig.events if e.reason == DRAIN_DEADLINE]


async def test_an_allowed_eviction_says_nothing_of_the_deadline() -> None:
    rig = deadline_rig({"node-a": DEADLINE})
    rig.cluster.others_elsewhere = 1  # ready-elsewhere: allowed at once
    response = await answer(rig)
    assert response["allowed"] is True
    assert "Karpenter" not in str(response)
    assert not [e for e in rig.events if e.reason == DRAIN_DEADLINE]


def test_the_warning_is_written_again_for_a_new_deadline_only() -> None:
    recorder = ListRecorder()
    events = DrainEvents(recorder)
    web, pod = ObjectRef("default", "web"), ObjectRef("default", "web-1")
    first = DeadlineAhead(web, pod, PodDeadline("node-a", DEADLINE, 5), NOW)
    assert events.emit(first) is True
    assert events.emit(first) is False
    assert events.emit(msgspec.structs.replace(first, now=NOW + timedelta(seconds=1))) is False
    later = DeadlineAhead(web, pod, PodDeadline("node-a", DEADLINE + timedelta(minutes=5), 5), NOW)
    assert events.emit(later) is True
    other = DeadlineAhead(ObjectRef("default", "api"), pod, first.deadline, NOW)
    assert events.emit(other) is True
    assert [e.reason for e in recorder.events] == [DRAIN_DEADLINE] * 3
