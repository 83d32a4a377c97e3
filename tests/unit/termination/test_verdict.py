"""The verdict's JSON schema, summary line and invariants."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from graceful_drain.termination.evidence import Trigger
from graceful_drain.termination.kubelet import PressuredResource
from graceful_drain.termination.verdict import (
    SCHEMA,
    Action,
    Cause,
    EvidenceItem,
    Fact,
    Source,
    Verdict,
)

NOW = datetime(2026, 11, 11, 12, 0, tzinfo=UTC)

DECISIVE = EvidenceItem(
    Source.EVENTS,
    Fact.KUBELET_EVICTED_EVENT,
    "The kubelet recorded\na Warning Evicted event.",
    True,
    (("resource", "memory"), ("message", "The node was low on resource: memory. ")),
)
CONTEXT = EvidenceItem(Source.NODE, Fact.NODE_UNAVAILABLE, "The node could not be read.")


def verdict(*evidence: EvidenceItem, decided_by: Source = Source.EVENTS) -> Verdict:
    return Verdict(
        Cause.INVOLUNTARY_EVICTION,
        Action.SHED_LOAD_AND_EXIT_FAST,
        PressuredResource.MEMORY,
        decided_by,
        Trigger.SIGTERM,
        NOW,
        evidence,
    )


def test_json_schema_is_stable() -> None:
    document = json.loads(verdict(CONTEXT, DECISIVE).to_json())
    assert document == {
        "schema": SCHEMA,
        "cause": "involuntary_eviction",
        "action": "shed_load_and_exit_fast",
        "resource": "memory",
        "decided_by": "events",
        "trigger": "sigterm",
        "decided_at": "2026-11-11T12:00:00Z",
        "evidence": [
            {
                "source": "node",
                "fact": "node_unavailable",
                "decisive": False,
                "detail": "The node could not be read.",
                "values": {},
            },
            {
                "source": "events",
                "fact": "kubelet_evicted_event",
                "decisive": True,
                "detail": "The kubelet recorded a Warning Evicted event.",
                "values": {
                    "resource": "memory",
                    "message": "The node was low on resource: memory. ",
                },
            },
        ],
    }
    assert SCHEMA == "graceful-drain/termination-verdict/v1"


def test_null_resource_is_present_as_null() -> None:
    item = EvidenceItem(Source.CLASSIFIER, Fact.CONSERVATIVE_FALLBACK, "x", True)
    bare = Verdict(
        Cause.INDETERMINATE,
        Action.SHED_LOAD_AND_EXIT_FAST,
        None,
        Source.CLASSIFIER,
        Trigger.SIGTERM,
        NOW,
        (item,),
    )
    assert json.loads(bare.to_json())["resource"] is None


def test_summary_is_one_line_naming_the_deciding_signal() -> None:
    summary = verdict(CONTEXT, DECISIVE).summary()
    assert "\n" not in summary
    assert summary == (
        "involuntary_eviction/memory -> shed_load_and_exit_fast (events/kubelet_evicted_event): "
        "The kubelet recorded a Warning Evicted event."
    )


@pytest.mark.parametrize(
    ("evidence", "decided_by"),
    [
        ((), Source.EVENTS),
        ((CONTEXT,), Source.EVENTS),
        ((DECISIVE, DECISIVE), Source.EVENTS),
        ((DECISIVE,), Source.POD),
    ],
    ids=["empty", "no decisive item", "two decisive items", "decisive from elsewhere"],
)
def test_a_verdict_always_explains_itself(
    evidence: tuple[EvidenceItem, ...], decided_by: Source
) -> None:
    with pytest.raises(ValueError, match="decisive"):
        verdict(*evidence, decided_by=decided_by)
