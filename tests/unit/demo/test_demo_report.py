"""The demo's figures, summary table and JSON document."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.demo.report import Figures, figures, json_document, summary_lines
from graceful_drain.demo.timeline import EvictionAttempt, RunRecord

RECORD = RunRecord(
    client="kubectl",
    node="node-a",
    deployment="default/web",
    with_controller=False,
    started=10.0,
    finished=11.0,
    error=None,
    settled=13.7,
    evictions=(EvictionAttempt(10.05, "default/web-1", 201),),
    ready=((5.0, 1), (10.07, 0), (13.6, 1)),
    replicasets=((4.0, "web-old"), (10.0, "at-the-start"), (10.5, "web-new"), (14.0, "late")),
)


def test_figures_of_a_drain_with_an_outage() -> None:
    assert figures(RECORD) == Figures(
        drain_completed=True,
        drain_seconds=pytest.approx(1.0),  # type: ignore[arg-type]
        zero_ready_seconds=pytest.approx(3.53),  # type: ignore[arg-type]
        rollouts=1,  # only web-new was created inside (start, settled]
    )


@pytest.mark.parametrize(
    ("changes", "completed", "seconds"),
    [
        ({"finished": None}, False, 3.7),  # gave up: measured until the run settled
        ({"error": "global timeout reached"}, False, 1.0),
        ({}, True, 1.0),
    ],
)
def test_drain_completed_and_seconds(changes: dict[str, object], completed: bool,
                                     seconds: float) -> None:  # fmt: skip
    result = figures(replace(RECORD, **changes))  # type: ignore[arg-type]
    assert result.drain_completed is completed
    assert result.drain_seconds == pytest.approx(seconds)


def test_zero_ready_is_counted_from_an_outage_already_running_at_the_start() -> None:
    record = replace(RECORD, ready=((5.0, 0), (12.0, 1)))
    assert figures(record).zero_ready_seconds == pytest.approx(2.0)


def test_no_outage_is_a_float_zero_in_json() -> None:
    seconds = figures(replace(RECORD, ready=((5.0, 1),))).to_json()["zero_ready_seconds"]
    assert isinstance(seconds, float) and seconds == 0.0


def test_json_document_holds_exactly_the_documented_keys() -> None:
    with_controller = Figures(True, 5.28349, 0.0, 1)
    without = Figures(True, 1.07, 3.5712, 0)
    document = json_document("kubectl", with_controller, without)
    assert json.loads(json.dumps(document)) == {
        "client": "kubectl",
        "with_controller": {
            "drain_completed": True, "drain_seconds": 5.283, "zero_ready_seconds": 0.0,
            "rollouts": 1,
        },
        "without_controller": {
            "drain_completed": True, "drain_seconds": 1.07, "zero_ready_seconds": 3.571,
            "rollouts": 0,
        },
    }  # fmt: skip
    assert "without_controller" not in json_document("karpenter", with_controller, None)


def test_summary_table() -> None:
    lines = summary_lines(Figures(True, 5.28, 0.0, 1), Figures(True, 1.07, 3.57, 0))
    assert lines == [
        "summary",
        "                              with graceful-drain  without",
        "  drain completed             yes                  yes",
        "  drain duration              5.3s                 1.1s",
        "  time with no Ready pod      0.00s                3.57s",
        "  rollouts (new ReplicaSets)  1                    0",
    ]
    alone = summary_lines(Figures(False, 40.0, 0.0, 1), None)
    assert alone[1].strip() == "with graceful-drain"
    assert alone[2].split() == ["drain", "completed", "NO"]


@given(
    samples=st.lists(st.tuples(st.floats(0, 30, allow_nan=False), st.integers(0, 3)), max_size=10),
    settle=st.floats(0, 20, allow_nan=False),
)
def test_zero_ready_seconds_stay_within_the_window(samples: list[tuple[float, int]],
                                                   settle: float) -> None:  # fmt: skip
    record = replace(RECORD, ready=tuple(samples), settled=RECORD.started + settle)
    assert 0.0 <= figures(record).zero_ready_seconds <= settle + 1e-9
