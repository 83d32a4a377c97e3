"""The verdict as a core/v1 Event on the pod."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from graceful_drain.annotations import ACTION_ANNOTATION, CAUSE_ANNOTATION
from graceful_drain.kube.events import MAX_MESSAGE_CHARS
from graceful_drain.termination.evidence import Trigger
from graceful_drain.termination.recording import (
    REASON,
    verdict_event,
)
from graceful_drain.termination.verdict import Action, Cause, EvidenceItem, Fact, Source, Verdict
from tests.unit.termination.fakes import NAMESPACE, NODE, POD_NAME, UID, identity

NOW = datetime(2026, 11, 11, 12, 0, 1, 250000, tzinfo=UTC)


def verdict(action: Action, cause: Cause, detail: str = "the pod was deleted") -> Verdict:
    item = EvidenceItem(Source.POD, Fact.DELETION_REQUESTED, detail, True)
    trigger = Trigger.AFTER_RESTART if action is Action.REPORT_ONLY else Trigger.SIGTERM
    return Verdict(cause, action, None, Source.POD, trigger, NOW, (item,))


def test_the_event_names_the_pod_and_carries_the_summary() -> None:
    decided = verdict(Action.DRAIN_GRACEFULLY, Cause.VOLUNTARY)
    event = verdict_event(identity(), decided, NOW)
    assert event == {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{POD_NAME}.{1794398401_250000000:x}",  # Unix nanoseconds, in hex
            "namespace": NAMESPACE,
            "annotations": {CAUSE_ANNOTATION: "voluntary", ACTION_ANNOTATION: "drain_gracefully"},
        },
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": NAMESPACE,
                           "name": POD_NAME, "uid": UID},
        "reason": REASON,
        "message": decided.summary(),
        "type": "Normal",
        "source": {"component": "graceful-drain", "host": NODE},
        "firstTimestamp": "2026-11-11T12:00:01Z",
        "lastTimestamp": "2026-11-11T12:00:01Z",
        "count": 1,
        "reportingComponent": "graceful-drain",
        "reportingInstance": POD_NAME,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("action", "cause", "kind"),
    [
        (Action.DRAIN_GRACEFULLY, Cause.VOLUNTARY, "Normal"),
        (Action.SHED_LOAD_AND_EXIT_FAST, Cause.INVOLUNTARY_EVICTION, "Warning"),
        (Action.SHED_LOAD_AND_EXIT_FAST, Cause.INDETERMINATE, "Warning"),
        (Action.REPORT_ONLY, Cause.OOM_KILLED, "Normal"),
    ],
)
def test_shedding_is_a_warning(action: Action, cause: Cause, kind: str) -> None:
    assert verdict_event(identity(), verdict(action, cause), NOW)["type"] == kind


def test_an_unknown_uid_and_node_are_left_out() -> None:
    event = verdict_event(
        identity()._replace(uid=None, node_name=None),
        verdict(Action.DRAIN_GRACEFULLY, Cause.VOLUNTARY),
        NOW,
    )
    assert "uid" not in event["involvedObject"]
    assert event["source"] == {"component": "graceful-drain"}


def test_a_long_summary_is_cut_to_the_event_limit() -> None:
    decided = verdict(Action.DRAIN_GRACEFULLY, Cause.VOLUNTARY, "x" * 5000)
    message = verdict_event(identity(), decided, NOW)["message"]
    assert isinstance(message, str)
    assert len(message) == MAX_MESSAGE_CHARS
    assert message.endswith("...")
